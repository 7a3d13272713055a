package restapi_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/restapi"
)

// TestTokenShare: one token has at most DefaultMaxInflightPerToken
// requests served at once and four times as many waiting, in order; past that a
// request is refused with 429 at once, while another token is served as
// usual; and the token's record goes with its last request. The requests
// that hold the slots are real ones, each stalled in the middle of its
// body.
func TestTokenShare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := b.store.CreateToken(context.Background(), catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	const share = restapi.DefaultMaxInflightPerToken
	served := stall(t, b, share)
	b.waitFor(share, 0)
	first := make(chan response, 1)
	go func() { first <- b.do(b.admin, "GET", "/namespaces", nil) }()
	b.waitFor(share, 1)
	if r := b.do(other, "GET", "/namespaces", nil); r.status != 200 {
		t.Errorf("another token while the first has its share served: %d %s", r.status, r.raw)
	}
	waiting := stall(t, b, 4*share-1)
	b.waitFor(share, 4*share)
	if r := b.do(b.admin, "GET", "/namespaces", nil); r.status != 429 || r.str("error") != "too_many_requests" || r.header.Get("Retry-After") != "1" {
		t.Errorf("a request of the token beyond its share: %d %s %v, want 429 too_many_requests with Retry-After: 1", r.status, r.raw, r.header)
	}
	// A slot given back goes to the request that waited longest.
	served[0].Close()
	select {
	case r := <-first:
		if r.status != 200 {
			t.Errorf("the first request to wait, once a slot was free: %d %s", r.status, r.raw)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first request to wait was not served once a slot was free")
	}
	for _, c := range append(served, waiting...) {
		c.Close()
	}
	b.waitFor(0, 0)
	if r := b.do(b.admin, "GET", "/namespaces", nil); r.status != 200 {
		t.Errorf("the token once its requests ended: %d %s", r.status, r.raw)
	}
}

// stall starts n requests with the admin token that stay in the server
// until their connections close: each sends one byte of a body of 1,000.
func stall(t *testing.T, b *bundle, n int) []net.Conn {
	t.Helper()
	u, _ := url.Parse(b.url)
	var conns []net.Conn
	for range n {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /api/v1/instances HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", u.Host, b.admin)
		conns = append(conns, conn)
	}
	return conns
}

// waitFor waits until the server has served requests in flight and
// waiting ones, by its metrics.
func (b *bundle) waitFor(served, waiting int) {
	b.t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.api.Metrics())
	eventually.Succeeds(b.t, 10*time.Second, func(context.Context) error {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "bindery_api_token_requests" {
					got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
		if got["in_flight"] != float64(served) || got["waiting"] != float64(waiting) {
			return fmt.Errorf("requests %v, want %d in flight and %d waiting", got, served, waiting)
		}
		return nil
	})
}
