package broker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// IDs from the default catalogue.
const (
	serviceID = "3f1c8f8e-5a3b-4c5e-9a55-6f1d2c7b8a01"
	planSmall = "8b0a3e52-6d1f-4f0e-8c1e-2a4b9d7c6e10"
	planStd   = "2c6f7d1a-9e4b-4b8a-a3f2-5d8e1c0b7a22"
	planAsync = "6e9d4c3b-1a7f-4e2d-b8c5-9f0a3d6e5b33"
	user      = "platform"
	pass      = "s3cret-password"
	token     = "tok-0123456789"
)

// gate holds driver calls until the test opens it: it makes a real
// operation stay "in progress" for as long as a test needs, without
// changing what the driver does.
type gate struct {
	broker.Driver
	mu      sync.Mutex
	open    chan struct{}
	entered chan string
}

func newGate(d broker.Driver) *gate {
	return &gate{Driver: d, open: make(chan struct{}), entered: make(chan string, 100)}
}

func (g *gate) wait(ctx context.Context, verb string) error {
	g.entered <- verb
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *gate) Provision(ctx context.Context, r broker.InstanceRequest) (broker.ProvisionResult, error) {
	if err := g.wait(ctx, "provision"); err != nil {
		return broker.ProvisionResult{}, err
	}
	return g.Driver.Provision(ctx, r)
}

func (g *gate) Update(ctx context.Context, r broker.UpdateRequest) error {
	if err := g.wait(ctx, "update"); err != nil {
		return err
	}
	return g.Driver.Update(ctx, r)
}

func (g *gate) Bind(ctx context.Context, r broker.BindRequest) (broker.BindResult, error) {
	if err := g.wait(ctx, "bind"); err != nil {
		return broker.BindResult{}, err
	}
	return g.Driver.Bind(ctx, r)
}

type bundle struct {
	t       *testing.T
	url     string
	pool    *pgxpool.Pool
	dbURL   string
	keys    string
	broker  *broker.Broker
	logs    *syncbuf.Buffer
	stopped bool
}

type options struct {
	wrap        func(broker.Driver) broker.Driver
	timeout     time.Duration
	deadline    time.Duration
	maxAttempts int
	// reserved is the driver's WithReservedConnections (0: its default).
	reserved int
	dbURL    string // reuse another bundle's database (a "restart")
	keys     string
	// target is the driver's target cluster URL (default: the tests'
	// cluster, pgtest.AdminURL).
	target string
}

func setup(t *testing.T, opts ...func(*options)) *bundle {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	if o.dbURL == "" {
		o.dbURL = pgtest.New(t)
	}
	if o.keys == "" {
		o.keys = keyring.Generate()
	}
	pool, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrations.Up(ctx, pool, migrations.Broker); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var drvOpts []postgresql.Option
	if o.reserved > 0 {
		drvOpts = append(drvOpts, postgresql.WithReservedConnections(o.reserved))
	}
	if o.target == "" {
		o.target = pgtest.AdminURL(t)
	}
	drv, err := postgresql.New(ctx, o.target, log, drvOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Close)
	var d broker.Driver = drv
	if o.wrap != nil {
		d = o.wrap(drv)
	}
	cat, err := broker.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(o.keys)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(ctx, broker.Config{
		Pool: pool, Catalog: cat, Drivers: map[string]broker.Driver{"postgresql": d}, Keys: keys,
		Auth: broker.Auth{Username: user, Password: pass, Token: token}, Logger: log,
		OperationTimeout: o.timeout, OperationDeadline: o.deadline, MaxAttempts: o.maxAttempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	bb := &bundle{t: t, url: srv.URL, pool: pool, dbURL: o.dbURL, keys: o.keys, broker: b, logs: logs}
	t.Cleanup(func() {
		srv.Close()
		bb.stop()
	})
	return bb
}

func (b *bundle) stop() {
	if b.stopped {
		return
	}
	b.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.broker.Stop(ctx)
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r response) str(key string) string { s, _ := r.body[key].(string); return s }

// do sends an authenticated OSB 2.17 request.
func (b *bundle) do(method, path string, body any, headers ...string) response {
	b.t.Helper()
	r, err := b.send(context.Background(), method, path, body, headers...)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

// send is do for a request that may not be answered in time, from any
// goroutine: it returns the error instead of failing the test.
func (b *bundle) send(ctx context.Context, method, path string, body any, headers ...string) (response, error) {
	var rdr io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return response{}, err
		}
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, rdr)
	if err != nil {
		return response{}, err
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			return response{}, fmt.Errorf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	return out, nil
}

func (b *bundle) expect(r response, status int) response {
	b.t.Helper()
	if r.status != status {
		b.t.Fatalf("status %d, want %d; body %s", r.status, status, r.raw)
	}
	return r
}

func randomID(prefix string) string {
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	return prefix + "-" + hex.EncodeToString(raw)
}

func provisionBody(plan string, params map[string]any) map[string]any {
	body := map[string]any{
		"service_id": serviceID, "plan_id": plan, "organization_guid": "org-1", "space_guid": "space-1",
		"context": map[string]any{"platform": "kubernetes", "namespace": "default"},
	}
	if params != nil {
		body["parameters"] = params
	}
	return body
}

func bindBody() map[string]any {
	return map[string]any{"service_id": serviceID, "plan_id": planSmall, "bind_resource": map[string]any{"app_guid": "app-1"}}
}

func q(plan string) string { return "?service_id=" + serviceID + "&plan_id=" + plan }

// waitFor polls last_operation until the operation is no longer in
// progress and returns the final response.
func (b *bundle) waitFor(path, operation string) response {
	b.t.Helper()
	var r response
	eventually.Succeeds(b.t, 60*time.Second, func(context.Context) error {
		r = b.do("GET", path+"/last_operation?operation="+operation, nil)
		if r.status == http.StatusOK && r.str("state") == "in progress" {
			return fmt.Errorf("operation %s still in progress", operation)
		}
		return nil
	})
	return r
}

// golden compares a response body with testdata/NAME.json.
func golden(t *testing.T, name string, raw []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(v, "", "  ")
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// connect opens a connection with binding credentials.
func connect(t *testing.T, uri string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), uri)
	if err != nil {
		t.Fatalf("connect with binding credentials: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func identityHeader(platform, js string) string {
	return platform + " " + base64.StdEncoding.EncodeToString([]byte(js))
}
