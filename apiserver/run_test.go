package apiserver

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunJoinsItsLoops: Run returns only once the loops it started (the
// watch hub's, which holds a connection of its own, the pruner, and here
// one that takes its time to stop) have ended.
func TestRunJoinsItsLoops(t *testing.T) {
	t.Parallel()
	store := NewTestStore(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Listener: l, DataDir: t.TempDir()}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(store, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.New()
	if err != nil {
		t.Fatal(err)
	}
	var slowEnded atomic.Bool
	s.loops = append(s.loops, func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(time.Second)
		slowEnded.Store(true)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.hub.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the hub did not start")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	select {
	case <-s.hub.done:
	default:
		t.Error("Run returned while the hub still ran")
	}
	if !slowEnded.Load() {
		t.Error("Run returned while a loop still ran")
	}
}
