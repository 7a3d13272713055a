package web_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// cutter is a TCP proxy in front of the server whose connections the test
// can cut: every open one dropped, new ones closed at once, until it is
// mended. A network that fails, for the browser's event streams.
type cutter struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	open   map[net.Conn]struct{}
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{l: l, target: target, open: map[net.Conn]struct{}{}}
	go c.serve()
	t.Cleanup(func() {
		_ = l.Close()
		c.drop()
	})
	return c
}

func (c *cutter) url() string { return "http://" + c.l.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.l.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		if c.cut {
			c.mu.Unlock()
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			c.mu.Unlock()
			_ = in.Close()
			continue
		}
		c.open[in], c.open[out] = struct{}{}, struct{}{}
		c.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

// drop closes every open connection.
func (c *cutter) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.open {
		_ = conn.Close()
		delete(c.open, conn)
	}
}

func (c *cutter) set(cut bool) {
	c.mu.Lock()
	c.cut = cut
	c.mu.Unlock()
	if cut {
		c.drop()
	}
}

// TestBrowserReconnect: when an open page's live stream is lost, the page
// says "Reconnecting…" within 2 seconds; when the connection is back it
// shows what changed meanwhile, without a reload, and says nothing more.
func TestBrowserReconnect(t *testing.T) {
	b := setup(t, setupOptions{})
	plan := b.fakeBroker(t, "fake", osbtest.GenerateCatalog(1, 1))
	in := b.instance(t, plan, "default", "watched-db")
	u, _ := url.Parse(b.url)
	net := newCutter(t, u.Host)

	br := newBrowser(t)
	// The cut connections and the refused reconnections are logged by
	// the browser: they are the point.
	// (htmx logs each lost stream's error event as "[object Event]".)
	br.allow("ERR_CONNECTION", "ERR_EMPTY_RESPONSE", "ERR_INCOMPLETE_CHUNKED_ENCODING", "net::", `"[object Event]"`)
	q := chromedp.ByQuery
	br.run(chromedp.Navigate(net.url()+"/login"), chromedp.WaitVisible("#token", q),
		chromedp.SendKeys("#token", b.tokens["viewer"], q), chromedp.Submit("#token", q), chromedp.WaitVisible("ul.cards", q))
	br.run(chromedp.Navigate(net.url()+"/instances/"+in.ID), chromedp.WaitVisible("#instance-ready", q),
		chromedp.Evaluate(`window.stillHere = true`, nil))
	// app.js marks a stream open when the browser says it is.
	br.run(chromedp.WaitVisible(`[sse-connect][data-live="open"]`, q))
	created := br.text(".meta time[data-ago]")
	if got := br.text("#live-status"); got != "" {
		t.Fatalf("before the cut the page says %q", got)
	}

	net.set(true)
	start := time.Now()
	br.waitText("#live-status", "Reconnecting", 2*time.Second)
	t.Logf("reconnecting shown %v after the cut", time.Since(start).Round(time.Millisecond))
	br.axe("reconnecting")
	if _, err := b.store.UpdateInstanceStatus(context.Background(), in.ID, func(in *catalog.Instance) error {
		in.Status.LastError = "changed-while-cut"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a reconnection or two refused
	if got := br.text("#instance-status"); got == "" || strings.Contains(got, "changed-while-cut") {
		t.Fatalf("while cut the page shows %q", got)
	}

	net.set(false)
	start = time.Now()
	br.waitText("#instance-status", "changed-while-cut", 5*time.Second)
	t.Logf("fresh state shown %v after the connection came back", time.Since(start).Round(time.Millisecond))
	br.waitGone("#live-status", 2*time.Second)
	br.stillHere()
	// "created …" keeps counting, without a reload (every 5 s).
	deadline := time.Now().Add(6 * time.Second)
	for later := br.text(".meta time[data-ago]"); later == created || !strings.HasSuffix(later, " s ago"); later = br.text(".meta time[data-ago]") {
		if time.Now().After(deadline) {
			t.Fatalf("created %q at first, %q seconds later", created, later)
		}
		time.Sleep(100 * time.Millisecond)
	}
	br.axe("reconnected")
}

// waitGone waits until the element's text is empty.
func (b *browser) waitGone(sel string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b.text(sel) == "" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s still says %q", sel, b.text(sel))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
