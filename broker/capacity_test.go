package broker_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// stallProxy forwards TCP connections to a server until it is stalled:
// then it holds every byte either side sends, as a server that stopped
// answering (or a network that drops packets) would, closing nothing.
// Resuming passes on what it held.
type stallProxy struct {
	ln       net.Listener
	upstream string
	// held counts the bytes that arrived while the proxy was stalled.
	held   atomic.Int64
	mu     sync.Mutex
	moving chan struct{} // closed while the proxy forwards
	done   chan struct{} // closed by close
	conns  []net.Conn
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, upstream: upstream, moving: make(chan struct{}), done: make(chan struct{})}
	close(p.moving)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *stallProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go p.copy(up, c)
	p.copy(c, up)
}

func (p *stallProxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(n) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the proxy is stalled, counting the n bytes it holds;
// it returns false once the proxy is closed.
func (p *stallProxy) pass(n int) bool {
	p.mu.Lock()
	moving := p.moving
	p.mu.Unlock()
	select {
	case <-moving:
		return true
	default:
	}
	p.held.Add(int64(n))
	select {
	case <-moving:
		return true
	case <-p.done:
		return false
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.moving = make(chan struct{})
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.moving)
}

func (p *stallProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestCapacityCheckBounded: when the target cluster stops answering, a
// provision or plan change is still answered, the capacity check given
// up as "cannot tell" after a short time, and the check does not hold the
// instance's record locked while it waits.
func TestCapacityCheckBounded(t *testing.T) {
	t.Parallel()
	admin, err := url.Parse(pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newStallProxy(t, admin.Host)
	via := *admin
	via.Host = p.ln.Addr().String()
	b := setup(t, func(o *options) { o.target = via.String() })
	t.Cleanup(p.close) // before the broker's own cleanup: nothing waits on the proxy then
	ctx := context.Background()
	id := randomID("bounded")
	path := "/v2/service_instances/" + id
	b.expect(b.do("PUT", path, provisionBody(planSmall, nil)), http.StatusCreated)

	p.stall()
	start := time.Now()
	type answer struct {
		r   response
		err error
	}
	patched := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := b.send(ctx, "PATCH", path+"?accepts_incomplete=true", map[string]any{"service_id": serviceID, "plan_id": planStd})
		patched <- answer{r, err}
	}()
	eventually.Succeeds(t, 10*time.Second, func(context.Context) error {
		if p.held.Load() == 0 {
			return errors.New("no capacity check has reached the target yet")
		}
		return nil
	})
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1 FROM broker.instances WHERE id = $1 FOR UPDATE NOWAIT`, id)
		return err
	})
	if err != nil {
		t.Errorf("the instance's record while the capacity check waits on the target: %v", err)
	}
	a := <-patched
	if a.err != nil || a.r.status != http.StatusAccepted {
		t.Fatalf("plan change while the target does not answer: %d %s %v", a.r.status, a.r.raw, a.err)
	}
	updated := a.r.str("operation")

	id2 := randomID("bounded")
	path2 := "/v2/service_instances/" + id2
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r, err := b.send(pctx, "PUT", path2+"?accepts_incomplete=true", provisionBody(planSmall, nil))
	if err != nil || r.status != http.StatusAccepted {
		t.Fatalf("provision while the target does not answer: %d %s %v", r.status, r.raw, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a plan change and a provision took %s while the target did not answer", took)
	}
	if !strings.Contains(b.logs.String(), "cannot check capacity") {
		t.Error("the capacity checks given up are not logged")
	}

	p.resume()
	for _, op := range []struct{ path, id string }{{path, updated}, {path2, r.str("operation")}} {
		if lo := b.waitFor(op.path, op.id); lo.str("state") != "succeeded" {
			t.Errorf("%s: operation ended %s", op.path, lo.raw)
		}
	}
	b.expect(b.do("DELETE", path+q(planStd), nil), http.StatusOK)
	b.expect(b.do("DELETE", path2+q(planSmall), nil), http.StatusOK)
	assertGone(t, id)
	assertGone(t, id2)
}
