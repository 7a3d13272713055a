package form_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/web/form"
)

// wideSchema is an object schema of a few hundred bytes that refers to
// itself from k properties, beside one text input: unbounded, its form
// would have k^9 groups, as deep as a form goes.
func wideSchema(k int) json.RawMessage {
	props := []string{`"v":{"type":"string"}`}
	for i := range k {
		props = append(props, fmt.Sprintf(`"p%d":{"$ref":"#/$defs/n"}`, i))
	}
	return json.RawMessage(`{"$defs":{"n":{"type":"object","properties":{` + strings.Join(props, ",") + `}}},"$ref":"#/$defs/n"}`)
}

// generated counts the fields, groups, choices and alternatives of a
// form, and lists its text inputs by name; the notice where a form stops
// is none of them.
func generated(fields []form.Field, inputs *[]string) int {
	n := 0
	for _, f := range fields {
		if f.Input() == "more" {
			continue
		}
		n++
		if f.Input() == "text" {
			*inputs = append(*inputs, f.Name)
		}
		n += generated(f.Fields, inputs)
		for _, a := range f.Alternatives {
			n += 1 + generated(a.Fields, inputs)
		}
	}
	return n
}

// TestFormBudget: a schema whose properties refer to it again makes a
// form of at most form.MaxFields fields, however wide, ending with a
// notice that the other parameters are to be given as JSON; reading the
// posted form reads only the inputs the form showed. Both cost what a
// form of that many fields costs (k=4 took 9 s and 2 GB, k=6 more memory
// than the server had).
func TestFormBudget(t *testing.T) {
	for _, k := range []int{4, 5, 16, 1000} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			raw := wideSchema(k)
			var fields []form.Field
			var err error
			allocs := testing.AllocsPerRun(1, func() { fields, err = form.Fields(raw, "p", nil, nil) })
			if err != nil {
				t.Fatal(err)
			}
			var inputs []string
			if n := generated(fields, &inputs); n > form.MaxFields || n < form.MaxFields/2 {
				t.Fatalf("the form has %d fields; the budget is %d", n, form.MaxFields)
			}
			if last := fields[len(fields)-1]; last.Input() != "more" || !strings.Contains(last.Description, "JSON") {
				t.Fatalf("the form ends with %+v, not the notice that it stops", last)
			}
			if allocs > maxAllocs {
				t.Errorf("building the form took %.0f allocations", allocs)
			}
			// The last group's text input is past the budget: posted
			// anyway, it is not read.
			hidden := fmt.Sprintf("p.p%d.v", k-1)
			if slices.Contains(inputs, hidden) {
				t.Fatalf("the form shows %s", hidden)
			}
			posted := url.Values{hidden: {"not shown"}}
			if len(inputs) > 0 {
				posted.Set(inputs[0], "shown")
			}
			var got map[string]any
			var errs []form.Error
			allocs = testing.AllocsPerRun(1, func() { got, errs, err = form.Parse(raw, "p", posted) })
			if err != nil || len(errs) > 0 {
				t.Fatal(err, errs)
			}
			if raw, _ := json.Marshal(got); strings.Contains(string(raw), `"shown"`) != (len(inputs) > 0) || strings.Contains(string(raw), "not shown") {
				t.Errorf("parsed %s", raw)
			}
			if allocs > maxAllocs {
				t.Errorf("reading the form took %.0f allocations", allocs)
			}
		})
	}
}

// maxAllocs is far above what a form of form.MaxFields fields costs, and
// far below what an unbounded one did.
const maxAllocs = 250_000

// TestBudgetKeepsRequiredFields: the budget is spent on the required
// properties first, however deep, so an object of hundreds of optional
// properties cannot leave out a later required one: the form shows it,
// and the posted form reads it. The budget went depth first, and such a
// form could not make a valid instance.
func TestBudgetKeepsRequiredFields(t *testing.T) {
	t.Parallel()
	var opt []string
	for i := range 600 {
		opt = append(opt, fmt.Sprintf(`"o%03d":{"type":"string"}`, i))
	}
	schema := json.RawMessage(`{"type":"object","required":["a","b"],"properties":{
		"a":{"type":"object","properties":{"tuning":{"type":"object","properties":{` + strings.Join(opt, ",") + `}}}},
		"b":{"type":"object","required":["host"],"properties":{"host":{"type":"string"},"port":{"type":"integer"}}}}}`)
	fields, err := form.Fields(schema, "p", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	if n := generated(fields, &inputs); n > form.MaxFields {
		t.Errorf("%d fields, more than %d", n, form.MaxFields)
	}
	if !slices.Contains(inputs, "p.b.host") {
		t.Errorf("the required p.b.host is not in the form (%d inputs)", len(inputs))
	}
	if !slices.Contains(inputs, "p.a.tuning.o000") {
		t.Error("the optional properties are all left out, though the budget had room for some")
	}
	out, problems, err := form.Parse(schema, "p", url.Values{"p.b.host": {"db.example"}})
	if err != nil || len(problems) > 0 {
		t.Fatalf("parse: %v %v", problems, err)
	}
	if b, _ := out["b"].(map[string]any); b["host"] != "db.example" {
		t.Errorf("parsed b = %v, want host db.example", out["b"])
	}
	// A spine that refers to itself is held to the budget too.
	var refs []string
	for i := range 6 {
		refs = append(refs, fmt.Sprintf(`"p%d"`, i))
	}
	self := json.RawMessage(strings.Replace(string(wideSchema(6)), `"type":"object",`, `"type":"object","required":[`+strings.Join(refs, ",")+`],`, 1))
	if fields, err = form.Fields(self, "p", nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := generated(fields, &inputs); n > form.MaxFields {
		t.Errorf("a required self-reference: %d fields, more than %d", n, form.MaxFields)
	}
}
