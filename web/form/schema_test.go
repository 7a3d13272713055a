package form_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/bindery-dev/bindery/web/form"
)

const schema = `{
  "type": "object",
  "required": ["size", "engine"],
  "properties": {
    "size": {"type": "integer", "minimum": 1, "maximum": 64, "default": 4, "description": "GB"},
    "engine": {"type": "string", "enum": ["pg16", "pg17"], "default": "pg17"},
    "ratio": {"type": "number"},
    "public": {"type": "boolean", "default": false},
    "password": {"type": "string", "format": "password"},
    "extensions": {"type": "array", "items": {"type": "string"}},
    "backup": {
      "type": "object",
      "title": "Backups",
      "required": ["hour"],
      "properties": {
        "hour": {"type": "integer", "default": 3},
        "keep": {"type": ["integer", "null"], "enum": [7, 30]}
      }
    }
  }
}`

func TestFieldsFromSchema(t *testing.T) {
	fields, err := form.Fields(json.RawMessage(schema), "p", nil, map[string]string{"p.size": "too big"})
	if err != nil {
		t.Fatal(err)
	}
	// Required first, then by name.
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	want := []string{"p.engine", "p.size", "p.backup", "p.extensions", "p.password", "p.public", "p.ratio"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	by := map[string]form.Field{}
	var walk func([]form.Field)
	walk = func(fs []form.Field) {
		for _, f := range fs {
			by[f.Name] = f
			walk(f.Fields)
		}
	}
	walk(fields)
	cases := []struct {
		name, input, value string
	}{
		{"p.size", "number", "4"}, {"p.engine", "select", "pg17"}, {"p.ratio", "number", ""},
		{"p.public", "checkbox", ""}, {"p.password", "password", ""}, {"p.extensions", "lines", ""},
		{"p.backup", "group", ""}, {"p.backup.hour", "number", "3"}, {"p.backup.keep", "select", ""},
	}
	for _, c := range cases {
		f := by[c.name]
		if f.Input() != c.input || f.Value != c.value {
			t.Errorf("%s: input %q value %q, want %q %q", c.name, f.Input(), f.Value, c.input, c.value)
		}
	}
	if f := by["p.size"]; f.Error != "too big" || f.Min != "1" || f.Max != "64" || !f.Required || f.DescribedBy() != f.ID+"-hint "+f.ID+"-error" {
		t.Errorf("size: %+v", f)
	}
	if by["p.backup"].Label != "Backups" || !by["p.backup.hour"].Required || by["p.backup.keep"].Required {
		t.Errorf("nested: %+v", by["p.backup"])
	}
	if got := by["p.backup.keep"].Enum; !reflect.DeepEqual(got, []string{"7", "30"}) {
		t.Errorf("enum of integers: %v", got)
	}

	// Given values win over defaults, and secrets are never shown back.
	fields, _ = form.Fields(json.RawMessage(schema), "p", map[string]any{"size": 8.0, "password": "s3cret", "public": true}, nil)
	for _, f := range fields {
		switch f.Name {
		case "p.size":
			if f.Value != "8" {
				t.Errorf("size %q", f.Value)
			}
		case "p.password":
			if f.Value != "" {
				t.Error("a password is shown back")
			}
		case "p.public":
			if !f.Checked {
				t.Error("public not checked")
			}
		case "p.engine":
			if f.Value != "" {
				t.Errorf("a default shown where values were given: %q", f.Value)
			}
		}
	}
}

func TestParse(t *testing.T) {
	posted := url.Values{
		"p.size": {"16"}, "p.engine": {"pg16"}, "p.ratio": {"0.5"}, "p.public.present": {"1"},
		"p.extensions": {"pgcrypto\n\n citext \n"}, "p.backup.hour": {"2"}, "p.backup.keep": {"30"},
	}
	got, errs, err := form.Parse(json.RawMessage(schema), "p", posted)
	if err != nil || len(errs) != 0 {
		t.Fatalf("%v %v", err, errs)
	}
	want := map[string]any{"size": int64(16), "engine": "pg16", "ratio": 0.5, "public": false,
		"extensions": []any{"pgcrypto", "citext"}, "backup": map[string]any{"hour": int64(2), "keep": int64(30)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %#v\nwant %#v", got, want)
	}

	// Each problem names its field; empty optional fields are left out.
	_, errs, _ = form.Parse(json.RawMessage(schema), "p", url.Values{"p.size": {"big"}, "p.ratio": {"x"}, "p.engine": {"mysql"}, "p.backup.keep": {"9"}})
	gotErrs := map[string]string{}
	for _, e := range errs {
		gotErrs[e.Field] = e.Message
	}
	wantErrs := map[string]string{"p.size": "must be a whole number", "p.ratio": "must be a number",
		"p.engine": "must be one of the listed values", "p.backup.keep": "must be one of the listed values", "p.backup.hour": "required"}
	if !reflect.DeepEqual(gotErrs, wantErrs) {
		t.Fatalf("errors %v\nwant %v", gotErrs, wantErrs)
	}
	got, errs, _ = form.Parse(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), "p", url.Values{})
	if len(got) != 0 || len(errs) != 0 {
		t.Fatalf("empty form: %v %v", got, errs)
	}
}
