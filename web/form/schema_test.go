package form_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/bindery-dev/bindery/internal/params"
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

// choices is a schema with what OSB brokers write beyond plain objects:
// $ref to $defs, oneOf with a discriminating const, anyOf of a number or a
// word, allOf, and a schema that refers to itself.
const choices = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "s3": {"type": "object", "title": "S3 bucket", "required": ["bucket"], "properties": {
      "kind": {"const": "s3"}, "bucket": {"type": "string"}, "region": {"type": "string", "default": "eu-west-1"}}},
    "disk": {"type": "object", "required": ["path"], "properties": {
      "kind": {"const": "disk"}, "path": {"type": "string", "minLength": 2}}},
    "size": {"type": "integer", "minimum": 1, "maximum": 64, "default": 4},
    "tree": {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/tree"}}}
  },
  "required": ["size"],
  "properties": {
    "size": {"$ref": "#/$defs/size", "description": "GB"},
    "backup": {"title": "Backups", "oneOf": [{"$ref": "#/$defs/s3"}, {"$ref": "#/$defs/disk"}]},
    "connections": {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "unlimited"}]},
    "tls": {"allOf": [{"type": "object", "properties": {"cert": {"type": "string", "format": "password"}}},
      {"required": ["mode"], "properties": {"mode": {"enum": ["require", "verify-full"]}}}]},
    "layout": {"$ref": "#/$defs/tree"}
  }
}`

func index(fields []form.Field) map[string]form.Field {
	by := map[string]form.Field{}
	var walk func([]form.Field)
	walk = func(fs []form.Field) {
		for _, f := range fs {
			by[f.Name] = f
			walk(f.Fields)
			for _, a := range f.Alternatives {
				walk(a.Fields)
			}
		}
	}
	walk(fields)
	return by
}

func TestFieldsOfChoicesAndRefs(t *testing.T) {
	fields, err := form.Fields(json.RawMessage(choices), "p", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := index(fields)
	// $ref: the referred keywords, with the referring site's description.
	if f := by["p.size"]; f.Input() != "number" || f.Value != "4" || f.Min != "1" || f.Max != "64" || f.Description != "GB" || !f.Required {
		t.Errorf("size through $ref: %+v", f)
	}
	// oneOf: a choice, labelled by title or by the discriminating const;
	// the first alternative chosen by default, its defaults filled in.
	backup := by["p.backup"]
	if backup.Input() != "choice" || backup.Label != "Backups" || len(backup.Alternatives) != 2 || backup.AnyOf {
		t.Fatalf("backup: %+v", backup)
	}
	if a := backup.Alternatives; a[0].Label != "S3 bucket" || a[1].Label != "disk" || !a[0].Chosen || a[1].Chosen {
		t.Errorf("alternatives %+v", a)
	}
	if f := by["p.backup~0.bucket"]; f.Path != "p.backup.bucket" || !f.Required || f.Input() != "text" {
		t.Errorf("bucket: %+v", f)
	}
	if f := by["p.backup~0.region"]; f.Value != "eu-west-1" {
		t.Errorf("region default: %+v", f)
	}
	if f := by["p.backup~1.kind"]; f.Input() != "const" || f.Value != "disk" {
		t.Errorf("discriminator: %+v", f)
	}
	if backup.ChoiceName() != "p.backup~" {
		t.Errorf("choice name %q", backup.ChoiceName())
	}
	// anyOf of a number or a word.
	conn := by["p.connections"]
	if !conn.AnyOf || len(conn.Alternatives) != 2 || conn.Alternatives[0].Label != "integer" || conn.Alternatives[1].Label != "unlimited" {
		t.Fatalf("connections: %+v", conn)
	}
	if f := conn.Alternatives[0].Fields[0]; f.Name != "p.connections~0" || f.Input() != "number" || f.Min != "1" {
		t.Errorf("connections as a number: %+v", f)
	}
	// allOf: the properties and requirements of every part.
	if f := by["p.tls.mode"]; !f.Required || f.Input() != "select" {
		t.Errorf("tls.mode: %+v", f)
	}
	if f := by["p.tls.cert"]; f.Input() != "password" {
		t.Errorf("tls.cert: %+v", f)
	}
	// A schema that refers to itself ends.
	if _, ok := by["p.layout.child.child.name"]; !ok {
		t.Errorf("recursive schema not shown a few levels deep")
	}

	// The current value picks its alternative, as the schema library
	// judges it; errors by parameter path go to that alternative's field.
	fields, err = form.Fields(json.RawMessage(choices), "p",
		map[string]any{"size": 8.0, "backup": map[string]any{"kind": "disk", "path": "/srv"}, "connections": "unlimited"},
		map[string]string{"p.backup.path": "too short"})
	if err != nil {
		t.Fatal(err)
	}
	by = index(fields)
	if a := by["p.backup"].Alternatives; a[0].Chosen || !a[1].Chosen {
		t.Errorf("disk value, chosen: %v %v", a[0].Chosen, a[1].Chosen)
	}
	if f := by["p.backup~1.path"]; f.Value != "/srv" || f.Error != "too short" {
		t.Errorf("path: %+v", f)
	}
	if f := by["p.backup~0.region"]; f.Value != "eu-west-1" || f.Error != "" {
		t.Errorf("the other alternative: %+v", f)
	}
	if a := by["p.connections"].Alternatives; !a[1].Chosen {
		t.Errorf("unlimited not chosen")
	}
}

func TestParseChoices(t *testing.T) {
	posted := url.Values{
		"p.size": {"8"}, "p.backup~": {"1"}, "p.backup~1.path": {"/srv/backups"}, "p.backup~0.bucket": {"not read"},
		"p.connections~": {"0"}, "p.connections~0": {"20"}, "p.tls.mode": {"require"},
	}
	got, errs, err := form.Parse(json.RawMessage(choices), "p", posted)
	if err != nil || len(errs) != 0 {
		t.Fatalf("%v %v", err, errs)
	}
	want := map[string]any{"size": int64(8), "backup": map[string]any{"kind": "disk", "path": "/srv/backups"},
		"connections": int64(20), "tls": map[string]any{"mode": "require"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %#v\nwant %#v", got, want)
	}
	// What the form makes is what the schema accepts.
	s, err := params.Compile(json.RawMessage(choices), true)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	decoded, _ := params.Decode(raw)
	if msgs := s.Validate("p", decoded); len(msgs) != 0 {
		t.Fatalf("the form's parameters are invalid: %v", msgs)
	}

	// The chosen alternative's required field, by its input's name; an
	// optional object left alone is left out without complaint.
	// (Defaults shown and left as they were do not count as filling in.)
	got, errs, _ = form.Parse(json.RawMessage(choices), "p", url.Values{"p.size": {"8"}, "p.backup~": {"0"},
		"p.backup~0.region": {"eu-west-1"}, "p.connections~": {"1"}})
	if len(errs) != 0 {
		t.Fatalf("errors of an untouched optional choice: %v", errs)
	}
	if _, ok := got["backup"]; ok {
		t.Fatalf("untouched optional choice sent: %#v", got)
	}
	if got["connections"] != "unlimited" {
		t.Fatalf("const alternative: %#v", got)
	}
	if _, ok := got["tls"]; ok {
		t.Fatalf("untouched optional object sent: %#v", got)
	}
	_, errs, _ = form.Parse(json.RawMessage(choices), "p", url.Values{"p.size": {"8"}, "p.backup~": {"0"}, "p.backup~0.region": {"us-east-1"}})
	if len(errs) != 1 || errs[0].Field != "p.backup~0.bucket" || errs[0].Message != "required" {
		t.Fatalf("errors %v", errs)
	}

	// Shown again, the form keeps what was posted and its errors.
	fields, err := form.Refill(json.RawMessage(choices), "p", url.Values{"p.backup~": {"1"}, "p.backup~1.path": {"x"}},
		map[string]string{"p.backup.path": "too short", "p.size": "required"})
	if err != nil {
		t.Fatal(err)
	}
	by := index(fields)
	if f := by["p.backup~1.path"]; f.Value != "x" || f.Error != "too short" || !by["p.backup"].Alternatives[1].Chosen {
		t.Errorf("refilled path: %+v", f)
	}
	if f := by["p.size"]; f.Value != "" || f.Error != "required" {
		t.Errorf("refilled size: %+v", f)
	}
}

// A schema whose root is a choice.
func TestRootChoice(t *testing.T) {
	const root = `{"oneOf": [
	  {"title": "Small", "type": "object", "properties": {"tier": {"const": "small"}}},
	  {"title": "Custom", "type": "object", "required": ["cpus"], "properties": {"tier": {"const": "custom"}, "cpus": {"type": "integer"}}}]}`
	fields, err := form.Fields(json.RawMessage(root), "p", nil, nil)
	if err != nil || len(fields) != 1 || fields[0].Input() != "choice" || fields[0].Alternatives[1].Label != "Custom" {
		t.Fatalf("%v %+v", err, fields)
	}
	got, errs, err := form.Parse(json.RawMessage(root), "p", url.Values{"p~": {"1"}, "p~1.cpus": {"4"}})
	if err != nil || len(errs) != 0 || !reflect.DeepEqual(got, map[string]any{"tier": "custom", "cpus": int64(4)}) {
		t.Fatalf("%v %v %#v", err, errs, got)
	}
}

// FuzzParse reads posted forms of the fuzzer's against a schema with
// every construct the form knows: no panic, every error names an input of
// the form, and the parameters read are JSON.
//
//	go test ./web/form -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	f.Add("p.size", "8", "p.backup~", "1")
	f.Add("p.backup~1.path", "/x", "p.connections~", "0")
	f.Add("p.connections~0", "1e400", "p.layout.child.child.name", "\x00")
	f.Add("p.tls.mode", "verify-full", "p.backup~", "-1")
	f.Add("p.size", "", "p.backup~0.region", "eu-west-1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		posted := url.Values{k1: {v1}}
		posted.Add(k2, v2)
		got, errs, err := form.Parse(json.RawMessage(choices), "p", posted)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Fatalf("parameters are not JSON: %v", err)
		}
		fields, err := form.Refill(json.RawMessage(choices), "p", posted, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, n := range form.Names(fields) {
			names[n] = true
		}
		for _, a := range index(fields) {
			names[a.Name] = true
		}
		for _, e := range errs {
			if !names[e.Field] {
				t.Fatalf("error of %q, which the form does not have (%s)", e.Field, e.Message)
			}
		}
	})
}
