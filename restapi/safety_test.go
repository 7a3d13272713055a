package restapi_test

import "testing"

// TestExternalIDUnique: OSB ids are global to a broker, so a second object
// with another one's spec.externalID would share its broker-side resource
// (deleting it revoked the first binding's credentials). Both kinds refuse
// a duplicate, across namespaces too, naming the field.
func TestExternalIDUnique(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	spec := func(id string) map[string]any {
		return map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small", "externalID": id}
	}
	b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": "db", "namespace": "a", "spec": spec("inst-1")}))
	for _, ns := range []string{"a", "b"} {
		r := b.must(409, b.do(dev, "POST", "/instances", map[string]any{"name": "db2", "namespace": ns, "spec": spec("inst-1")}))
		if r.str("field") != "spec.externalID" {
			t.Errorf("duplicate instance externalID in %s: %s", ns, r.raw)
		}
	}
	bind := func(name, id string) map[string]any {
		return map[string]any{"name": name, "namespace": "a", "spec": map[string]any{"instanceRef": map[string]any{"name": "db"}, "externalID": id}}
	}
	b.must(201, b.do(dev, "POST", "/bindings", bind("app", "bind-1")))
	r := b.must(409, b.do(dev, "POST", "/bindings", bind("app2", "bind-1")))
	if r.str("field") != "spec.externalID" {
		t.Errorf("duplicate binding externalID: %s", r.raw)
	}
	// The name is still the first thing a duplicate is told about.
	b.must(409, b.do(dev, "POST", "/bindings", bind("app", "bind-2")))
}
