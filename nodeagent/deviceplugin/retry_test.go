package deviceplugin

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/internal/backofftest"
)

// TestRegisterRetry: the first retry comes at once, none waits longer than
// a second (the bound on finding a kubelet that came back without an
// event), and the capped waits are jittered.
func TestRegisterRetry(t *testing.T) {
	t.Parallel()
	backofftest.Check(t, registerRetry, 10*time.Millisecond, time.Second)
}

// TestRetryStartsOver: failures in a row wait up to the cap; a new kubelet
// or a registration that succeeds starts the waits over from the first.
func TestRetryStartsOver(t *testing.T) {
	t.Parallel()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := &plugin{resource: "example.com/foo", kubelet: filepath.Join(t.TempDir(), "kubelet.sock"), log: slog.New(slog.DiscardHandler), metrics: m,
		socketEvent: make(chan struct{}, 1), kubeletEvent: make(chan struct{}, 1)}
	ctx := context.Background()
	l := &loop{p: p, backoff: registerRetry}
	failMany := func() {
		for range 20 {
			l.fail(ctx, "register with the kubelet", errors.New("connection refused"))
		}
		if l.backoff.Duration != registerRetry.Cap || !l.failing || l.retry == nil {
			t.Fatalf("after failures: next wait from %s, failing %v, retry %v; want the cap", l.backoff.Duration, l.failing, l.retry)
		}
	}

	failMany()
	l.retry = nil // the retry is not what wakes the loop here
	signal(p.kubeletEvent)
	if !l.await(ctx, nil) || l.backoff != registerRetry || l.retry != nil {
		t.Errorf("after a new kubelet: next wait from %s, retry %v; want the first at once", l.backoff.Duration, l.retry)
	}

	failMany()
	l.reg = &registration{start: time.Now()} // at the kubelet.sock there is: none
	l.registerDone(ctx, nil)
	if l.backoff != registerRetry || l.failing || !p.registered.Load() {
		t.Errorf("after a registration: next wait from %s, failing %v, registered %v; want the first, not failing, registered",
			l.backoff.Duration, l.failing, p.registered.Load())
	}
}
