package serve

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
)

// revealRate is how many bearer tokens SplitMetrics checks a second.
const revealRate = 5

// Bearer is the request's bearer token. headers counts its Authorization
// headers: a request with more than one has no token (which to take would
// be a guess, RFC 9110 11.6.2).
func Bearer(r *http.Request) (token string, headers int, ok bool) {
	hs := r.Header.Values("Authorization")
	if len(hs) != 1 || len(hs[0]) < 8 || !strings.EqualFold(hs[0][:7], "bearer ") {
		return "", len(hs), false
	}
	return strings.TrimSpace(hs[0][7:]), 1, true
}

// SplitMetrics serves reg's metrics to every scrape, and private's beside
// them only to a scrape whose bearer token reveal accepts. It is /metrics
// of a server whose metrics name namespaces (their usage, their brokers)
// on an address that any tenant reaches: a team may not learn thus which
// other namespaces exist or what they hold. A scrape without such a token
// gets the rest rather than a refusal.
//
// reveal may read a database: tokens are checked at most revealRate times
// a second (a scraper asks every few seconds), and a scrape past that gets
// the rest, so that a flood of scrapes with made-up tokens costs nothing
// but its own requests.
func SplitMetrics(reg *prometheus.Registry, private prometheus.Gatherer, reveal func(ctx context.Context, token string) bool) http.Handler {
	public := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	all := promhttp.HandlerFor(prometheus.Gatherers{reg, private}, promhttp.HandlerOpts{Registry: reg})
	checks := rate.NewLimiter(revealRate, 2*revealRate)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token, _, ok := Bearer(r); ok && checks.Allow() && reveal(r.Context(), token) {
			all.ServeHTTP(w, r)
			return
		}
		public.ServeHTTP(w, r)
	})
}
