package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/web/form"
)

// wideSchema is a plan schema of 171 bytes whose object refers to itself
// from four properties: unbounded, each of its forms had 349,524 inputs.
const wideSchema = `{"$defs":{"n":{"type":"object","properties":{"p0":{"$ref":"#/$defs/n"},"p1":{"$ref":"#/$defs/n"},` +
	`"p2":{"$ref":"#/$defs/n"},"p3":{"$ref":"#/$defs/n"},"v":{"type":"string"}}}},"$ref":"#/$defs/n"}`

// TestWideSchemaForms: every page with a form made from such a schema (the
// plan's page, the instance form, an instance's update and bind forms, a
// posted instance form shown again) shows at most form.MaxFields of its
// fields and the notice that the rest is to be given as JSON; a posted
// form is read as far as it was shown.
func TestWideSchemaForms(t *testing.T) {
	b := setup(t, setupOptions{})
	var params map[string]any
	if err := json.Unmarshal([]byte(wideSchema), &params); err != nil {
		t.Fatal(err)
	}
	services := osbtest.GenerateCatalog(1, 1)
	schema := &osbtest.InputParameters{Parameters: params}
	services[0].Plans[0].Schemas = &osbtest.Schemas{ServiceInstance: &osbtest.ServiceInstanceSchema{Create: schema, Update: schema},
		ServiceBinding: &osbtest.ServiceBindingSchema{Create: schema}}
	plan := b.fakeBroker(t, "wide", services)
	in := b.instance(t, plan, "default", "wide-db")
	dev := b.client(t, catalog.RoleDeveloper)

	pages := []struct {
		path    string
		notices int
	}{
		{"/plans/" + plan.ID, 3}, {"/instances/new?plan=" + plan.ID, 1}, {"/instances/" + in.ID, 2},
	}
	for _, p := range pages {
		res := dev.get(p.path)
		page := body(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p.path, res.StatusCode)
		}
		checkWide(t, p.path, page, p.notices)
	}

	// The first group's text input is shown, the last one's is not: both
	// posted, only the first is read. A name the catalog refuses shows
	// the form again, as far as it goes.
	first, last := "spec.parameters.p0.v", "spec.parameters.p3.v"
	res := dev.post("/instances", url.Values{"plan": {plan.ID}, "name": {"Not A Name"}, first: {"a"}, last: {"b"}})
	page := body(t, res)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad name: %d", res.StatusCode)
	}
	checkWide(t, "the posted form", page, 1)
	res = dev.post("/instances", url.Values{"plan": {plan.ID}, "name": {"wide-2"}, first: {"a"}, last: {"b"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %s", res.StatusCode, body(t, res))
	}
	made, err := b.store.GetInstanceByName(t.Context(), "default", "wide-2")
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(made.Spec.Parameters, &got); err != nil || !reflect.DeepEqual(got, map[string]any{"p0": map[string]any{"v": "a"}}) {
		t.Errorf("parameters %s", made.Spec.Parameters)
	}
}

// checkWide checks that a page shows its schemas' forms (or parameter
// lists) cut to the budget, each with the notice where it stops.
func checkWide(t *testing.T, what, page string, notices int) {
	t.Helper()
	if n := strings.Count(page, "than a form shows"); n != notices {
		t.Errorf("%s: %d notices, want %d", what, n, notices)
	}
	inputs := strings.Count(page, `name="spec.parameters.`) + strings.Count(page, `name="binding.parameters.`)
	rows := strings.Count(page, `<th scope="row"><code>`)
	if inputs > notices*form.MaxFields || rows > notices*form.MaxFields {
		t.Errorf("%s: %d inputs and %d rows of parameters", what, inputs, rows)
	}
}
