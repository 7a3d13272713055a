package broker_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.expect(b.do("GET", "/v2/catalog", nil), http.StatusOK)
	golden(t, "catalog", r.raw)
	etag := r.header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	b.expect(b.do("GET", "/v2/catalog", nil, "If-None-Match", etag), http.StatusNotModified)
	b.expect(b.do("GET", "/v2/catalog", nil, "If-None-Match", `"other"`), http.StatusOK)
	services := r.body["services"].([]any)
	first := services[0].(map[string]any)
	if first["name"] != "postgresql" {
		t.Errorf("first service is %v, want postgresql", first["name"])
	}
	var stored int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM broker.catalog WHERE etag = $1`, etag).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("catalog stored in the broker schema: %d rows, %v", stored, err)
	}
}

// TestAuthAndVersion checks that 401 and 412/400 are decided before the
// body is read: every request here carries a body that is not JSON.
func TestAuthAndVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	garbage := "{not json"
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"no credentials", []string{"Authorization", ""}, 401, "Unauthorized"},
		{"wrong password", []string{"Authorization", "Basic " + b64("platform:nope")}, 401, "Unauthorized"},
		{"wrong user", []string{"Authorization", "Basic " + b64("nobody:"+pass)}, 401, "Unauthorized"},
		{"wrong token", []string{"Authorization", "Bearer nope"}, 401, "Unauthorized"},
		{"no credentials and bad version", []string{"Authorization", "", "X-Broker-API-Version", "1.0"}, 401, "Unauthorized"},
		{"missing version", []string{"X-Broker-API-Version", ""}, 400, "BadRequest"},
		{"version too old", []string{"X-Broker-API-Version", "2.12"}, 412, "PreconditionFailed"},
		{"version too new", []string{"X-Broker-API-Version", "2.18"}, 412, "PreconditionFailed"},
		{"other major", []string{"X-Broker-API-Version", "3.13"}, 412, "PreconditionFailed"},
		{"not a version", []string{"X-Broker-API-Version", "latest"}, 412, "PreconditionFailed"},
		{"token and 2.13", []string{"Authorization", "Bearer " + token, "X-Broker-API-Version", "2.13"}, 400, "BadRequest"},
		{"basic and 2.17", nil, 400, "BadRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do("PUT", "/v2/service_instances/"+randomID("auth"), garbage, tc.headers...)
			if r.status != tc.status || r.str("error") != tc.code || r.str("description") == "" {
				t.Fatalf("got %d %s, want %d %s", r.status, r.raw, tc.status, tc.code)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// Probes need no credentials.
	res, err := http.Get(b.url + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", res, err)
	}
	res.Body.Close()
}

func TestIdentityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do("GET", "/v2/catalog", nil, "X-Broker-API-Request-Identity", "req-42")
	if got := r.header.Get("X-Broker-API-Request-Identity"); got != "req-42" {
		t.Errorf("request identity echoed as %q", got)
	}
	r = b.do("GET", "/v2/catalog", nil, "X-Broker-API-Originating-Identity", "kubernetes !!!")
	b.expect(r, 400)
	if !strings.Contains(r.str("description"), "Originating-Identity") {
		t.Errorf("description %q does not name the header", r.str("description"))
	}
	id := randomID("ident")
	b.expect(b.do("PUT", "/v2/service_instances/"+id, provisionBody(planSmall, nil),
		"X-Broker-API-Originating-Identity", identityHeader("kubernetes", `{"username":"alice","uid":"42"}`),
		"X-Broker-API-Request-Identity", "req-43"), 201)
	var platform, username, reqID string
	err := b.pool.QueryRow(context.Background(), `SELECT originating_platform, originating_identity->>'username', request_identity
		FROM broker.operations WHERE instance_id = $1`, id).Scan(&platform, &username, &reqID)
	if err != nil || platform != "kubernetes" || username != "alice" || reqID != "req-43" {
		t.Errorf("recorded identity: %q %q %q %v", platform, username, reqID, err)
	}
	b.expect(b.do("DELETE", "/v2/service_instances/"+id+q(planSmall), nil), 200)
}

// TestSynchronousLifecycle provisions, binds, uses the database with the
// credentials, rotates, unbinds and deprovisions, checking every status
// code rule for repeated and conflicting requests on the way, and that
// nothing is left in PostgreSQL at the end.
func TestSynchronousLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := randomID("inst")
	path := "/v2/service_instances/" + id

	r := b.expect(b.do("PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": 5000})), 201)
	golden(t, "provision_created", r.raw)
	b.expect(b.do("PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": 5000})), 200)
	b.expect(b.do("PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": 6000})), 409)
	b.expect(b.do("PUT", path, provisionBody(planStd, map[string]any{"statement_timeout_ms": 5000})), 409)

	r = b.expect(b.do("GET", path, nil), 200)
	golden(t, "instance", r.raw)

	bpath := path + "/service_bindings/" + randomID("bind")
	r = b.expect(b.do("PUT", bpath, bindBody()), 201)
	creds := r.body["credentials"].(map[string]any)
	for _, k := range []string{"uri", "jdbcUrl", "host", "port", "database", "username", "password"} {
		if _, ok := creds[k]; !ok {
			t.Errorf("credentials lack %q", k)
		}
	}
	eps, _ := r.body["endpoints"].([]any)
	if len(eps) != 1 {
		t.Errorf("endpoints: %v", r.body["endpoints"])
	}
	again := b.expect(b.do("PUT", bpath, bindBody()), 200)
	if again.body["credentials"].(map[string]any)["password"] != creds["password"] {
		t.Error("identical bind returned other credentials")
	}
	conflict := bindBody()
	conflict["bind_resource"] = map[string]any{"app_guid": "app-2"}
	b.expect(b.do("PUT", bpath, conflict), 409)
	got := b.expect(b.do("GET", bpath, nil), 200)
	if got.body["credentials"].(map[string]any)["uri"] != creds["uri"] {
		t.Error("fetched binding has other credentials")
	}

	conn := connect(t, creds["uri"].(string))
	if _, err := conn.Exec(ctx, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	var timeout string
	if err := conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "5s" {
		t.Errorf("statement_timeout = %q (%v), want 5s from the instance parameters", timeout, err)
	}

	// Rotation: a new role; both work until each is unbound.
	rotated := path + "/service_bindings/" + randomID("rot")
	r = b.expect(b.do("PUT", rotated, map[string]any{"predecessor_binding_id": strings.TrimPrefix(bpath, path+"/service_bindings/")}), 201)
	creds2 := r.body["credentials"].(map[string]any)
	if creds2["username"] == creds["username"] {
		t.Fatal("rotation reused the predecessor's role")
	}
	conn2 := connect(t, creds2["uri"].(string))
	var body string
	if err := conn2.QueryRow(ctx, "SELECT body FROM notes").Scan(&body); err != nil || body != "hello" {
		t.Fatalf("the successor binding reads %q, %v", body, err)
	}
	conn.Close(ctx)
	b.expect(b.do("DELETE", bpath+q(planSmall), nil), 200)
	b.expect(b.do("DELETE", bpath+q(planSmall), nil), 410)
	b.expect(b.do("GET", bpath, nil), 404)
	if c, err := pgx.Connect(ctx, creds["uri"].(string)); err == nil {
		c.Close(ctx)
		t.Fatal("unbound credentials still log in")
	}
	if err := conn2.QueryRow(ctx, "SELECT body FROM notes").Scan(&body); err != nil {
		t.Fatalf("the successor stopped working when its predecessor was unbound: %v", err)
	}
	conn2.Close(ctx)
	b.expect(b.do("DELETE", rotated+q(planSmall), nil), 200)

	b.expect(b.do("DELETE", path+q(planSmall), nil), 200)
	b.expect(b.do("DELETE", path+q(planSmall), nil), 410)
	b.expect(b.do("GET", path, nil), 404)
	assertGone(t, id, creds["username"].(string), creds2["username"].(string))
}

// assertGone proves that the instance's database and roles are gone.
func assertGone(t *testing.T, instanceID string, roles ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	n := postgresql.InstanceNames(instanceID)
	var dbs, rs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, n.Database).Scan(&dbs); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`, append(roles, n.Owner)).Scan(&rs); err != nil {
		t.Fatal(err)
	}
	if dbs != 0 || rs != 0 {
		t.Fatalf("left behind: %d databases, %d roles", dbs, rs)
	}
}

func TestAsynchronousLifecycle(t *testing.T) {
	t.Parallel()
	g := newGate(nil)
	b := setup(t, func(o *options) {
		o.wrap = func(d broker.Driver) broker.Driver { g.Driver = d; return g }
	})
	id := randomID("async")
	path := "/v2/service_instances/" + id
	async := "?accepts_incomplete=true"

	r := b.expect(b.do("PUT", path+async, provisionBody(planAsync, nil)), 202)
	op := r.str("operation")
	if op == "" {
		t.Fatal("202 without operation")
	}
	<-g.entered // the provision is running, held by the gate
	lo := b.expect(b.do("GET", path+"/last_operation?operation="+op+"&service_id="+serviceID+"&plan_id="+planAsync, nil), 200)
	// Just begun: no Retry-After, the platform polls at its own pace.
	if lo.str("state") != "in progress" || lo.header.Get("Retry-After") != "" {
		t.Errorf("last_operation while running: %s, Retry-After %q", lo.raw, lo.header.Get("Retry-After"))
	}
	golden(t, "last_operation_in_progress", lo.raw)
	// Identical PUT: 202 with the same operation; different: 409.
	if again := b.expect(b.do("PUT", path+async, provisionBody(planAsync, nil)), 202); again.str("operation") != op {
		t.Errorf("repeated PUT gave operation %q, want %q", again.str("operation"), op)
	}
	b.expect(b.do("PUT", path+async, provisionBody(planStd, nil)), 409)
	// Without accepts_incomplete the same PUT cannot be answered 202.
	b.expect(b.do("PUT", path, provisionBody(planAsync, nil)), 422)
	// Other operations on the instance wait: ConcurrencyError.
	for _, tc := range []struct{ method, path string }{
		{"PATCH", path + async},
		{"DELETE", path + async + "&service_id=" + serviceID + "&plan_id=" + planAsync},
		{"PUT", path + "/service_bindings/" + randomID("b") + async},
	} {
		body := map[string]any{"service_id": serviceID, "plan_id": planAsync, "parameters": map[string]any{"statement_timeout_ms": 1000}}
		r := b.expect(b.do(tc.method, tc.path, body), 422)
		if r.str("error") != broker.CodeConcurrencyError {
			t.Errorf("%s during provision: %s", tc.method, r.raw)
		}
	}
	b.expect(b.do("GET", path, nil), 404) // provisioning still in progress
	g.release()
	lo = b.waitFor(path, op)
	if lo.str("state") != "succeeded" {
		t.Fatalf("provision ended %s", lo.raw)
	}
	b.expect(b.do("PUT", path+async, provisionBody(planAsync, nil)), 200)

	// Plan change and parameters, asynchronously.
	r = b.expect(b.do("PATCH", path+async, map[string]any{
		"service_id": serviceID, "plan_id": planStd, "parameters": map[string]any{"statement_timeout_ms": 1234},
		"previous_values": map[string]any{"plan_id": planAsync},
	}), 202)
	if lo := b.waitFor(path, r.str("operation")); lo.str("state") != "succeeded" {
		t.Fatalf("update ended %s", lo.raw)
	}
	inst := b.expect(b.do("GET", path, nil), 200)
	if inst.str("plan_id") != planStd || inst.body["parameters"].(map[string]any)["statement_timeout_ms"] != float64(1234) {
		t.Errorf("after update: %s", inst.raw)
	}

	bpath := path + "/service_bindings/" + randomID("bind")
	r = b.expect(b.do("PUT", bpath+async, map[string]any{"service_id": serviceID, "plan_id": planStd}), 202)
	if _, has := r.body["credentials"]; has {
		t.Error("202 bind response carries credentials")
	}
	if lo := b.waitFor(bpath, r.str("operation")); lo.str("state") != "succeeded" {
		t.Fatalf("bind ended %s", lo.raw)
	}
	got := b.expect(b.do("GET", bpath, nil), 200)
	creds := got.body["credentials"].(map[string]any)
	conn := connect(t, creds["uri"].(string))
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	r = b.expect(b.do("DELETE", bpath+async+"&service_id="+serviceID+"&plan_id="+planStd, nil), 202)
	if lo := b.waitFor(bpath, r.str("operation")); lo.status != 410 {
		t.Fatalf("last_operation after unbind: %d %s, want 410", lo.status, lo.raw)
	}
	r = b.expect(b.do("DELETE", path+async+"&service_id="+serviceID+"&plan_id="+planStd, nil), 202)
	if lo := b.waitFor(path, r.str("operation")); lo.status != 410 {
		t.Fatalf("last_operation after deprovision: %d %s, want 410", lo.status, lo.raw)
	}
	assertGone(t, id, creds["username"].(string))
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := randomID("val")
	path := "/v2/service_instances/" + id
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
		says   string
	}{
		{"not json", "PUT", path, "{", 400, "BadRequest", "request body"},
		{"empty body", "PUT", path, "", 400, "BadRequest", "JSON object is required"},
		{"wrong type", "PUT", path, `{"service_id": 7}`, 400, "BadRequest", "service_id"},
		{"missing fields", "PUT", path, map[string]any{"service_id": serviceID}, 400, "BadRequest", "organization_guid, plan_id, space_guid"},
		{"unknown service", "PUT", path, map[string]any{"service_id": "x", "plan_id": planSmall, "organization_guid": "o", "space_guid": "s"}, 400, "BadRequest", "service_id"},
		{"unknown plan", "PUT", path, provisionBody("nope", nil), 400, "BadRequest", "plan_id"},
		{"bad parameter type", "PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": "fast"}), 400, "BadRequest", "parameters/statement_timeout_ms"},
		{"parameter out of range", "PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": 0}), 400, "BadRequest", "parameters/statement_timeout_ms"},
		{"unknown parameter", "PUT", path, provisionBody(planSmall, map[string]any{"nope": 1}), 400, "BadRequest", "parameters"},
		{"async only plan", "PUT", path, provisionBody(planAsync, nil), 422, broker.CodeAsyncRequired, "asynchronous"},
		{"maintenance conflict", "PUT", path, withMaintenance(provisionBody(planSmall, nil), "0.9.0"), 422, broker.CodeMaintenanceInfoConflict, "maintenance"},
		{"bad accepts_incomplete", "PUT", path + "?accepts_incomplete=yes", provisionBody(planSmall, nil), 400, "BadRequest", "accepts_incomplete"},
		{"context not an object", "PUT", path, map[string]any{"service_id": serviceID, "plan_id": planSmall, "organization_guid": "o", "space_guid": "s", "context": 3}, 400, "BadRequest", "context"},
		{"deprovision without ids", "DELETE", path, nil, 400, "BadRequest", "service_id, plan_id"},
		{"deprovision unknown", "DELETE", path + q(planSmall), nil, 410, "", ""},
		{"update unknown", "PATCH", path, map[string]any{"service_id": serviceID}, 404, "NotFound", "does not exist"},
		{"bind unknown instance", "PUT", path + "/service_bindings/x", bindBody(), 404, "NotFound", "does not exist"},
		{"unbind unknown", "DELETE", path + "/service_bindings/x" + q(planSmall), nil, 410, "", ""},
		{"last operation unknown", "GET", path + "/last_operation", nil, 404, "NotFound", ""},
		{"empty operation", "GET", path + "/last_operation?operation=", nil, 400, "BadRequest", "operation"},
		{"fetch unknown", "GET", path, nil, 404, "NotFound", ""},
		{"unknown route", "GET", "/v2/nope", nil, 404, "Not Found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body)
			if r.status != tc.status || r.str("error") != tc.code || !strings.Contains(r.str("description"), tc.says) {
				t.Fatalf("got %d %s, want %d %s mentioning %q", r.status, r.raw, tc.status, tc.code, tc.says)
			}
		})
	}
	// Nothing of the rejected requests was kept.
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM broker.instances`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d instances recorded after only rejected requests (%v)", n, err)
	}
}

func withMaintenance(body map[string]any, version string) map[string]any {
	body["maintenance_info"] = map[string]any{"version": version}
	return body
}

func TestUpdateRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := randomID("upd")
	path := "/v2/service_instances/" + id
	b.expect(b.do("PUT", path, provisionBody(planSmall, nil)), 201)
	// No change: 200 without an operation.
	b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "context": map[string]any{"platform": "kubernetes", "instance_name": "db"}}), 200)
	b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "maintenance_info": map[string]any{"version": "2.0.0"}}), 422)
	b.expect(b.do("PATCH", path, map[string]any{"service_id": "other"}), 400)
	b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "plan_id": "nope"}), 400)
	r := b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "plan_id": planAsync}), 422)
	if r.str("error") != broker.CodeAsyncRequired {
		t.Errorf("changing to an async-only plan synchronously: %s", r.raw)
	}
	b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "plan_id": planStd, "maintenance_info": map[string]any{"version": "1.0.0"}}), 200)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var limit int
	n := postgresql.InstanceNames(id)
	if err := conn.QueryRow(ctx, `SELECT datconnlimit FROM pg_database WHERE datname = $1`, n.Database).Scan(&limit); err != nil || limit != 50 {
		t.Errorf("connection limit after the plan change: %d (%v), want the standard plan's 50", limit, err)
	}
	inst := b.expect(b.do("GET", path, nil), 200)
	if inst.str("plan_id") != planStd {
		t.Errorf("plan after update: %s", inst.raw)
	}
	b.expect(b.do("DELETE", path+q(planStd), nil), 200)
	assertGone(t, id)
}

// TestConcurrentProvisions sends the same synchronous provision many times
// at once: one creates the instance, the others get 200 or ConcurrencyError,
// and exactly one database exists.
func TestConcurrentProvisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := randomID("conc")
	path := "/v2/service_instances/" + id
	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = b.do("PUT", path, provisionBody(planSmall, nil)).status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case 201:
			created++
		case 200, 422:
		default:
			t.Errorf("status %d among concurrent provisions", s)
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d concurrent provisions answered 201: %v", created, n, statuses)
	}
	// Concurrent binds on one instance each get their own role.
	var roles sync.Map
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.do("PUT", path+"/service_bindings/"+randomID("cb"), bindBody())
			if r.status != 201 {
				t.Errorf("concurrent bind %d: %d %s", i, r.status, r.raw)
				return
			}
			roles.Store(r.body["credentials"].(map[string]any)["username"], true)
		}()
	}
	wg.Wait()
	count := 0
	roles.Range(func(any, any) bool { count++; return true })
	if count != 6 {
		t.Errorf("%d distinct roles from 6 binds", count)
	}
	b.expect(b.do("DELETE", path+q(planSmall), nil), 200)
	assertGone(t, id)
}

func b64(s string) string { return identityHeader("", s)[1:] }
