package restapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/openapi/openapitest"
	"github.com/bindery-dev/bindery/restapi"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	brokerUser = "platform"
	brokerPass = "broker-secret-password"
)

type bundle struct {
	t      testing.TB
	url    string
	store  *catalog.Store
	api    *restapi.Server
	pool   *pgxpool.Pool
	admin  string
	client *http.Client
	// brokerURL is a real Bindery broker over HTTP, on its own database.
	brokerURL string
	logs      *syncbuf.Buffer
}

// setup starts the catalog's REST API on a fresh database, with a real
// Bindery broker beside it for registration.
func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, pool, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	store := catalog.NewStore(pool, keys, log)
	api := restapi.New(store, log)
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go api.Run(runCtx)
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	admin, err := store.CreateToken(ctx, catalog.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	// Every request and response of the suite is checked against
	// openapi/openapi.yaml.
	v := openapitest.Transport(t, srv.Client().Transport)
	t.Cleanup(func() {
		if v.Count() == 0 {
			t.Error("no exchange was validated against the OpenAPI description")
		}
	})
	b := &bundle{t: t, url: srv.URL + "/api/v1", store: store, api: api, pool: pool, admin: admin, client: &http.Client{Transport: v}, logs: logs}
	b.brokerURL = brokertest.Start(t, pool, keys, brokerUser, brokerPass)
	return b
}

type response struct {
	status int
	body   map[string]any
	raw    []byte
	header http.Header
}

func (r response) str(path ...string) string {
	var v any = r.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

func (r response) items() []map[string]any {
	list, _ := r.body["items"].([]any)
	out := make([]map[string]any, len(list))
	for i, it := range list {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// do sends a request with a token ("" for none).
func (b *bundle) do(token, method, path string, body any) response {
	b.t.Helper()
	var rdr io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(v)
	default:
		raw, _ := json.Marshal(v)
		rdr = bytes.NewReader(raw)
	}
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	if rdr != nil {
		header.Set("Content-Type", "application/json")
	}
	return b.doHeader(header, method, path, rdr)
}

// doHeader sends a request with exactly the header given.
func (b *bundle) doHeader(header http.Header, method, path string, body io.Reader) response {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.url+path, body)
	req.Header = header
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, raw: raw, header: res.Header}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out.body)
	}
	return out
}

func (b *bundle) must(status int, r response) response {
	b.t.Helper()
	if r.status != status {
		if r.status == 500 {
			b.t.Logf("server log:\n%s", b.logs.String())
		}
		b.t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

func (b *bundle) token(role string) string {
	b.t.Helper()
	tok, err := b.store.CreateToken(context.Background(), role)
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

// registerBindery registers the real broker and returns the broker object.
func (b *bundle) registerBindery(name string) response {
	b.t.Helper()
	return b.must(201, b.do(b.admin, "POST", "/brokers", map[string]any{
		"name": name, "url": b.brokerURL,
		"auth": map[string]any{"basic": map[string]any{"username": brokerUser, "password": brokerPass}},
	}))
}
