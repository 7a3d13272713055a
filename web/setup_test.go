package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/share"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/web"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	brokerUser = "platform"
	brokerPass = "broker-secret-password"
)

type bundle struct {
	url    string
	store  *catalog.Store
	logs   *syncbuf.Buffer
	tokens map[string]string
	// brokerURL is a real Bindery broker on its own schema.
	brokerURL string
	// share bounds each token's requests.
	share *share.Share
}

type setupOptions struct {
	broker bool
	engine bool
	// wrap, when set, wraps the server's handler (to time it).
	wrap func(http.Handler) http.Handler
	// share is each token's requests served at once (0: the default).
	share int
}

// setup serves the web UI on a fresh database, with the engine and a
// real Bindery broker beside it when asked.
func setup(t testing.TB, o setupOptions) *bundle {
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
	e := serve.NewEcho(log, prometheus.NewRegistry())
	if o.share == 0 {
		o.share = share.DefaultMax
	}
	sh := share.New(o.share)
	web.Register(e, store, log, sh)
	var h http.Handler = e
	if o.wrap != nil {
		h = o.wrap(e)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := &bundle{url: srv.URL, store: store, logs: logs, tokens: map[string]string{}, share: sh}
	for _, r := range []string{catalog.RoleViewer, catalog.RoleDeveloper, catalog.RoleAdmin} {
		if b.tokens[r], err = store.CreateToken(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if o.broker {
		b.brokerURL = brokertest.Start(t, pool, keys, brokerUser, brokerPass)
	}
	if o.engine {
		eng, err := controller.New(controller.Config{Store: store, Logger: log, Registry: prometheus.NewRegistry(),
			BrokerTimeout: 30 * time.Second, Workers: 4, Resync: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return b
}
