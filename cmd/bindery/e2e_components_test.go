package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// api is a small REST client for the catalog.
type api struct {
	t     *testing.T
	base  string
	token string
}

func (a api) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	return doJSON(a.t, method, a.base+"/api/v1"+path, body, func(req *http.Request) {
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
	})
}

func (a api) must(status int, method, path string, body any) map[string]any {
	a.t.Helper()
	return mustStatus(a.t, status, method, path, body, a.do)
}

// waitReady polls an object until its Ready condition is True.
func (a api) waitReady(path string) map[string]any {
	a.t.Helper()
	var last map[string]any
	eventually.Succeeds(a.t, 60*time.Second, func(context.Context) error {
		_, last = a.do("GET", path, nil)
		status, _ := last["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("%s never became Ready: %v", path, last)
	})
	return last
}

func (a api) waitGone(path string) {
	a.t.Helper()
	eventually.Succeeds(a.t, 60*time.Second, func(context.Context) error {
		if status, _ := a.do("GET", path, nil); status != http.StatusNotFound {
			return fmt.Errorf("%s was never removed (%d)", path, status)
		}
		return nil
	})
}

// TestComponents runs the broker, the catalog and the engine as three
// processes on one database, as outside checks do: a token from `token
// create`, the broker registered through the REST API, an instance and a
// binding that become Ready, and deleting them drops the role and the
// database.
func TestComponents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, key := pgtest.New(t), keyring.Generate()
	env := brokerEnv(dbURL, key)

	tok := start(t, []string{"DATABASE_URL=" + dbURL}, "token", "create", "--role", "admin")
	if err := tok.wait(t); err != nil {
		t.Fatalf("token create: %v\n%s", err, tok.stderr.String())
	}
	token := strings.TrimSpace(tok.stdout.String())
	if !strings.HasPrefix(token, "bdy_") || strings.Contains(token, "\n") {
		t.Fatalf("token create printed %q", tok.stdout.String())
	}

	brokerProc := start(t, env, "serve", "broker", "--listen", "127.0.0.1:0")
	brokerURL := serving(t, brokerProc, "serving the OSB API")
	catalogProc := start(t, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	catalogURL := serving(t, catalogProc, "serving the REST API")
	engine := start(t, env, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	_ = engine

	a := api{t: t, base: catalogURL, token: token}
	b := a.must(201, "POST", "/brokers", map[string]any{"name": "bindery", "url": brokerURL,
		"auth": map[string]any{"basic": map[string]any{"username": "osb-user", "password": "osb-password-1234"}}})
	if b["status"].(map[string]any)["servicePlanCount"] != float64(3) {
		t.Fatalf("registered broker: %v", b["status"])
	}
	in := a.must(201, "POST", "/instances", map[string]any{"name": "db", "namespace": "demo",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}})
	id := in["id"].(string)
	a.waitReady("/instances/" + id)
	bnd := a.must(201, "POST", "/bindings", map[string]any{"name": "app", "namespace": "demo",
		"spec": map[string]any{"instanceRef": map[string]any{"name": "db"}}})
	bid := bnd["id"].(string)
	a.waitReady("/bindings/" + bid)
	creds := a.must(200, "GET", "/bindings/"+bid+"/credentials", nil)
	// What the API does not take is answered by the API, as JSON, not by
	// the web UI mounted beside it.
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"PATCH", "/bindings/" + bid, 405, "method_not_allowed", "DELETE, GET"},
		{"PUT", "/instances/" + id, 405, "method_not_allowed", "DELETE, GET, PATCH"},
		{"POST", "/bindings/" + bid + "/credentials", 405, "method_not_allowed", "GET"},
		{"GET", "/nosuch", 404, "not_found", ""},
		{"DELETE", "", 404, "not_found", ""},
	} {
		req, _ := http.NewRequest(tc.method, catalogURL+"/api/v1"+tc.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		derr := json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != tc.status || derr != nil || body["error"] != tc.code || res.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %v (%v), Allow %q; want %d %s, Allow %q", tc.method, tc.path, res.StatusCode, body, derr, res.Header.Get("Allow"), tc.status, tc.code, tc.allow)
		}
	}
	conn, err := pgx.Connect(ctx, creds["uri"].(string))
	if err != nil {
		t.Fatalf("connect with the binding's credentials: %v", err)
	}
	conn.Close(ctx)

	a.must(202, "DELETE", "/bindings/"+bid, nil)
	a.waitGone("/bindings/" + bid)
	a.must(202, "DELETE", "/instances/"+id, nil)
	a.waitGone("/instances/" + id)

	admin, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	n := postgresql.InstanceNames(in["spec"].(map[string]any)["externalID"].(string))
	var dbs, roles int
	_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, n.Database).Scan(&dbs)
	_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`, []string{n.Owner, creds["username"].(string)}).Scan(&roles)
	if dbs != 0 || roles != 0 {
		t.Fatalf("left behind: %d databases, %d roles", dbs, roles)
	}
	for _, p := range []*proc{brokerProc, catalogProc, engine} {
		if strings.Contains(p.stderr.String(), creds["password"].(string)) || strings.Contains(p.stderr.String(), token) {
			t.Error("a credential is in a log")
		}
	}
}
