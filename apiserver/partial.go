package apiserver

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// partialJSON is obj's metadata as a PartialObjectMetadata of gvk, in
// JSON: each item of a PartialObjectMetadataList.
func partialJSON(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	return appendPartialJSON(make([]byte, 0, 1024), obj, gvk)
}

// appendPartialJSON appends partialJSON's document to buf: also the object
// of each row of a Table.
func appendPartialJSON(buf []byte, obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	if k := kindOf(obj); k != nil {
		om, _, _ := k.parts(obj)
		if out, ok := appendPartial(buf, om, gvk); ok {
			return out, nil
		}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.SetGroupVersionKind(gvk)
	out, err := json.Marshal(p)
	return append(buf, out...), err
}

// appendPartial appends the JSON json.Marshal writes for a
// PartialObjectMetadata of gvk with metadata m, byte for byte, for the
// metadata the catalog's instances and bindings have: a page of a Table
// spent a third of its time in json.Marshal's reflection and its second
// pass over each metav1.Time. ok is false, and nothing is appended, when m
// has a field this does not write (json.Marshal is used then).
func appendPartial(buf []byte, m *metav1.ObjectMeta, gvk schema.GroupVersionKind) ([]byte, bool) {
	if m.GenerateName != "" || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil ||
		len(m.OwnerReferences) > 0 || len(m.ManagedFields) > 0 {
		return buf, false
	}
	//lint:ignore SA1019 json.Marshal still writes a selfLink that is set.
	if m.SelfLink != "" {
		return buf, false
	}
	w := &objectWriter{buf: append(buf, '{'), first: true, ok: true}
	w.string("kind", gvk.Kind)
	w.string("apiVersion", gvk.GroupVersion().String())
	w.key("metadata")
	w.buf, w.first = append(w.buf, '{'), true
	w.string("name", m.Name)
	w.string("namespace", m.Namespace)
	w.string("uid", string(m.UID))
	w.string("resourceVersion", m.ResourceVersion)
	if m.Generation != 0 {
		w.key("generation")
		w.buf = strconv.AppendInt(w.buf, m.Generation, 10)
	}
	if !m.CreationTimestamp.IsZero() {
		w.key("creationTimestamp")
		w.buf = strconv.AppendQuote(w.buf, m.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	w.stringMap("labels", m.Labels)
	w.stringMap("annotations", m.Annotations)
	if len(m.Finalizers) > 0 {
		w.key("finalizers")
		for i, f := range m.Finalizers {
			w.buf = append(w.buf, "[,"[min(i, 1)])
			w.quote(f)
		}
		w.buf = append(w.buf, ']')
	}
	if !w.ok {
		return buf, false
	}
	return append(w.buf, "}}"...), true
}

// objectWriter appends a JSON object's members as json.Marshal writes
// them; ok turns false at the first string it does not write as
// encoding/json would (appendString).
type objectWriter struct {
	buf       []byte
	first, ok bool
}

// key begins the member name.
func (w *objectWriter) key(name string) {
	if !w.first {
		w.buf = append(w.buf, ',')
	}
	w.first = false
	w.quote(name)
	w.buf = append(w.buf, ':')
}

// string writes the member name: value, unless value is empty (omitempty).
func (w *objectWriter) string(name, value string) {
	if value != "" {
		w.key(name)
		w.quote(value)
	}
}

func (w *objectWriter) quote(s string) {
	var ok bool
	if w.buf, ok = appendString(w.buf, s); !ok {
		w.ok = false
	}
}

// stringMap writes the member name: m with its keys sorted, as json.Marshal
// writes a map, unless m is empty (omitempty).
func (w *objectWriter) stringMap(name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	w.key(name)
	w.buf = append(w.buf, '{')
	// Sorted in place, with no allocation for the usual few keys.
	var few [16]string
	keys := few[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.quote(k)
		w.buf = append(w.buf, ':')
		w.quote(m[k])
	}
	w.buf = append(w.buf, '}')
}

// appendString appends s quoted, when it is printable ASCII that
// encoding/json writes as it is (no quote, backslash or the HTML
// characters it escapes); ok is false otherwise.
func appendString(buf []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if !asIs[s[i]] {
			return buf, false
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), true
}

// asIs marks the bytes appendString writes as they are: one lookup a byte
// instead of six comparisons.
var asIs = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()
