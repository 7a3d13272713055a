package restapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/restapi"
)

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

// TestUnstorableInput: strings PostgreSQL cannot hold (NUL, invalid UTF-8)
// in bodies, path ids and query parameters are 400s naming the field; an
// oversize body, a merge patch's too, is a 413 with the limit. None is a
// 5xx.
func TestUnstorableInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	for _, tc := range []struct {
		method, path, body, field string
		status                    int
	}{
		{"POST", "/instances", `{"name":"db","namespace":"a","labels":{"x":"a\u0000b"},"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, "labels.x", 400},
		{"POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","externalID":"\u0000"}}`, "spec.externalID", 400},
		{"POST", "/instances", "{\"name\":\"db\",\"namespace\":\"a\",\"spec\":{\"clusterServiceClassExternalName\":\"postgresql\",\"clusterServicePlanExternalName\":\"small\",\"externalID\":\"\xff\"}}", "body", 400},
		{"POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","parameters":{"k":["\u0000"]}}}`, "spec.parameters.k[0]", 400},
		{"GET", "/instances/%00", "", "id", 400},
		{"GET", "/instances/%FF", "", "id", 400},
		{"GET", "/instances?namespace=%00", "", "namespace", 400},
		{"GET", "/instances?continue=%FF%FE", "", "continue", 400},
		{"GET", "/serviceplans?class=a%00b", "", "class", 400},
		{"GET", "/serviceplans?visibleIn=A_B", "", "visibleIn", 400},
		{"POST", "/instances", `{"name":"db","namespace":"a","spec":{"parameters":{"x":"` + strings.Repeat("a", 10<<20) + `"}}}`, "", 413},
		{"PATCH", "/instances/db?namespace=a", `{"spec":{"parameters":{"x":"` + strings.Repeat("a", 5<<20) + `"}}}`, "", 413},
	} {
		r := b.do(dev, tc.method, tc.path, tc.body)
		if r.status != tc.status || r.str("field") != tc.field {
			t.Errorf("%s %s: %d field %q, want %d field %q: %.300s", tc.method, tc.path, r.status, r.str("field"), tc.status, tc.field, r.raw)
		}
	}
	// Credentials in a broker's URL are refused without being quoted back:
	// they belong in the sealed auth fields.
	r := b.do(b.token("admin"), "POST", "/brokers", `{"name":"creds","url":"http://user:hunter2@127.0.0.1:1"}`)
	if r.status != 400 || r.str("field") != "url" || strings.Contains(string(r.raw), "hunter2") {
		t.Errorf("a broker URL with credentials: %d %s", r.status, r.raw)
	}
	// Credentials past what an HTTP header to the broker can carry.
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/brokers", `{"name":"big","url":"http://127.0.0.1:1","auth":{"basic":{"username":"u","password":"` + strings.Repeat("p", 8193) + `"}}}`, "auth.basic.password"},
		{"POST", "/brokers", `{"name":"big","url":"http://127.0.0.1:1","auth":{"basic":{"username":"` + strings.Repeat("é", 4097) + `","password":"p"}}}`, "auth.basic.username"},
		{"PATCH", "/brokers/bindery", `{"auth":{"bearer":{"token":"` + strings.Repeat("t", 100_000) + `"}}}`, "auth.bearer.token"},
		// Each within 8 KiB, but not the header they make: "Bearer " and
		// the token, "Basic " and the base64 of user:password.
		{"PATCH", "/brokers/bindery", `{"auth":{"bearer":{"token":"` + strings.Repeat("t", 8192-len("Bearer ")+1) + `"}}}`, "auth.bearer.token"},
		{"POST", "/brokers", `{"name":"big","url":"http://127.0.0.1:1","auth":{"basic":{"username":"u","password":"` + strings.Repeat("p", 6200) + `"}}}`, "auth.basic.password"},
	} {
		if r := b.do(b.admin, tc.method, tc.path, tc.body); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("%s %s with a credential whose header is past 8 KiB: %d field %q, want 400 naming %s: %.300s", tc.method, tc.path, r.status, r.str("field"), tc.field, r.raw)
		}
	}
	// A port or a host name no connection could use.
	for _, u := range []string{"http://127.0.0.1:99999", "http://127.0.0.1:0", "http://" + strings.Repeat("a", 254)} {
		if r := b.do(b.token("admin"), "POST", "/brokers", map[string]any{"name": "unusable", "url": u}); r.status != 400 || r.str("field") != "url" {
			t.Errorf("a broker URL %.40s: %d %s", u, r.status, r.raw)
		}
	}
	// A continue token that decodes to a NUL-holding cursor.
	r = b.do(dev, "GET", "/instances?continue="+base64.RawURLEncoding.EncodeToString([]byte(`{"n":"\u0000","i":"\u0000"}`)), "")
	if r.status != 400 || r.str("field") != "continue" {
		t.Errorf("crafted continue token: %d %s", r.status, r.raw)
	}
}

// TestUndeclaredQueryRefused: a query parameter the operation does not
// take is a 400 naming it and listing those it takes, not ignored: a list
// of instances by labelSelector, which only exports have, used to answer
// every instance as if it had been filtered.
func TestUndeclaredQueryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	for _, tc := range []struct{ path, field, takes string }{
		{"/instances?labelSelector=app%3Dweb", "labelSelector", "continue, limit, namespace"},
		{"/instances?namespace=a&namespce=b", "namespce", "continue, limit, namespace"},
		{"/instances/db?namespace=a&pretty=true", "pretty", "namespace"},
		{"/export/instances?limit=5", "limit", "labelSelector, namespace"},
	} {
		r := b.do(dev, "GET", tc.path, "")
		if r.status != 400 || r.str("field") != tc.field || !strings.Contains(r.str("message"), "(it takes: "+tc.takes+")") {
			t.Errorf("GET %s: %d field %q, want 400 naming %s and taking %s: %.300s", tc.path, r.status, r.str("field"), tc.field, tc.takes, r.raw)
		}
	}
	b.must(200, b.do(dev, "GET", "/instances?namespace=a&limit=5", ""))
}

// TestDuplicateKeysRefused: a body naming a field twice is a 400 naming
// it. The last value used to win silently, so a quota of
// {"instances":1,"instances":2} was set to 2, and a merge patch's
// duplicate was applied as whichever value came last.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	b.must(201, b.do(dev, "POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`))
	for _, tc := range []struct{ token, method, path, body, field string }{
		{b.admin, "PUT", "/quotas/a", `{"instances":1,"instances":2}`, "instances"},
		{dev, "POST", "/instances", `{"name":"x","name":"y","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, "name"},
		{dev, "PATCH", "/instances/db?namespace=a", `{"spec":{"parameters":{"n":1,"n":2}}}`, "spec.parameters.n"},
		{b.admin, "PATCH", "/brokers/bindery", `{"url":"http://a","url":"http://b"}`, "url"},
		{dev, "POST", "/bindings", `{"name":"app","namespace":"a","spec":{"instanceRef":{"name":"db"},"secretTransforms":[{"removeKey":{"key":"a","key":"b"}}]}}`, "spec.secretTransforms[0].removeKey.key"},
	} {
		if r := b.do(tc.token, tc.method, tc.path, tc.body); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("%s %s %s: %d field %q, want 400 naming %s: %.300s", tc.method, tc.path, tc.body, r.status, r.str("field"), tc.field, r.raw)
		}
	}
	b.must(404, b.do(b.admin, "GET", "/quotas/a", "")) // the refused quota was not set
}

// TestCraftedContinueRefused: a continue token this API did not make is a
// 400 naming continue. One without a broker id used to end in a 500 for
// classes and plans, whose pages are ordered by broker, and one without a
// name started the list over for instances and brokers, and one with a
// position past PostgreSQL's integers ended in a 500 for classes and
// plans.
func TestCraftedContinueRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	const broker = `"00000000-0000-0000-0000-000000000000"`
	for _, tok := range []string{`{"n":"x"}`, `{}`, `{"x":1}`, `{"n":"x","p":-1}`, `{"n":` + broker + `,"p":2147483648}`, `{"n":` + broker + `,"b":2147483648}`} {
		for _, path := range []string{"/serviceclasses", "/serviceplans", "/instances", "/brokers"} {
			if tok == `{"n":"x"}` && (path == "/instances" || path == "/brokers") {
				continue // the shape of a real token there: a name past every object
			}
			if r := b.do(dev, "GET", path+"?continue="+base64.RawURLEncoding.EncodeToString([]byte(tok)), ""); r.status != 400 || r.str("field") != "continue" {
				t.Errorf("GET %s with continue %s: %d field %q, want 400 naming continue: %.300s", path, tok, r.status, r.str("field"), r.raw)
			}
		}
	}
	// The tokens the API makes still page.
	for _, path := range []string{"/serviceplans", "/serviceclasses"} {
		page := b.must(200, b.do(dev, "GET", path+"?limit=1", ""))
		if cont := page.str("continue"); cont != "" {
			b.must(200, b.do(dev, "GET", path+"?limit=1&continue="+cont, ""))
		}
	}
}

// TestBadNamespaceQueryRefused: a namespace no object can be in is a 400
// naming the parameter and saying, in words, what a namespace is. A list,
// an export or a lookup by name used to answer 200 with nothing found, as
// if the namespace were merely empty; then the 400 quoted the regular
// expression it failed.
func TestBadNamespaceQueryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dev := b.token("developer")
	for _, tc := range []struct{ token, method, path, field string }{
		{dev, "GET", "/instances?namespace=A_B", "namespace"},
		{dev, "GET", "/bindings?namespace=" + strings.Repeat("a", 64), "namespace"},
		{dev, "GET", "/export/instances?namespace=team%20a", "namespace"},
		{dev, "GET", "/instances/db?namespace=-a", "namespace"},
		{dev, "GET", "/bindings/app/events?namespace=A", "namespace"},
		{dev, "GET", "/serviceplans?visibleIn=A_B", "visibleIn"},
		{b.admin, "GET", "/quotas/A_B", "namespace"},
		{b.admin, "DELETE", "/quotas/_Default", "namespace"},
	} {
		r := b.do(tc.token, tc.method, tc.path, nil)
		if msg := r.str("message"); r.status != 400 || r.str("field") != tc.field || !strings.Contains(msg, "must be a DNS label") || strings.Contains(msg, "regular expression") {
			t.Errorf("%s %.80s: %d field %q, want 400 naming %s and saying what a namespace is: %.300s", tc.method, tc.path, r.status, r.str("field"), tc.field, r.raw)
		}
	}
	b.must(200, b.do(dev, "GET", "/instances?namespace=team-a", ""))
	b.must(200, b.do(dev, "GET", "/instances?namespace=", ""))
}

// TestRepeatedQueryRefused: a query parameter given twice is a 400 naming
// it. ?limit=1&limit=2 used to answer a page of 1, the second value
// dropped without a word.
func TestRepeatedQueryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dev := b.token("developer")
	for _, tc := range []struct{ path, field string }{
		{"/instances?limit=1&limit=2", "limit"},
		{"/bindings?namespace=a&namespace=b", "namespace"},
		{"/export/instances?labelSelector=a%3D1&labelSelector=b%3D2", "labelSelector"},
	} {
		if r := b.do(dev, "GET", tc.path, ""); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("GET %s: %d field %q, want 400 naming %s: %.300s", tc.path, r.status, r.str("field"), tc.field, r.raw)
		}
	}
}

// TestDatabaseOutage: with the database unreachable, requests answer 503
// with Retry-After (as /readyz says), not 500.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now
	pool, err := pgxpool.New(ctx, "postgres://bindery:x@"+dead+"/catalog?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := catalog.NewStore(pool, nil, nil)
	api := restapi.New(store, slog.New(slog.DiscardHandler))
	e := serve.NewEcho(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/instances", nil)
	req.Header.Set("Authorization", "Bearer bdy_whatever")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("outage: %d Retry-After=%q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
}

// TestImmutableFields: a PATCH that changes what cannot change is refused
// naming the field (it used to answer 200, drop the change and bump the
// resourceVersion); a PATCH that changes nothing keeps the resourceVersion.
func TestImmutableFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	in := b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": "db", "namespace": "a",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
	id := in.str("id")
	for _, tc := range []struct {
		patch map[string]any
		field string
	}{
		{map[string]any{"name": "other"}, "name"},
		{map[string]any{"namespace": "b"}, "namespace"},
		{map[string]any{"spec": map[string]any{"clusterServiceClassRef": map[string]any{"name": "x"}}}, "spec.clusterServiceClassRef.name"},
		{map[string]any{"spec": map[string]any{"clusterServicePlanRef": map[string]any{"name": "x"}}}, "spec.clusterServicePlanRef.name"},
		{map[string]any{"spec": map[string]any{"updateRequests": -1}}, "spec.updateRequests"},
	} {
		r := b.must(400, b.do(dev, "PATCH", "/instances/"+id, tc.patch))
		if r.str("error") != "invalid" || r.str("field") != tc.field {
			t.Errorf("patch %v: %s, want invalid %s", tc.patch, r.raw, tc.field)
		}
	}
	// updateRequests only counts up, as Service Catalog's did.
	b.must(200, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"updateRequests": 2}}))
	if r := b.must(400, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"spec": map[string]any{"updateRequests": 1}})); r.str("field") != "spec.updateRequests" {
		t.Errorf("updateRequests 2 → 1: %s, want invalid spec.updateRequests", r.raw)
	}
	if r := b.must(400, b.do(dev, "POST", "/instances", map[string]any{"name": "db2", "namespace": "a", "spec": map[string]any{
		"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small", "updateRequests": -1}})); r.str("field") != "spec.updateRequests" {
		t.Errorf("a new instance with updateRequests -1: %s, want invalid spec.updateRequests", r.raw)
	}
	in = b.must(200, b.do(dev, "GET", "/instances/"+id, nil))
	same := b.must(200, b.do(dev, "PATCH", "/instances/"+id, map[string]any{"name": "db", "labels": map[string]any{}}))
	if same.body["resourceVersion"] != in.body["resourceVersion"] {
		t.Errorf("a patch that changes nothing moved resourceVersion %v → %v", in.body["resourceVersion"], same.body["resourceVersion"])
	}
}

// TestTokens: tokens have names, roles, namespaces and expiry; a token
// limited to a namespace sees and changes only that namespace (others'
// objects are not found, not forbidden, so it cannot learn they exist);
// cluster-scoped writes and tokens need an all-namespaces admin; revocation
// and expiry take effect on the next request.
func TestTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	spec := map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}
	other := b.must(201, b.do(b.admin, "POST", "/instances", map[string]any{"name": "db", "namespace": "team-b", "spec": spec}))
	created := b.must(201, b.do(b.admin, "POST", "/tokens", map[string]any{"name": "team-a-ci", "role": "developer", "namespaces": []string{"team-a"}}))
	tok := created.str("token")
	if !strings.HasPrefix(tok, "bdy_") || created.str("name") != "team-a-ci" {
		t.Fatalf("created token: %s", created.raw)
	}
	b.must(409, b.do(b.admin, "POST", "/tokens", map[string]any{"name": "team-a-ci", "role": "viewer"}))
	b.must(400, b.do(b.admin, "POST", "/tokens", map[string]any{"role": "viewer", "namespaces": []string{"Bad_NS"}}))

	mine := b.must(201, b.do(tok, "POST", "/instances", map[string]any{"name": "db", "namespace": "team-a", "spec": spec}))
	b.must(403, b.do(tok, "POST", "/instances", map[string]any{"name": "db2", "namespace": "team-b", "spec": spec}))
	b.must(403, b.do(tok, "POST", "/instances", map[string]any{"name": "db3", "spec": spec})) // "default"
	if items := b.must(200, b.do(tok, "GET", "/instances", nil)).items(); len(items) != 1 || items[0]["namespace"] != "team-a" {
		t.Errorf("a team-a token lists %v", items)
	}
	b.must(403, b.do(tok, "GET", "/instances?namespace=team-b", nil))
	b.must(404, b.do(tok, "GET", "/instances/"+other.str("id"), nil))
	b.must(404, b.do(tok, "DELETE", "/instances/"+other.str("id"), nil))
	b.must(404, b.do(tok, "GET", "/instances/db?namespace=team-b", nil))
	if r := b.must(200, b.do(tok, "GET", "/instances/db?namespace=team-a", nil)); r.str("id") != mine.str("id") {
		t.Errorf("lookup by name: %s", r.raw)
	}
	b.must(403, b.do(tok, "POST", "/brokers", map[string]any{"name": "x", "url": b.brokerURL}))

	limitedAdmin := b.must(201, b.do(b.admin, "POST", "/tokens", map[string]any{"role": "admin", "namespaces": []string{"team-a"}})).str("token")
	b.must(403, b.do(limitedAdmin, "GET", "/tokens", nil))
	b.must(403, b.do(limitedAdmin, "DELETE", "/brokers/bindery", nil))

	list := b.must(200, b.do(b.admin, "GET", "/tokens", nil)).items()
	if len(list) < 3 || strings.Contains(fmt.Sprint(list), tok) {
		t.Errorf("token list: %v", list)
	}
	// The server keeps the tokens it checked (catalog.TokenCache): the one
	// that revokes forgets them at once, the others when PostgreSQL
	// announces the removal.
	b.must(204, b.do(b.admin, "DELETE", "/tokens/team-a-ci", nil))
	b.must(401, b.do(tok, "GET", "/instances", nil))
	b.must(404, b.do(b.admin, "DELETE", "/tokens/team-a-ci", nil))
	elsewhere := b.must(201, b.do(b.admin, "POST", "/tokens", map[string]any{"name": "elsewhere", "role": "viewer"})).str("token")
	b.must(200, b.do(elsewhere, "GET", "/instances", nil))
	if err := b.store.RevokeToken(context.Background(), "elsewhere"); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if r := b.do(elsewhere, "GET", "/instances", nil); r.status != http.StatusUnauthorized {
			return fmt.Errorf("a token revoked by another server: %d", r.status)
		}
		return nil
	})

	// Expiry: a token past its expiresAt is refused. The database is
	// changed by hand to make it expire, which the server hears of as it
	// hears of a removal.
	exp := b.must(201, b.do(b.admin, "POST", "/tokens", map[string]any{"role": "viewer", "expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}))
	b.must(200, b.do(exp.str("token"), "GET", "/instances", nil))
	if _, err := b.pool.Exec(context.Background(), `UPDATE catalog.api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, exp.str("id")); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if r := b.do(exp.str("token"), "GET", "/instances", nil); r.status != http.StatusUnauthorized {
			return fmt.Errorf("an expired token: %d", r.status)
		}
		return nil
	})
	b.must(400, b.do(b.admin, "POST", "/tokens", map[string]any{"role": "viewer", "expiresAt": "2001-01-01T00:00:00Z"}))
	// A time the document's pattern lets through but no clock has.
	for _, at := range []string{"2030-01-01T00:00:00+99:00", "2030-02-31T00:00:00Z"} {
		if r := b.must(400, b.do(b.admin, "POST", "/tokens", map[string]any{"role": "viewer", "expiresAt": at})); r.str("field") != "expiresAt" {
			t.Errorf("expiresAt %s: %s, want a 400 naming expiresAt", at, r.raw)
		}
	}
}

// TestShutdownDuringRegistration: a shutdown while a registration waits on
// a broker that does not answer cancels the fetch within the server's
// grace, and the client still gets the broker, registered, with a status
// that says the fetch was cancelled (and a next attempt) — not a 500.
func TestShutdownDuringRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	log := slog.New(slog.DiscardHandler)
	api := restapi.New(b.store, log)
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, l, e, log) }()
	time.AfterFunc(300*time.Millisecond, stop)
	start := time.Now()
	req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/api/v1/brokers",
		strings.NewReader(`{"name":"silent","url":"http://`+silent.Addr().String()+`"}`))
	req.Header.Set("Authorization", "Bearer "+b.admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := b.client.Do(req) // checked against the OpenAPI description
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != http.StatusCreated || !strings.Contains(string(body), "cancelled") || took > 5*time.Second {
		t.Fatalf("registration cut by a shutdown: %d after %s: %s", res.StatusCode, took, body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCutShortRequest: a request whose context ends (a shutdown past its
// grace, a client gone) answers 503 with Retry-After, not a 500.
func TestCutShortRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(200, b.do(b.admin, "GET", "/instances", nil)) // the suite checks at least one exchange
	log := slog.New(slog.DiscardHandler)
	api := restapi.New(b.store, log)
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/instances", nil)
	req.Header.Set("Authorization", "Bearer "+b.admin)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a request cut short: %d %s", rec.Code, rec.Body)
	}
}

// TestParametersFromChecked: spec.parametersFrom must name a Secret and a
// key of it; a missing or malformed reference is a 400 naming the field,
// not an object the engine then fails to read the Secret for, again and
// again.
func TestParametersFromChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	instance := func(from string) string {
		return `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","parametersFrom":` + from + `}}`
	}
	for _, tc := range []struct{ path, body, field string }{
		{"/instances", instance(`[{}]`), "spec.parametersFrom[0].secretKeyRef"},
		{"/instances", instance(`[{"secretKeyRef":{"name":"","key":"k"}}]`), "spec.parametersFrom[0].secretKeyRef.name"},
		{"/instances", instance(`[{"secretKeyRef":{"name":"s","key":"k"}},{"secretKeyRef":{"name":"Not A Name","key":"k"}}]`), "spec.parametersFrom[1].secretKeyRef.name"},
		{"/instances", instance(`[{"secretKeyRef":{"name":"s","key":"a/b"}}]`), "spec.parametersFrom[0].secretKeyRef.key"},
		{"/bindings", `{"name":"app","namespace":"a","spec":{"instanceRef":{"name":"db"},"parametersFrom":[{"secretKeyRef":{"name":"s","key":""}}]}}`, "spec.parametersFrom[0].secretKeyRef.key"},
	} {
		if r := b.do(dev, "POST", tc.path, tc.body); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", tc.path, tc.body, r.status, r.raw, tc.field)
		}
	}
	b.must(201, b.do(dev, "POST", "/instances", instance(`[{"secretKeyRef":{"name":"db-params","key":"params.json"}}]`)))
}

// TestSecretTransformsChecked: a binding's secretTransforms are checked
// when it is written — one transform an entry, Secret keys, one value, a
// JSONPath that parses — so that a bad one is a 400 naming the field
// rather than a binding the broker makes and no Secret can hold.
func TestSecretTransformsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	binding := func(transforms string) string {
		return `{"name":"app","namespace":"a","spec":{"instanceRef":{"name":"db"},"secretTransforms":` + transforms + `}}`
	}
	for _, tc := range []struct{ transforms, field string }{
		{`[{}]`, "spec.secretTransforms[0]"},
		{`[{"removeKey":{"key":"a"},"renameKey":{"from":"b","to":"c"}}]`, "spec.secretTransforms[0]"},
		{`[{"renameKey":{"from":"b","to":"a/b"}}]`, "spec.secretTransforms[0].renameKey.to"},
		{`[{"addKey":{"key":"","stringValue":"x"}}]`, "spec.secretTransforms[0].addKey.key"},
		{`[{"addKey":{"key":"k","stringValue":"x","jsonPathExpression":"{.a}"}}]`, "spec.secretTransforms[0].addKey"},
		{`[{"removeKey":{"key":"a"}},{"addKey":{"key":"k","jsonPathExpression":"{{{{"}}]`, "spec.secretTransforms[1].addKey.jsonPathExpression"},
		{`[{"addKeysFrom":{}}]`, "spec.secretTransforms[0].addKeysFrom.secretRef"},
		{`[{"removeKey":{"key":""}}]`, "spec.secretTransforms[0].removeKey.key"},
	} {
		if r := b.do(dev, "POST", "/bindings", binding(tc.transforms)); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("secretTransforms %s: %d %s, want 400 naming %s", tc.transforms, r.status, r.raw, tc.field)
		}
	}
	b.must(201, b.do(dev, "POST", "/bindings", binding(`[{"renameKey":{"from":"uri","to":"DATABASE_URL"}},{"addKey":{"key":"host2","jsonPathExpression":"{.host}"}}]`)))
}

// TestDeepBodyRefused: a body that nests deeper than 100 levels is a 400
// saying so before anything reads it further: the merge patch of an
// instance, applied in time that grows with the square of its depth, took
// seconds at a few thousand levels.
func TestDeepBodyRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	created := b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": "db",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}}))
	nested := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/instances/" + created.str("id"), `{"spec":{"parameters":` + nested(3000) + `}}`},
		{"POST", "/instances", `{"name":"deep","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small","parameters":` + nested(200) + `}}`},
	} {
		r := b.do(dev, tc.method, tc.path, tc.body)
		if r.status != 400 || !strings.Contains(r.str("message"), "nests deeper than 100 levels") {
			t.Errorf("%s %s nested past 100 levels: %d %.200s", tc.method, tc.path, r.status, r.raw)
		}
	}
}

// TestBodyNotJSONNamed: a body that is no JSON document (cut short, or
// text) is a 400 that says so in words, not the decoder's; one that is
// JSON but no object (a merge patch of [] or null too) is a 400 that names
// the request body and says it must be an object. Those used to say only
// "value must be an object" or "Value is not nullable", naming nothing.
func TestBodyNotJSONNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []string{`{"name":`, `name=db`} {
		r := b.do(b.admin, "POST", "/brokers", body)
		if msg := r.str("message"); r.status != 400 || !strings.Contains(msg, "is not a JSON document") || strings.Contains(msg, "failed to") {
			t.Errorf("POST /brokers %s: %d %q, want 400 saying the body is not a JSON document", body, r.status, msg)
		}
	}
	b.registerBindery("bindery")
	dev := b.token("developer")
	b.must(201, b.do(dev, "POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`))
	for _, tc := range []struct{ token, method, path string }{
		{dev, "PATCH", "/instances/db?namespace=a"},
		{b.admin, "PATCH", "/brokers/bindery"},
		{dev, "POST", "/instances"},
		{b.admin, "PUT", "/quotas/a"},
	} {
		for _, body := range []string{`[]`, `null`, `"db"`, `3`, `[{"name":"db"}]`} {
			r := b.do(tc.token, tc.method, tc.path, body)
			if msg := r.str("message"); r.status != 400 || msg != "request body: must be a JSON object" {
				t.Errorf("%s %s %s: %d %q, want 400 saying the request body must be a JSON object", tc.method, tc.path, body, r.status, msg)
			}
		}
	}
}

// TestReferenceNamesBounded: an instance naming its class or plan by a
// name or id longer than any a broker's catalogue can hold (255 bytes,
// osb.MaxCatalogID; 253 for an object name) is a 400 naming the field and
// the bound. It used to be recorded, waiting for a class that could never
// come.
func TestReferenceNamesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	long, wide := strings.Repeat("x", 300), strings.Repeat("é", 128) // 256 bytes in 128 characters
	for i, tc := range []struct {
		spec  map[string]any
		field string
	}{
		{map[string]any{"clusterServiceClassExternalName": long, "clusterServicePlanExternalName": "small"}, "spec.clusterServiceClassExternalName"},
		{map[string]any{"clusterServiceClassExternalName": wide}, "spec.clusterServiceClassExternalName"},
		{map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": long}, "spec.clusterServicePlanExternalName"},
		{map[string]any{"clusterServiceClassExternalID": long, "clusterServicePlanExternalID": "x"}, "spec.clusterServiceClassExternalID"},
		{map[string]any{"clusterServiceClassName": long}, "spec.clusterServiceClassName"},
		{map[string]any{"serviceClassExternalName": "x", "servicePlanExternalName": wide}, "spec.servicePlanExternalName"},
		{map[string]any{"serviceClassExternalID": long}, "spec.serviceClassExternalID"},
		{map[string]any{"serviceClassName": "x", "servicePlanName": long}, "spec.servicePlanName"},
	} {
		r := b.do(dev, "POST", "/instances", map[string]any{"name": fmt.Sprintf("db%d", i), "namespace": "a", "spec": tc.spec})
		if r.status != 400 || r.str("field") != tc.field || !strings.Contains(r.str("message"), "at most 25") {
			t.Errorf("spec %.80v: %d field %q, want 400 naming %s and its bound: %.300s", tc.spec, r.status, r.str("field"), tc.field, r.raw)
		}
	}
	// At the bound, a name no broker offers yet is recorded and waits.
	b.must(201, b.do(dev, "POST", "/instances", map[string]any{"name": "waits", "namespace": "a",
		"spec": map[string]any{"clusterServiceClassExternalName": strings.Repeat("x", 255), "clusterServicePlanExternalName": strings.Repeat("é", 127)}}))
}

// TestBodyMediaTypeRefused: a body sent as a type the operation does not
// take (text, XML, a form, none named, JSON in another charset, a
// Content-Type that is no media type) is a 415 naming Content-Type and
// the types taken; two Content-Types are a 400. They used to be 400s with
// kin-openapi's words, and JSON declared as latin1 was read as UTF-8.
func TestBodyMediaTypeRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	b.must(201, b.do(dev, "POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`))
	send := func(token, method, path, body string, types ...string) response {
		h := http.Header{"Authorization": {"Bearer " + token}}
		if types != nil {
			h["Content-Type"] = types
		}
		return b.doHeader(h, method, path, strings.NewReader(body))
	}
	for _, tc := range []struct{ token, method, path, body, takes string }{
		{dev, "POST", "/instances", `{"name":"db2","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, "application/json"},
		{dev, "PATCH", "/instances/db?namespace=a", `{"labels":{"a":"b"}}`, "application/merge-patch+json"},
		{b.admin, "PUT", "/quotas/a", `{"instances":5}`, "application/json"},
	} {
		for _, types := range [][]string{
			{"text/plain"}, {"application/xml"}, {"multipart/form-data; boundary=x"}, {"application/x-www-form-urlencoded"},
			nil, {"application/json; charset=latin1"}, {";;;"}, {"application/json; charset="},
		} {
			r := send(tc.token, tc.method, tc.path, tc.body, types...)
			if r.status != 415 || r.str("field") != "Content-Type" || !strings.Contains(r.str("message"), tc.takes) {
				t.Errorf("%s %s as %q: %d field %q, want 415 naming Content-Type and %s: %.300s", tc.method, tc.path, types, r.status, r.str("field"), tc.takes, r.raw)
			}
		}
		r := send(tc.token, tc.method, tc.path, tc.body, "application/json", "text/plain")
		if r.status != 400 || r.str("field") != "Content-Type" {
			t.Errorf("%s %s with two Content-Types: %d field %q, want 400 naming Content-Type: %.300s", tc.method, tc.path, r.status, r.str("field"), r.raw)
		}
	}
	// JSON's own type in any case, with or without charset=utf-8, is taken.
	b.must(201, send(dev, "POST", "/instances", `{"name":"db3","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, "application/json; charset=UTF-8"))
	b.must(200, send(dev, "PATCH", "/instances/db?namespace=a", `{"labels":{"a":"b"}}`, "application/merge-patch+json;charset=utf-8"))
	b.must(200, send(b.admin, "PUT", "/quotas/a", `{"instances":5}`, "Application/JSON"))
}

// TestBodyEncodingRefused: a body in a content coding the API does not
// decode (gzip, br) is a 415 naming Content-Encoding, with
// Accept-Encoding: identity (RFC 9110 15.5.16). A gzip body was a 400
// "is not a JSON document", and a plain body declared as br was read as
// if no coding had been named.
func TestBodyEncodingRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, coding := range []string{"gzip", "br", "deflate, identity", "x-unknown"} {
		h := http.Header{"Authorization": {"Bearer " + b.admin}, "Content-Type": {"application/json"}, "Content-Encoding": {coding}}
		r := b.doHeader(h, "PUT", "/quotas/a", strings.NewReader(`{"instances":3}`))
		if r.status != 415 || r.str("field") != "Content-Encoding" || r.header.Get("Accept-Encoding") != "identity" {
			t.Errorf("Content-Encoding %s: %d field %q Accept-Encoding %q, want 415 naming Content-Encoding: %.300s", coding, r.status, r.str("field"), r.header.Get("Accept-Encoding"), r.raw)
		}
	}
	b.must(404, b.do(b.admin, "GET", "/quotas/a", "")) // none was set
	h := http.Header{"Authorization": {"Bearer " + b.admin}, "Content-Type": {"application/json"}, "Content-Encoding": {"identity"}}
	b.must(200, b.doHeader(h, "PUT", "/quotas/a", strings.NewReader(`{"instances":3}`)))
}

// TestBodyWhereNoneTaken: a body sent to an operation that takes none (a
// delete, a relist, an abandon, a read) is a 400 saying so. It was
// ignored: DELETE with {"force":true} deleted as if nothing had been
// asked beyond it, and answered 202.
func TestBodyWhereNoneTaken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	b.must(201, b.do(dev, "POST", "/instances", `{"name":"db","namespace":"a","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`))
	for _, tc := range []struct{ token, method, path, body string }{
		{dev, "DELETE", "/instances/db?namespace=a", `{"force":true}`},
		{dev, "POST", "/instances/db/abandon?namespace=a", `{}`},
		{b.admin, "POST", "/brokers/bindery/relist", `{"full":true}`},
		{dev, "GET", "/instances", `{"namespace":"a"}`},
		{b.admin, "DELETE", "/quotas/a", `null`},
	} {
		r := b.do(tc.token, tc.method, tc.path, tc.body)
		if r.status != 400 || !strings.Contains(r.str("message"), "takes no body") {
			t.Errorf("%s %s with a body: %d, want 400 saying it takes no body: %.300s", tc.method, tc.path, r.status, r.raw)
		}
	}
	b.must(200, b.do(dev, "GET", "/instances/db?namespace=a", "")) // not deleted
	b.must(202, b.do(dev, "DELETE", "/instances/db?namespace=a", ""))
}

// TestBindingNamesItsOwnNamespace: a binding binds an instance of its own
// namespace and reads Secrets of its own namespace, so an instanceRef or
// an addKeysFrom Secret naming another namespace is a 400 naming the
// field, rather than a binding recorded as if it referred to team b's
// instance while it waits for one of that name in its own.
func TestBindingNamesItsOwnNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerBindery("bindery")
	dev := b.token("developer")
	for _, tc := range []struct{ spec, field string }{
		{`{"instanceRef":{"name":"db","namespace":"team-b"}}`, "spec.instanceRef.namespace"},
		{`{"instanceRef":{"name":"db"},"secretTransforms":[{"addKeysFrom":{"secretRef":{"name":"s","namespace":"team-b"}}}]}`,
			"spec.secretTransforms[0].addKeysFrom.secretRef.namespace"},
	} {
		if r := b.do(dev, "POST", "/bindings", `{"name":"app","namespace":"team-a","spec":`+tc.spec+`}`); r.status != 400 || r.str("field") != tc.field {
			t.Errorf("a binding of team-a with %s: %d %s, want 400 naming %s", tc.spec, r.status, r.raw, tc.field)
		}
	}
	b.must(201, b.do(dev, "POST", "/bindings", `{"name":"app","namespace":"team-a","spec":{"instanceRef":{"name":"db","namespace":"team-a"},`+
		`"secretTransforms":[{"addKeysFrom":{"secretRef":{"name":"s","namespace":"team-a"}}}]}}`))
}
