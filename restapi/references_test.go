package restapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestReferencesWait: an instance naming a class or plan no broker offers
// yet, and a binding naming an instance not created yet, are recorded (201)
// to wait for what they name, as Service Catalog allowed; the naming
// itself, and what the catalog knows (a class of several plans with none
// named), is still checked. A class with one plan needs no plan named.
func TestReferencesWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dev := b.token("developer")
	ctx := context.Background()
	instance := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"name": name, "namespace": "demo", "spec": spec}
	}

	// Nothing is offered yet.
	in := b.must(201, b.do(dev, "POST", "/instances", instance("db", map[string]any{
		"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"})))
	warned(t, in, `No service class named "postgresql" is offered by the cluster's brokers`)
	if in.str("spec", "clusterServiceClassRef", "name") != "" || in.str("spec", "clusterServicePlanRef", "name") != "" {
		t.Errorf("references of what is not offered: %s", in.raw)
	}
	b.must(201, b.do(dev, "POST", "/instances", instance("solo", map[string]any{"clusterServiceClassExternalName": "solo"})))
	bnd := b.must(201, b.do(dev, "POST", "/bindings", map[string]any{"name": "app", "namespace": "demo",
		"spec": map[string]any{"instanceRef": map[string]any{"name": "later"}}}))
	warned(t, bnd, `No instance named "later" exists in namespace "demo"`)
	later := b.must(201, b.do(dev, "POST", "/instances", instance("later", map[string]any{
		"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"})))
	binding, err := b.store.GetBinding(ctx, bnd.str("id"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.store.InstanceOf(ctx, binding); err != nil || got.ID != later.str("id") {
		t.Errorf("the binding recorded first is not linked to its instance: %v", err)
	}
	// A spec waiting for its plan may change.
	r := b.must(200, b.do(dev, "PATCH", "/instances/"+in.str("id"), map[string]any{"spec": map[string]any{"clusterServicePlanExternalName": "standard"}}))
	if r.body["generation"] != float64(2) || r.str("spec", "clusterServicePlanRef", "name") != "" {
		t.Errorf("plan change of a waiting instance: %s", r.raw)
	}

	// Once brokers offer classes, what the catalog knows is checked.
	b.registerBindery("bindery")
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog([]osbtest.Service{{ID: "solo-id", Name: "solo", Description: "One plan.",
		Bindable: true, Plans: []osbtest.Plan{{ID: "solo-only-id", Name: "only", Description: "The only plan."}}}}))
	b.must(201, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "fake", "url": fake.URL(),
		"auth": map[string]any{"basic": map[string]any{"username": "u", "password": "p"}}}))
	r = b.must(201, b.do(dev, "POST", "/instances", instance("solo-now", map[string]any{"clusterServiceClassExternalName": "solo"})))
	if r.str("spec", "clusterServicePlanExternalName") != "only" || r.str("spec", "clusterServicePlanRef", "name") != "solo-only-id" {
		t.Errorf("the class's only plan is not chosen: %s", r.raw)
	}
	r = b.must(400, b.do(dev, "POST", "/instances", instance("several", map[string]any{"clusterServiceClassExternalName": "postgresql"})))
	if r.str("field") != "spec.clusterServicePlanExternalName" {
		t.Errorf("a class of several plans and none named: %s", r.raw)
	}
	r = b.must(201, b.do(dev, "POST", "/instances", instance("bigger", map[string]any{
		"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "huge"})))
	if r.str("spec", "clusterServicePlanRef", "name") != "" {
		t.Errorf("a plan not offered yet resolved: %s", r.raw)
	}
	warned(t, r, `Service class "postgresql" has no plan named "huge"`)
	r = b.must(201, b.do(dev, "POST", "/instances", instance("offered", map[string]any{
		"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"})))
	if r.str("spec", "clusterServicePlanRef", "name") == "" {
		t.Errorf("an offered plan is not resolved: %s", r.raw)
	}
	warned(t, r, "")
	if r.str("progress", "state") != "working" || r.str("progress", "message") == "" {
		t.Errorf("a new instance's progress: %s", r.raw)
	}
	// A provisioned instance's plan change to a plan that is not offered is
	// refused, in words.
	b.must(200, b.do(dev, "GET", "/instances/offered?namespace=demo", nil))
}

// warned checks that an answer warns with want (nothing, when want is
// empty) in its Warning header, as the Kubernetes API writes it, and its
// warnings field.
func warned(t *testing.T, r response, want string) {
	t.Helper()
	header := r.header.Values("Warning")
	list, _ := r.body["warnings"].([]any)
	if want == "" {
		if len(header) != 0 || len(list) != 0 {
			t.Errorf("warnings %q %v, want none", header, list)
		}
		return
	}
	if len(header) != 1 || !strings.HasPrefix(header[0], `299 - "`) || !strings.Contains(header[0], strings.ReplaceAll(want, `"`, `\"`)) {
		t.Errorf("Warning header %q, want one saying %q", header, want)
	}
	if len(list) != 1 || !strings.Contains(list[0].(string), want) {
		t.Errorf("warnings %v, want one saying %q", list, want)
	}
}
