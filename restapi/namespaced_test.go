package restapi_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// teamCatalog is the catalogue of a team's own broker: one service of two
// plans, under ids no other broker of the tests uses.
func teamCatalog(plans ...string) []osbtest.Service {
	s := osbtest.Service{ID: "mysql-id", Name: "mysql", Description: "A team's MySQL.", Bindable: true, PlanUpdateable: true}
	for _, p := range plans {
		s.Plans = append(s.Plans, osbtest.Plan{ID: "mysql-" + p + "-id", Name: p, Description: "The " + p + " plan."})
	}
	return []osbtest.Service{s}
}

func names(items []map[string]any, field ...string) []string {
	var out []string
	for _, it := range items {
		var v any = it
		for _, f := range field {
			m, _ := v.(map[string]any)
			v = m[f]
		}
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// TestNamespacedBrokers: a broker registered in a namespace (Service
// Catalog's ServiceBroker) offers its classes and plans to that namespace
// only: an admin token of the namespace registers, relists, changes and
// deregisters it, the namespace's tokens read it and its classes and plans,
// a token of another namespace finds none of it, and instances of the
// namespace name its classes and plans with the service… fields, resolved
// at once by the catalog.
func TestNamespacedBrokers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	issue := func(role string, ns ...string) string {
		tok, _, err := b.store.IssueToken(ctx, catalog.TokenRequest{Role: role, Namespaces: ns})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	teamAdmin, teamDev, teamViewer := issue(catalog.RoleAdmin, "team-a"), issue(catalog.RoleDeveloper, "team-a"), issue(catalog.RoleViewer, "team-a")
	otherAdmin, otherViewer := issue(catalog.RoleAdmin, "team-b"), issue(catalog.RoleViewer, "team-b")

	b.registerBindery("bindery") // the cluster's
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(teamCatalog("small", "big")))
	auth := map[string]any{"basic": map[string]any{"username": "u", "password": "p"}}
	reg := map[string]any{"name": "team-broker", "namespace": "team-a", "url": fake.URL(), "auth": auth}

	// Who registers it: an admin of its namespace (or of all), no one else.
	b.must(403, b.do(teamDev, "POST", "/brokers", reg))
	b.must(403, b.do(otherAdmin, "POST", "/brokers", reg))
	b.must(403, b.do(teamAdmin, "POST", "/brokers", map[string]any{"name": "mine", "url": fake.URL(), "auth": auth})) // a cluster broker
	r := b.must(201, b.do(teamAdmin, "POST", "/brokers", reg))
	if r.str("namespace") != "team-a" || r.body["status"].(map[string]any)["serviceClassCount"] != float64(1) {
		t.Fatalf("namespaced broker: %s", r.raw)
	}
	brokerID := r.str("id")
	b.must(409, b.do(teamAdmin, "POST", "/brokers", reg))

	// Its broker, classes and plans are team-a's only.
	if got := names(b.must(200, b.do(teamViewer, "GET", "/brokers", nil)).items(), "name"); !slices.Equal(got, []string{"bindery"}) {
		t.Errorf("the cluster's brokers: %v", got)
	}
	if got := names(b.must(200, b.do(teamViewer, "GET", "/brokers?namespace=team-a", nil)).items(), "name"); !slices.Equal(got, []string{"team-broker"}) {
		t.Errorf("team-a's brokers: %v", got)
	}
	b.must(403, b.do(otherViewer, "GET", "/brokers?namespace=team-a", nil))
	if got := b.must(200, b.do(b.admin, "GET", "/brokers?namespace=team-b", nil)).items(); len(got) != 0 {
		t.Errorf("team-b's brokers: %v", got)
	}
	b.must(404, b.do(teamViewer, "GET", "/brokers/team-broker", nil)) // not the cluster's
	b.must(200, b.do(teamViewer, "GET", "/brokers/team-broker?namespace=team-a", nil))
	b.must(200, b.do(teamViewer, "GET", "/brokers/"+brokerID+"?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/brokers/team-broker?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/brokers/"+brokerID+"?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/brokers/"+brokerID, nil))
	b.must(404, b.do(otherViewer, "GET", "/brokers/team-broker/events?namespace=team-a", nil))

	if got := names(b.must(200, b.do(teamViewer, "GET", "/serviceclasses", nil)).items(), "spec", "externalName"); !slices.Equal(got, []string{"postgresql"}) {
		t.Errorf("the cluster's classes: %v", got)
	}
	classes := b.must(200, b.do(teamViewer, "GET", "/serviceclasses?namespace=team-a", nil)).items()
	if len(classes) != 1 || classes[0]["namespace"] != "team-a" {
		t.Fatalf("team-a's classes: %v", classes)
	}
	class := classes[0]
	if spec := class["spec"].(map[string]any); spec["externalName"] != "mysql" || spec["serviceBrokerName"] != "team-broker" || spec["clusterServiceBrokerName"] != nil {
		t.Errorf("team-a's class: %v", class)
	}
	plans := b.must(200, b.do(teamViewer, "GET", "/serviceplans?namespace=team-a", nil)).items()
	if got := names(plans, "spec", "externalName"); !slices.Equal(got, []string{"small", "big"}) {
		t.Errorf("team-a's plans: %v", got)
	}
	for _, p := range plans {
		spec := p["spec"].(map[string]any)
		if ref, _ := spec["serviceClassRef"].(map[string]any); ref["name"] != class["name"] || spec["serviceBrokerName"] != "team-broker" || spec["clusterServiceClassRef"] != nil {
			t.Errorf("plan %v does not point at its class and broker in the namespace", spec)
		}
	}
	for _, tc := range []struct {
		token, query string
		want         int
	}{
		{teamViewer, "/serviceplans?namespace=team-a&class=mysql", 2},
		{teamViewer, "/serviceplans?namespace=team-a&broker=team-broker&name=big", 1},
		{teamViewer, "/serviceplans?broker=team-broker", 0}, // no cluster broker of that name
		{teamViewer, "/serviceplans?class=mysql", 0},
		{teamViewer, "/serviceclasses?namespace=team-a&broker=bindery", 0},
		{b.admin, "/serviceclasses?namespace=team-b", 0},
		{b.admin, "/serviceplans?namespace=team-b", 0},
	} {
		if got := len(b.must(200, b.do(tc.token, "GET", tc.query, nil)).items()); got != tc.want {
			t.Errorf("%s: %d items, want %d", tc.query, got, tc.want)
		}
	}
	className, planName := class["name"].(string), plans[0]["name"].(string)
	b.must(200, b.do(teamViewer, "GET", "/serviceclasses/"+className+"?namespace=team-a", nil))
	b.must(404, b.do(teamViewer, "GET", "/serviceclasses/"+className, nil))
	b.must(200, b.do(teamViewer, "GET", "/serviceplans/"+planName+"?namespace=team-a", nil))
	b.must(200, b.do(teamViewer, "GET", "/serviceplans/"+planName+"/schemas?namespace=team-a", nil))
	b.must(403, b.do(otherViewer, "GET", "/serviceclasses?namespace=team-a", nil))
	b.must(403, b.do(otherViewer, "GET", "/serviceplans?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/serviceclasses/"+className+"?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/serviceplans/"+planName+"?namespace=team-a", nil))
	b.must(404, b.do(otherViewer, "GET", "/serviceplans/"+plans[0]["id"].(string)+"/schemas", nil))

	// Instances of team-a name them by external name, id or object name;
	// another namespace's instance naming them waits, as for a class no
	// broker offers.
	for _, tc := range []struct {
		name string
		spec map[string]any
	}{
		{"by-external-name", map[string]any{"serviceClassExternalName": "mysql", "servicePlanExternalName": "small"}},
		{"by-external-id", map[string]any{"serviceClassExternalID": "mysql-id", "servicePlanExternalID": "mysql-small-id"}},
		{"by-name", map[string]any{"serviceClassName": className, "servicePlanName": planName}},
	} {
		in := b.must(201, b.do(teamDev, "POST", "/instances", map[string]any{"name": tc.name, "namespace": "team-a", "spec": tc.spec}))
		if in.str("spec", "serviceClassRef", "name") != className || in.str("spec", "servicePlanRef", "name") != planName || in.str("spec", "clusterServiceClassRef", "name") != "" {
			t.Errorf("%s: the references are not resolved in the namespace: %s", tc.name, in.raw)
		}
	}
	in := b.must(201, b.do(b.admin, "POST", "/instances", map[string]any{"name": "db", "namespace": "team-b",
		"spec": map[string]any{"serviceClassExternalName": "mysql", "servicePlanExternalName": "small"}}))
	if in.str("spec", "serviceClassRef", "name") != "" {
		t.Errorf("team-b's instance resolved team-a's class: %s", in.raw)
	}
	for _, field := range []string{"serviceClassRef", "servicePlanRef"} {
		r := b.must(400, b.do(teamDev, "PATCH", "/instances/by-name?namespace=team-a", map[string]any{"spec": map[string]any{field: map[string]any{"name": "x"}}}))
		if r.str("field") != "spec."+field+".name" {
			t.Errorf("a change of %s: %s", field, r.raw)
		}
	}
	r = b.must(200, b.do(teamDev, "PATCH", "/instances/by-external-name?namespace=team-a", map[string]any{"spec": map[string]any{"servicePlanExternalName": "big"}}))
	if r.str("spec", "servicePlanRef", "name") != "mysql-big-id" {
		t.Errorf("a plan change in the namespace: %s", r.raw)
	}
	b.must(201, b.do(teamDev, "POST", "/instances", map[string]any{"name": "cluster-db", "namespace": "team-a",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
	r = b.must(400, b.do(teamDev, "POST", "/instances", map[string]any{"name": "both", "namespace": "team-a",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "serviceClassExternalName": "mysql", "servicePlanExternalName": "small"}}))
	if r.str("field") == "" {
		t.Errorf("a class named in both scopes: %s", r.raw)
	}

	// Relist and change: team-a's admins and the all-namespaces admin; no
	// one else learns the broker exists.
	fake.SetCatalog(teamCatalog("small", "big", "huge"))
	b.must(404, b.do(otherAdmin, "POST", "/brokers/team-broker/relist?namespace=team-a", nil))
	b.must(403, b.do(teamDev, "POST", "/brokers/team-broker/relist?namespace=team-a", nil))
	r = b.must(200, b.do(teamAdmin, "POST", "/brokers/team-broker/relist?namespace=team-a", nil))
	if r.body["status"].(map[string]any)["servicePlanCount"] != float64(3) {
		t.Errorf("relisted: %s", r.raw)
	}
	if got := len(b.must(200, b.do(teamViewer, "GET", "/serviceplans?namespace=team-a", nil)).items()); got != 3 {
		t.Errorf("team-a's plans after the relist: %d, want 3", got)
	}
	b.must(200, b.do(b.admin, "POST", "/brokers/"+brokerID+"/relist?namespace=team-a", nil))
	b.must(403, b.do(teamAdmin, "POST", "/brokers/bindery/relist", nil)) // the cluster's
	r = b.must(200, b.do(teamAdmin, "PATCH", "/brokers/team-broker?namespace=team-a", map[string]any{"relistDuration": "1h0m0s"}))
	if r.str("spec", "relistDuration") != "1h0m0s" || r.str("namespace") != "team-a" {
		t.Errorf("patched: %s", r.raw)
	}
	r = b.must(400, b.do(teamAdmin, "PATCH", "/brokers/team-broker?namespace=team-a", map[string]any{"namespace": "team-b"}))
	if r.str("field") != "namespace" {
		t.Errorf("a namespace change: %s", r.raw)
	}
	b.must(404, b.do(otherAdmin, "PATCH", "/brokers/team-broker?namespace=team-a", map[string]any{"relistDuration": "2h0m0s"}))
	if ev := b.must(200, b.do(teamViewer, "GET", "/brokers/team-broker/events?namespace=team-a", nil)).items(); len(ev) == 0 || ev[0]["kind"] != "ServiceBroker" {
		t.Errorf("broker events: %v", ev)
	}

	// Deregistering: not while its plans have instances; a broker without
	// takes its classes and plans along.
	b.must(409, b.do(teamAdmin, "DELETE", "/brokers/team-broker?namespace=team-a", nil))
	spare := osbtest.New(t, osbtest.WithCatalog([]osbtest.Service{{ID: "redis-id", Name: "redis", Description: "A cache.", Bindable: true,
		Plans: []osbtest.Plan{{ID: "redis-one-id", Name: "one", Description: "One node."}}}}))
	b.must(201, b.do(teamAdmin, "POST", "/brokers", map[string]any{"name": "spare", "namespace": "team-a", "url": spare.URL()}))
	if got := len(b.must(200, b.do(teamViewer, "GET", "/serviceclasses?namespace=team-a", nil)).items()); got != 2 {
		t.Errorf("team-a's classes with two brokers: %d", got)
	}
	b.must(404, b.do(otherAdmin, "DELETE", "/brokers/spare?namespace=team-a", nil))
	b.must(204, b.do(teamAdmin, "DELETE", "/brokers/spare?namespace=team-a", nil))
	b.must(404, b.do(teamAdmin, "GET", "/brokers/spare?namespace=team-a", nil))
	if got := names(b.must(200, b.do(teamViewer, "GET", "/serviceclasses?namespace=team-a", nil)).items(), "spec", "externalName"); !slices.Equal(got, []string{"mysql"}) {
		t.Errorf("team-a's classes after deregistering spare: %v", got)
	}
}

// TestNamespacedBrokerInput: a bad namespace anywhere is a 400 naming it,
// never a 5xx.
func TestNamespacedBrokerInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dev := b.token("developer")
	for _, tc := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/brokers", map[string]any{"name": "x", "namespace": "Team_A", "url": b.brokerURL}, "namespace"},
		{"POST", "/brokers", `{"name":"x","namespace":"a\u0000b","url":"http://127.0.0.1:1"}`, "namespace"},
		{"POST", "/brokers", map[string]any{"name": "x", "namespace": strings.Repeat("a", 64), "url": b.brokerURL}, "namespace"},
		{"GET", "/brokers?namespace=Team_A", nil, "namespace"},
		{"GET", "/brokers?namespace=a%00b", nil, "namespace"},
		{"GET", "/brokers/x?namespace=%FF", nil, "namespace"},
		{"GET", "/serviceclasses?namespace=-a", nil, "namespace"},
		{"GET", "/serviceplans?namespace=a%00", nil, "namespace"},
		{"GET", "/serviceplans/x/schemas?namespace=A", nil, "namespace"},
		{"POST", "/brokers/x/relist?namespace=a.b", nil, "namespace"},
	} {
		r := b.do(b.admin, tc.method, tc.path, tc.body)
		if r.status != 400 || r.str("field") != tc.field {
			t.Errorf("%s %s: %d field %q, want 400 field %q: %.300s", tc.method, tc.path, r.status, r.str("field"), tc.field, r.raw)
		}
	}
	r := b.do(dev, "POST", "/instances", `{"name":"db","namespace":"a","spec":{"serviceClassExternalName":"my\u0000sql","servicePlanExternalName":"small"}}`)
	if r.status != 400 || r.str("field") != "spec.serviceClassExternalName" {
		t.Errorf("a NUL in a namespaced class name: %d %s", r.status, r.raw)
	}
}
