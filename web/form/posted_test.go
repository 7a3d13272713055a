package form

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/catalog"
)

// TestPosted walks a form through the helper as a handler does: read,
// the page's own check, the catalog's errors absorbed, shown again.
func TestPosted(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer","minimum":1},"note":{"type":"string"}}}`)
	p := Read(url.Values{
		"name": {"  orders-db "}, "password": {" s3cret "}, "bad": {"a\x00b"},
		"spec.parameters.size": {"many"}, "spec.parameters.note": {"x\x00"},
	}, map[string]string{"bad": "contains a NUL character", "spec.parameters.note": "contains a NUL character"})

	if p.Value("name") != "orders-db" || p.Secret("password") != " s3cret " || p.Value("bad") != "" {
		t.Fatalf("values: %q %q %q", p.Value("name"), p.Secret("password"), p.Value("bad"))
	}
	if p.OK() {
		t.Fatal("a form with unstorable text is OK")
	}
	if _, err := p.Parameters(schema, "spec.parameters"); err != nil {
		t.Fatal(err)
	}
	if p.Problems["spec.parameters.size"] == "" {
		t.Fatal("a word for an integer is no problem")
	}
	p.Add("name", "taken")
	p.Add("name", "a second problem is not kept")
	if !p.Absorb(&catalog.ValidationError{Errors: field.ErrorList{
		field.Required(field.NewPath("spec", "url"), ""), field.Invalid(field.NewPath("name"), "x", "also bad"),
	}}, func(f string) string {
		if f == "spec.url" {
			return "url"
		}
		return f
	}) {
		t.Fatal("a validation error not absorbed")
	}
	if p.Absorb(errors.New("boom"), nil) {
		t.Fatal("another error absorbed")
	}
	want := map[string]string{
		"bad": "contains a NUL character", "spec.parameters.note": "contains a NUL character",
		"spec.parameters.size": p.Problems["spec.parameters.size"], "name": "taken", "url": "The broker URL is required.",
	}
	if !reflect.DeepEqual(p.Problems, want) {
		t.Fatalf("problems %v, want %v", p.Problems, want)
	}
	fields, err := p.Fields(schema, "spec.parameters")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		switch f.Name {
		case "spec.parameters.size":
			if f.Value != "many" || f.Error == "" {
				t.Errorf("size shown again as %q, error %q", f.Value, f.Error)
			}
		case "spec.parameters.note":
			if f.Value != "" {
				t.Errorf("unstorable text shown again: %q", f.Value)
			}
		}
	}
	if got := p.Other(append(Names(fields), "name")...); !reflect.DeepEqual(got, []string{"The bad: contains a NUL character", "The broker URL is required."}) {
		t.Fatalf("other problems %q", got)
	}
}
