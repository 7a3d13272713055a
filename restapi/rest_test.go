package restapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

func TestRegisterBrokerAndBrowse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.registerBindery("bindery")
	if r.str("name") != "bindery" || r.str("id") == "" {
		t.Fatalf("broker: %s", r.raw)
	}
	conds := r.body["status"].(map[string]any)["conditions"].([]any)
	ready := conds[0].(map[string]any)
	if ready["type"] != "Ready" || ready["status"] != "True" {
		t.Fatalf("broker not Ready after registration: %s", r.raw)
	}
	if strings.Contains(string(r.raw), brokerPass) {
		t.Fatal("the broker's password is in the API's answer")
	}
	classes := b.must(200, b.do(b.admin, "GET", "/serviceclasses", nil)).items()
	if len(classes) != 1 || classes[0]["spec"].(map[string]any)["externalName"] != "postgresql" {
		t.Fatalf("classes: %v", classes)
	}
	className := classes[0]["name"].(string)
	plans := b.must(200, b.do(b.admin, "GET", "/serviceplans", nil)).items()
	var names []string
	for _, p := range plans {
		spec := p["spec"].(map[string]any)
		names = append(names, spec["externalName"].(string))
		if spec["clusterServiceClassRef"].(map[string]any)["name"] != className || spec["clusterServiceBrokerName"] != "bindery" {
			t.Errorf("plan %v does not point at its class and broker", spec["externalName"])
		}
	}
	if strings.Join(names, ",") != "small,standard,large-async" {
		t.Errorf("plans in order %v, want the broker's catalogue order", names)
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"/serviceplans?free=false", 1},
		{"/serviceplans?free=true", 2},
		{"/serviceplans?broker=bindery", 3},
		{"/serviceplans?broker=other", 0},
		{"/serviceplans?class=postgresql&name=standard", 1},
		{"/serviceclasses?tag=relational", 1},
		{"/serviceclasses?tag=nosql", 0},
		{"/serviceclasses?name=postgresql", 1},
	} {
		if got := len(b.must(200, b.do(b.admin, "GET", tc.query, nil)).items()); got != tc.want {
			t.Errorf("%s: %d items, want %d", tc.query, got, tc.want)
		}
	}
	plan := b.must(200, b.do(b.admin, "GET", "/serviceplans/"+plans[0]["name"].(string)+"/schemas", nil))
	if _, ok := plan.body["instanceCreate"]; !ok {
		t.Errorf("plan schemas: %s", plan.raw)
	}
	ev := b.must(200, b.do(b.admin, "GET", "/brokers/bindery/events", nil)).items()
	if len(ev) == 0 || ev[len(ev)-1]["reason"] != "FetchedCatalog" {
		t.Errorf("broker events: %v", ev)
	}
	b.must(409, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "bindery", "url": b.brokerURL}))
}

// TestAuthentication checks 401 and 403 come before the body is looked at:
// every request here has a body that is not JSON.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer, developer := b.token("viewer"), b.token("developer")
	for _, tc := range []struct {
		token, method, path string
		status              int
	}{
		{"", "GET", "/brokers", 401},
		{"bdy_nope", "GET", "/brokers", 401},
		{"not-even-ours", "GET", "/serviceplans", 401},
		{"", "POST", "/brokers", 401},
		{viewer, "POST", "/brokers", 403},
		{developer, "POST", "/brokers", 403},
		{viewer, "POST", "/instances", 403},
		{viewer, "GET", "/bindings/00000000-0000-0000-0000-000000000000/credentials", 403},
		{developer, "DELETE", "/brokers/x", 403},
		{admin(b), "POST", "/brokers", 400},
		{developer, "POST", "/instances", 400},
	} {
		r := b.do(tc.token, tc.method, tc.path, "{garbage")
		if r.status != tc.status || r.str("message") == "" || r.str("error") == "" {
			t.Errorf("%s %s as %q: %d %s, want %d with an error body", tc.method, tc.path, tc.token, r.status, r.raw, tc.status)
		}
	}
	b.must(200, b.do(viewer, "GET", "/brokers", nil))
}

func admin(b *bundle) string { return b.admin }

// TestAuthorizationForms: an Authorization header that carries no token
// of ours, in whatever form, is a 401 with an error body and
// WWW-Authenticate. Two Authorization headers are refused too: the first
// used to be taken and the second ignored, so which credential a request
// ran as depended on the order a proxy wrote them in.
func TestAuthorizationForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := b.token("viewer")
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"scheme only", []string{"Bearer"}},
		{"empty token", []string{"Bearer   "}},
		{"basic", []string{"Basic dXNlcjpwYXNz"}},
		{"invalid UTF-8", []string{"Bearer bdy_\xff\xfe"}},
		{"10 KB", []string{"Bearer bdy_" + strings.Repeat("a", 10<<10)}},
		{"two, valid first", []string{"Bearer " + viewer, "Bearer bdy_nope"}},
		{"two, valid last", []string{"Bearer bdy_nope", "Bearer " + viewer}},
		{"two, both valid", []string{"Bearer " + viewer, "Bearer " + b.admin}},
	} {
		r := b.doHeader(http.Header{"Authorization": tc.values}, "GET", "/brokers", nil)
		if r.status != 401 || r.str("error") != "unauthorized" || r.str("message") == "" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: %d WWW-Authenticate %q, want 401 with an error body: %.300s", tc.name, r.status, r.header.Get("WWW-Authenticate"), r.raw)
		}
	}
	r := b.doHeader(http.Header{"Authorization": {"Bearer " + viewer, "Bearer " + viewer}}, "GET", "/brokers", nil)
	if !strings.Contains(r.str("message"), "one Authorization header") {
		t.Errorf("two Authorization headers: %d %s, want it said that one is taken", r.status, r.raw)
	}
}

func TestBrokerValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.must(400, b.do(b.admin, "POST", "/brokers", map[string]any{
		"name": "Bad Name", "url": "ftp://x", "relistDuration": "soon", "caBundle": "not pem",
		"auth": map[string]any{"basic": map[string]any{"username": "u"}},
	}))
	fields := map[string]bool{}
	for _, f := range r.body["fields"].([]any) {
		fields[f.(map[string]any)["field"].(string)] = true
	}
	for _, want := range []string{"name", "url", "relistDuration", "caBundle", "auth.basic.password"} {
		if !fields[want] {
			t.Errorf("400 does not name %s: %s", want, r.raw)
		}
	}
	// Problems only the domain sees (a relist interval under a second, a
	// CA bundle that is PEM but not a certificate) are named as well.
	r = b.must(400, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "x", "url": "http://x", "relistDuration": "10ms",
		"caBundle": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}))
	// In words in the message, by path in the fields.
	if !strings.Contains(r.str("message"), "The CA bundle") || !strings.Contains(r.str("message"), "The relist interval") ||
		strings.Contains(r.str("message"), "caBundle") || !strings.Contains(string(r.raw), `"field":"caBundle"`) {
		t.Errorf("domain problems not named: %s", r.raw)
	}
	r = b.must(400, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "x", "url": "http://x/" + strings.Repeat("a", 70000)}))
	if r.str("field") != "url" {
		t.Errorf("a URL of 70,000 characters not named: %.300s", r.raw)
	}
	r = b.must(400, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "x", "url": "http://x", "colour": "blue"}))
	if r.str("field") != "colour" {
		t.Errorf("unknown field not named: %s", r.raw)
	}
	r = b.must(400, b.do(b.admin, "POST", "/brokers", map[string]any{"name": "x", "url": "http://x",
		"catalogRestrictions": map[string]any{"serviceClass": []string{"spec.colour=blue"}}}))
	if r.str("field") != "catalogRestrictions.serviceClass[0]" {
		t.Errorf("bad restriction not named: %s", r.raw)
	}
}

func TestCatalogRestrictions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.must(201, b.do(b.admin, "POST", "/brokers", map[string]any{
		"name": "restricted", "url": b.brokerURL,
		"auth":                map[string]any{"basic": map[string]any{"username": brokerUser, "password": brokerPass}},
		"catalogRestrictions": map[string]any{"servicePlan": []string{"spec.externalName in (small, standard)", "spec.free=true"}},
	}))
	if n := r.body["status"].(map[string]any)["servicePlanCount"]; n != float64(2) {
		t.Fatalf("plans exposed: %v", n)
	}
	// Lifting the restriction brings the plan in.
	r = b.must(200, b.do(b.admin, "PATCH", "/brokers/restricted", map[string]any{"catalogRestrictions": nil}))
	if n := r.body["status"].(map[string]any)["servicePlanCount"]; n != float64(3) {
		t.Fatalf("after lifting restrictions: %v plans (%s)", n, r.raw)
	}
}

func TestInstancesAndBindings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	spec := map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small",
		"parameters": map[string]any{"statement_timeout_ms": 2000}}
	in := b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": "db", "namespace": "demo", "spec": spec}))
	id := in.str("id")
	if in.str("spec", "externalID") == "" || in.str("spec", "clusterServicePlanRef", "name") == "" {
		t.Errorf("instance lacks defaults: %s", in.raw)
	}
	// Recorded without conditions, as Service Catalog recorded it: the
	// engine writes them.
	if conds, ok := in.body["status"].(map[string]any)["conditions"]; ok {
		t.Errorf("new instance's conditions: %v", conds)
	}
	b.must(409, b.do(dev, "POST", "/instances", map[string]any{"name": "db", "namespace": "demo", "spec": spec}))
	for _, tc := range []struct {
		spec  map[string]any
		field string
	}{
		{map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalID": "small"}, "spec"},
		{map[string]any{"clusterServicePlanExternalName": "small"}, "spec.clusterServiceClassExternalName"},
		{map[string]any{"clusterServiceClassExternalName": "postgresql"}, "spec.clusterServicePlanExternalName"},
		{map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small", "parameters": map[string]any{"statement_timeout_ms": -1}}, "spec.parameters.statement_timeout_ms"},
		{map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small", "parameters": map[string]any{"nope": 1}}, "spec.parameters"},
	} {
		r := b.must(400, b.do(dev, "POST", "/instances", map[string]any{"name": "other", "spec": tc.spec}))
		if r.str("field") != tc.field {
			t.Errorf("field %q, want %q: %s", r.str("field"), tc.field, r.raw)
		}
	}
	r := b.must(200, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"parameters": map[string]any{"statement_timeout_ms": 3000}}}))
	if r.body["generation"] != float64(2) {
		t.Errorf("generation after a parameter change: %v", r.body["generation"])
	}
	r = b.must(200, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"clusterServicePlanExternalName": "standard"}}))
	if r.body["generation"] != float64(3) || !strings.Contains(string(r.raw), `"clusterServicePlanExternalName":"standard"`) {
		t.Errorf("plan change: %s", r.raw)
	}
	b.must(400, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"externalID": "other"}}))

	bnd := b.must(201, b.do(dev, "POST", "/bindings", map[string]any{"name": "app", "namespace": "demo", "spec": map[string]any{"instanceRef": map[string]any{"name": "db"}}}))
	if bnd.str("spec", "secretName") != "app" {
		t.Errorf("secretName defaults to the name: %s", bnd.raw)
	}
	b.must(400, b.do(dev, "POST", "/bindings", map[string]any{"name": "x", "namespace": "demo", "spec": map[string]any{"instanceRef": map[string]any{"name": "No Such Name"}}}))
	b.must(409, b.do(dev, "GET", "/bindings/"+bnd.str("id")+"/credentials", nil))
	if err := b.store.SetCredentials(context.Background(), bnd.str("id"), map[string]any{"password": "pw-123"}); err != nil {
		t.Fatal(err)
	}
	creds := b.must(200, b.do(dev, "GET", "/bindings/"+bnd.str("id")+"/credentials", nil))
	if creds.body["password"] != "pw-123" {
		t.Errorf("credentials: %s", creds.raw)
	}
	del := b.must(202, b.do(dev, "DELETE", "/bindings/"+bnd.str("id"), nil))
	if del.str("deletionTimestamp") == "" {
		t.Errorf("deleted binding not marked: %s", del.raw)
	}
	del = b.must(202, b.do(dev, "DELETE", "/instances/"+id, nil))
	if del.str("deletionTimestamp") == "" {
		t.Errorf("deleted instance not marked: %s", del.raw)
	}
	b.must(422, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"parameters": map[string]any{}}}))
	ev := b.must(200, b.do(dev, "GET", "/instances/"+id+"/events", nil)).items()
	if len(ev) != 4 {
		t.Errorf("instance history: %v", ev)
	}
	b.must(404, b.do(dev, "GET", "/instances/00000000-0000-0000-0000-000000000000", nil))
	b.must(404, b.do(dev, "GET", "/instances/not-a-uuid", nil))
	// A name is looked up in a namespace, and the answer says which.
	b.must(200, b.do(dev, "GET", "/bindings/app?namespace=demo", nil))
	for path, says := range map[string]string{
		"/bindings/app":                     `No binding is named "app" in namespace "default".`,
		"/bindings/app?namespace=qa":        `No binding is named "app" in namespace "qa".`,
		"/instances/db/events":              `No instance is named "db" in namespace "default".`,
		"/brokers/nosuch":                   `No broker is named "nosuch".`,
		"/bindings/" + uuid.NewString():     "No binding has the id",
		"/serviceplans/" + uuid.NewString(): "No service plan has the id",
	} {
		r := b.must(404, b.do(dev, "GET", path, nil))
		if !strings.Contains(r.str("message"), says) {
			t.Errorf("GET %s: %q, want it to say %q", path, r.str("message"), says)
		}
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	for i := range 7 {
		b.must(201, b.do(b.admin, "POST", "/instances", map[string]any{"name": fmt.Sprintf("db-%d", i), "namespace": []string{"a", "b"}[i%2],
			"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
	}
	var seen []string
	next := ""
	for pages := 0; ; pages++ {
		r := b.must(200, b.do(b.admin, "GET", "/instances?limit=3&continue="+next, nil))
		for _, it := range r.items() {
			seen = append(seen, it["namespace"].(string)+"/"+it["name"].(string))
		}
		next = r.str("continue")
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if strings.Join(seen, " ") != "a/db-0 a/db-2 a/db-4 a/db-6 b/db-1 b/db-3 b/db-5" {
		t.Errorf("pages gave %v", seen)
	}
	if n := len(b.must(200, b.do(b.admin, "GET", "/instances?namespace=b", nil)).items()); n != 3 {
		t.Errorf("namespace b has %d instances", n)
	}
	b.must(400, b.do(b.admin, "GET", "/instances?limit=0", nil))
	b.must(400, b.do(b.admin, "GET", "/instances?continue=!!", nil))
}

// TestSecretsAtRest stores a broker password and binding credentials, then
// reads every catalog table as text and finds neither.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	b.must(201, b.do(b.admin, "POST", "/instances", map[string]any{"name": "db", "spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
	bnd := b.must(201, b.do(b.admin, "POST", "/bindings", map[string]any{"name": "app", "spec": map[string]any{"instanceRef": map[string]any{"name": "db"}}}))
	const credential = "binding-password-0123456789"
	if err := b.store.SetCredentials(context.Background(), bnd.str("id"), map[string]any{"password": credential}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'catalog'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		tables = append(tables, s)
	}
	if len(tables) < 8 {
		t.Fatalf("tables: %v", tables)
	}
	for _, table := range tables {
		var dump string
		if err := b.pool.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM catalog.`+table+` t`).Scan(&dump); err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{brokerPass, credential, b.admin} {
			if strings.Contains(dump, secret) {
				t.Errorf("catalog.%s holds a secret in plain text", table)
			}
		}
	}
	for _, secret := range []string{brokerPass, credential, b.admin} {
		if strings.Contains(b.logs.String(), secret) {
			t.Error("a secret is in the log")
		}
	}
}

// TestChangeFeedOrder writes from many goroutines at once (of several
// tokens, each with its share of the server) and checks
// that revisions are unique, dense and that each object's resourceVersion
// is its change's revision.
func TestChangeFeedOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	tokens := []string{b.admin}
	for range 3 {
		tok, err := b.store.CreateToken(context.Background(), catalog.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.must(201, b.do(tokens[i%len(tokens)], "POST", "/instances", map[string]any{"name": fmt.Sprintf("c-%d", i),
				"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
		}()
	}
	wg.Wait()
	ctx := context.Background()
	var n, distinct, max int64
	if err := b.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT revision), max(revision) FROM catalog.changes WHERE kind = 'ServiceInstance'`).Scan(&n, &distinct, &max); err != nil {
		t.Fatal(err)
	}
	if n != 40 || distinct != 40 {
		t.Fatalf("%d instance changes with %d distinct revisions", n, distinct)
	}
	var mismatched int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.instances i JOIN catalog.changes c ON c.object_id = i.id
		WHERE c.revision <> i.resource_version`).Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if mismatched != 0 {
		t.Errorf("%d instances whose resourceVersion is not their change's revision", mismatched)
	}
	rev, err := b.store.Revision(ctx)
	if err != nil || rev != max {
		t.Errorf("catalog revision %d, newest change %d (%v)", rev, max, err)
	}
}

// TestMarketplacePagesBounded: a page of plans ends early, with a continue
// token, once it holds 1 MiB of JSON; following the tokens gives every
// plan once.
func TestMarketplacePagesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := osbtest.DefaultCatalog()
	big := strings.Repeat("s", 400<<10)
	for i := range svc[0].Plans {
		svc[0].Plans[i].Schemas = &osbtest.Schemas{ServiceInstance: &osbtest.ServiceInstanceSchema{Create: &osbtest.InputParameters{
			Parameters: map[string]any{"type": "object", "description": big}}}}
	}
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(svc))
	b.must(201, b.do(b.admin, "POST", "/brokers", map[string]any{
		"name": "schemas", "url": fake.URL(), "auth": map[string]any{"basic": map[string]any{"username": "u", "password": "p"}},
	}))
	seen := map[string]bool{}
	pages := 0
	for path := "/serviceplans"; path != ""; pages++ {
		r := b.must(200, b.do(b.admin, "GET", path, nil))
		if len(r.raw) > 1<<20+500<<10 {
			t.Errorf("a page of %d bytes", len(r.raw))
		}
		for _, it := range r.items() {
			name, _ := it["name"].(string)
			if seen[name] {
				t.Errorf("plan %s on two pages", name)
			}
			seen[name] = true
		}
		path = ""
		if c := r.str("continue"); c != "" {
			path = "/serviceplans?continue=" + url.QueryEscape(c)
		}
	}
	if len(seen) != len(svc[0].Plans) || pages != 2 {
		t.Errorf("%d plans in %d pages, want %d in 2", len(seen), pages, len(svc[0].Plans))
	}
}
