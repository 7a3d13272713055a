package restapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/share"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/restapi"
)

// TestRunMountsAndStops runs the catalog server as `bindery serve catalog`
// does, with a route mounted beside the API: both are served on the one
// listener, and Run returns once its context ends.
func TestRunMountsAndStops(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	store := catalog.NewStore(pool, keys, log)
	admin, err := store.CreateToken(ctx, catalog.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	o := restapi.Options{RelistCheck: time.Second}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := o.Config(store, log)
	cfg.Mount = append(cfg.Mount, func(e *echo.Echo, _ *share.Share) {
		e.GET("/ui/", func(c echo.Context) error { return c.String(http.StatusOK, "the web UI\n") })
	})
	l, err := serve.Listen("--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- restapi.Run(runCtx, cfg, l) }()
	base := "http://" + l.Addr().String()

	get := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/api/v1/brokers", admin); code != http.StatusOK || !strings.Contains(body, "items") {
		t.Errorf("GET /api/v1/brokers: %d %s", code, body)
	}
	if code, _ := get("/api/v1/brokers", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/brokers without a token: %d, want 401", code)
	}
	if code, body := get("/ui/", ""); code != http.StatusOK || body != "the web UI\n" {
		t.Errorf("GET /ui/ (mounted): %d %q", code, body)
	}

	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run after its context ended: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestOptionsValidate reports a bad relist interval and a negative share
// of requests per token.
func TestOptionsValidate(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		o := restapi.Options{RelistCheck: d}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--relist-check-interval") {
			t.Errorf("RelistCheck %s: %v", d, err)
		}
	}
	o := restapi.Options{RelistCheck: time.Second, MaxInflightPerToken: -1}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--api-max-inflight-per-token") {
		t.Errorf("MaxInflightPerToken -1: %v", err)
	}
}
