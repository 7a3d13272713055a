package catalog

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// freezingProxy forwards TCP connections to target until frozen; then
// it forwards nothing more, in either direction, and closes nothing: a
// peer gone silent, as a database's old primary is after a failover.
type freezingProxy struct {
	l      net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{l: l}
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p
}

// pipe copies from src to dst while the proxy is not frozen.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.frozen.Load() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestClaimerProbeOfASilentSession: a probe of a claims session whose
// peer has gone silent (a failover's old primary: nothing answers, and
// nothing closes the connection) fails within the claimer's timeout, and
// the claimer no longer treats its shards as its own, where another
// replica, on the new primary, may have taken them. The probe waited
// for as long as TCP did (minutes), every Claim of an owned shard still
// answering yes.
func TestClaimerProbeOfASilentSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := migrations.Up(ctx, pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	cfg := pool.Config().ConnConfig.Copy()
	c := &Claimer{cfg: cfg, linger: legacyLinger, timeout: 500 * time.Millisecond}
	// Closed after the proxy's connections are, which ends a probe that
	// still waits.
	t.Cleanup(c.Close)
	proxy := newFreezingProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	addr := proxy.l.Addr().(*net.TCPAddr)
	cfg.Host, cfg.Port = addr.IP.String(), uint16(addr.Port)
	if _, ok, err := c.Claim(ctx, "instance/1"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	proxy.frozen.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := c.Probe(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a probe over a silent session succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a probe over a silent session still waits after 10 s")
	}
	c.mu.Lock()
	st := c.shards[ClaimShard("instance/1")]
	c.mu.Unlock()
	if st == shardOwned {
		t.Error("after its probe failed, the claimer still owns the shard")
	}
}
