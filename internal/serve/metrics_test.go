package serve_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/internal/serve"
)

// TestSplitMetrics: the private series go only to a scrape whose token
// reveal accepts, and a flood of scrapes with made-up tokens is not a
// flood of token checks (each may be a database read).
func TestSplitMetrics(t *testing.T) {
	reg, private := prometheus.NewRegistry(), prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "everyone_sees"}))
	private.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "namespaces_named"}))
	var checks atomic.Int64
	h := serve.SplitMetrics(reg, private, func(_ context.Context, token string) bool {
		checks.Add(1)
		return token == "good"
	})
	scrape := func(token string) string {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Body.String()
	}
	for _, token := range []string{"", "bad"} {
		if got := scrape(token); !strings.Contains(got, "everyone_sees") || strings.Contains(got, "namespaces_named") {
			t.Errorf("scrape with token %q:\n%s", token, got)
		}
	}
	if got := scrape("good"); !strings.Contains(got, "everyone_sees") || !strings.Contains(got, "namespaces_named") {
		t.Errorf("scrape with the good token:\n%s", got)
	}
	checks.Store(0)
	for range 500 {
		scrape("made-up")
	}
	if n := checks.Load(); n > 20 {
		t.Errorf("500 scrapes with made-up tokens checked %d tokens; want them bounded (at most 20 in the test's time)", n)
	}
}
