package catalog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// TestMetaReaderAsUnmarshal: metaReader decodes a metadata document as
// json.Unmarshal of a metaDoc does, whether PostgreSQL printed it (jsonb's
// spaces) or encoding/json wrote it, and fails where it fails.
func TestMetaReaderAsUnmarshal(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{}`,
		`{"labels": {"app": "bench", "team": "t1"}, "finalizers": ["example.com/a", "b"], "annotations": {"note": "x"}}`,
		`{"labels":{"app":"bench"},"annotations":{"a":"1","b":"2"}}`,
		`{"labels": {}, "finalizers": [], "annotations": {}}`,
		`{"labels": null, "finalizers": null, "annotations": null, "extra": null}`,
		`{"annotations": {"note": "say \"hi\"\\n\u0001 \t café ☕ \u2028 <b>&"}}`,
		`{"labels": {"k\u00e9y": "v"}, "extra": {"generateName": "db-", "ownerReferences": [{"kind": "Pod", "name": "p"}]}}`,
		`{"unknown": {"a": [1, 2, {"b": null}]}, "labels": {"a": "b"}}`,
		` { "labels" : { "a" : "b" } } `,
		`null`,
	}
	r := newMetaReader()
	for _, doc := range docs {
		var want Meta
		if err := decodeMeta([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var got Meta
		if err := r.decode([]byte(doc), &got); err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", doc, got, want)
		}
	}
	for _, doc := range []string{
		``, `[]`, `{"labels": {"a": 1}}`, `{"labels": ["a"]}`, `{"finalizers": {"a": "b"}}`,
		`{"finalizers": ["a", 2]}`, `{"labels": {"a": "b"}`, `{"labels": {"a": "b"}} x`, `{"labels": {"a": "\x"}}`,
	} {
		errUnmarshal := decodeMeta([]byte(doc), &Meta{})
		if errUnmarshal == nil {
			t.Fatalf("%s: json.Unmarshal takes it", doc)
		}
		var got Meta
		if err := r.decode([]byte(doc), &got); err == nil {
			t.Errorf("%s: decoded as %#v, want an error (json.Unmarshal: %v)", doc, got, errUnmarshal)
		}
	}
}

// FuzzMetaReader: for any input, metaReader decodes what json.Unmarshal
// of a metaDoc decodes, the same way, or fails. It may fail where
// Unmarshal does not only for what a jsonb column cannot hold: invalid
// UTF-8 or a name twice in one object. A member named as a field in
// other letter cases (Unmarshal matches "LABELS" to labels) is not
// compared: the column's names are the ones Bindery writes.
func FuzzMetaReader(f *testing.F) {
	for _, doc := range []string{
		`{}`, `null`, `{"labels": {"app": "bench"}, "finalizers": ["a"], "annotations": {"n": "x"}}`,
		`{"labels": null, "finalizers": null, "annotations": null, "extra": null}`,
		`{"extra": {"generateName": "db-"}, "unknown": [1, {"b": null}]}`, `{"labels": {"a": 1}}`,
		`{"annotations": {"note": "say \"hi\"\\n\u0001 café \u2028"}}`, ` { "labels" : { "a" : "b" } } `,
	} {
		f.Add([]byte(doc))
	}
	r := newMetaReader()
	f.Fuzz(func(t *testing.T, doc []byte) {
		if foldedField(doc) {
			t.Skip()
		}
		var want Meta
		errUnmarshal := decodeMeta(doc, &want)
		var got Meta
		err := r.decode(doc, &got)
		switch {
		case err != nil && errUnmarshal == nil && jsontext.Value(doc).IsValid():
			t.Fatalf("%q: %v, but json.Unmarshal takes it", doc, err)
		case err == nil && errUnmarshal != nil:
			t.Fatalf("%q: decoded as %#v, but json.Unmarshal fails: %v", doc, got, errUnmarshal)
		case err == nil:
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q:\n got %#v\nwant %#v", doc, got, want)
			}
		}
	})
}

// foldedField reports whether doc is an object with a member named as
// one of metaDoc's fields in other letter cases.
func foldedField(doc []byte) bool {
	var members map[string]jsontext.Value
	if jsonv1.Unmarshal(doc, &members) != nil {
		return false
	}
	for name := range members {
		for _, field := range []string{"labels", "annotations", "finalizers", "extra"} {
			if name != field && strings.EqualFold(name, field) {
				return true
			}
		}
	}
	return false
}

// TestMetaReaderKeepsStringsOnce: a string read again by the same reader
// is the one it kept, not a new copy.
func TestMetaReaderKeepsStringsOnce(t *testing.T) {
	t.Parallel()
	r := newMetaReader()
	var a, b Meta
	doc := []byte(`{"labels": {"servicecatalog.k8s.io/spec.clusterServicePlanRef.name": "0123456789abcdef0123456789abcdef0123456789abcdef01234567"}}`)
	if err := r.decode(doc, &a); err != nil {
		t.Fatal(err)
	}
	if err := r.decode(doc, &b); err != nil {
		t.Fatal(err)
	}
	for k, v := range a.Labels {
		if unsafe.StringData(v) != unsafe.StringData(b.Labels[k]) {
			t.Errorf("label %s: its value read twice is two strings", k)
		}
	}
}

// BenchmarkMetaDecode decodes the metadata of a page of 500 instances as
// PostgreSQL prints it: json.Unmarshal of a metaDoc (go-json-experiment's
// v1, then encoding/json's) against metaReader, a new one for each
// document (as a single read uses it) and one for the page.
func BenchmarkMetaDecode(b *testing.B) {
	var docs [][]byte
	for i := range 500 {
		docs = append(docs, []byte(fmt.Sprintf(`{"labels": {"app": "bench", "team": "t%d", `+
			`"servicecatalog.k8s.io/spec.clusterServicePlanRef.name": "%056d", `+
			`"servicecatalog.k8s.io/spec.clusterServiceClassRef.name": "%056d"}}`, i%100, i%3, i%2)))
	}
	// page decodes the page's documents with decode, from a new state
	// (start) for each page.
	page := func(start func() func(doc []byte) error) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decode := start()
				for _, doc := range docs {
					if err := decode(doc); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.Run("unmarshal", page(func() func([]byte) error {
		return func(doc []byte) error { var md metaDoc; return jsonv1.Unmarshal(doc, &md) }
	}))
	b.Run("encoding-json", page(func() func([]byte) error {
		return func(doc []byte) error { var md metaDoc; return json.Unmarshal(doc, &md) }
	}))
	b.Run("reader-each", page(func() func([]byte) error {
		return func(doc []byte) error { return newMetaReader().decode(doc, &Meta{}) }
	}))
	b.Run("reader", page(func() func([]byte) error {
		r := newMetaReader()
		return func(doc []byte) error { return r.decode(doc, &Meta{}) }
	}))
}
