package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/share"
)

// TestTokenShareInTheUI: a signed-in browser takes from its token's share,
// the one the REST API takes from. With the token's slots held and its
// waiting line full (as its REST requests would hold them), a page is
// refused at once with 429 and Retry-After, while another token's session
// is served, and a marketplace icon waits for its turn instead (a page's
// icons come all at once); and a token may hold StreamsPerSlot times its
// slots of live pages open, the next refused until one of them closes.
func TestTokenShareInTheUI(t *testing.T) {
	t.Parallel()
	const slots = 2
	ctx := context.Background()
	b := setup(t, setupOptions{share: slots})
	icon := "/services/" + b.fakeBroker(t, "fake", osbtest.DefaultCatalog()).Spec.ClusterServiceClassRef.Name + "/icon"
	dev, viewer := b.client(t, catalog.RoleDeveloper), b.client(t, catalog.RoleViewer)
	tok, err := b.store.LookupToken(ctx, b.tokens[catalog.RoleDeveloper])
	if err != nil {
		t.Fatal(err)
	}
	var held []func()
	for range slots {
		held = append(held, b.share.Acquire(ctx, tok.ID))
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range share.WaitingPerSlot * slots {
		wg.Go(func() {
			if release := b.share.Acquire(waitCtx, tok.ID); release != nil {
				release()
			}
		})
	}
	b.waitShare(t, "waiting", share.WaitingPerSlot*slots)
	refused := func(res *http.Response, what string) {
		t.Helper()
		page := body(t, res)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || !strings.Contains(page, "the most one token may have") {
			t.Errorf("%s: %d, Retry-After %q; want 429 saying why, with Retry-After: 1", what, res.StatusCode, res.Header.Get("Retry-After"))
		}
	}
	refused(dev.get("/instances"), "a page of a token with its share served and waiting")
	if res := viewer.get("/instances"); res.StatusCode != http.StatusOK {
		t.Errorf("another token's page meanwhile: %d", res.StatusCode)
	}
	iconServed := make(chan int, 1)
	go func() {
		res := dev.get(icon)
		res.Body.Close()
		iconServed <- res.StatusCode
	}()
	b.waitShare(t, "waiting", share.WaitingPerSlot*slots+1)
	stopWaiting()
	wg.Wait()
	held[0]()
	if code := <-iconServed; code != http.StatusOK {
		t.Errorf("an icon that waited for its turn: %d", code)
	}
	held[1]()
	if res := dev.get("/instances"); res.StatusCode != http.StatusOK {
		t.Errorf("the token's page once its requests ended: %d", res.StatusCode)
	}

	var closers []context.CancelFunc
	for range share.StreamsPerSlot * slots {
		_, closed := dev.openStream("/live/instances")
		closers = append(closers, closed)
	}
	b.waitShare(t, "streaming", share.StreamsPerSlot*slots)
	refused(dev.get("/live/instances"), "a live page beyond the token's streams")
	viewer.openStream("/live/instances")
	if res := dev.get("/instances"); res.StatusCode != http.StatusOK {
		t.Errorf("a page of the token with its streams open: %d", res.StatusCode)
	}
	closers[0]()
	b.waitShare(t, "streaming", share.StreamsPerSlot*slots-1+1) // the other token's too
	dev.openStream("/live/instances")
}

// openStream opens an event stream as c, and returns it and what closes
// it.
func (c *client) openStream(path string) (*http.Response, context.CancelFunc) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.http.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		c.t.Fatalf("stream %s: %v", path, err)
	}
	return res, func() { cancel(); res.Body.Close() }
}

// waitShare waits until the share's gauge of state is n.
func (b *bundle) waitShare(t *testing.T, state string, n int) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.share)
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "bindery_api_token_requests" && m.GetLabel()[0].GetValue() == state {
					if v := m.GetGauge().GetValue(); v != float64(n) {
						return fmt.Errorf("%s %v, want %d", state, v, n)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("no %s gauge", state)
	})
}
