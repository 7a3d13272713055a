package catalog

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTurns: parties waiting for slots take them in turns, each party's in
// the order asked; a waiter that gives up leaves the line, and a slot
// freed with no one waiting is free again.
func TestTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newTurns(1)
	if err := tr.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	waiters := 0
	wait := func(ctx context.Context, party, name string) <-chan error {
		errc := make(chan error, 1)
		go func() {
			err := tr.acquire(ctx, party)
			if err == nil {
				got <- name
			}
			errc <- err
		}()
		waiters++
		waitWaiting(t, tr, waiters)
		return errc
	}
	for _, w := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}} {
		wait(ctx, w[0], w[1])
	}
	gaveUp, cancel := context.WithCancel(ctx)
	errc := wait(gaveUp, "c", "c0")
	wait(ctx, "c", "c1")
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a waiter that gave up got a slot")
	}
	var order []string
	for range 5 {
		tr.release()
		order = append(order, <-got)
	}
	if got, want := strings.Join(order, " "), "a1 b1 c1 a2 a3"; got != want {
		t.Errorf("slots went to %s, want %s", got, want)
	}
	tr.release()
	if tr.free != 1 || len(tr.line) != 0 || len(tr.waiting) != 0 {
		t.Errorf("after every slot came back: free %d, line %v, waiting %v", tr.free, tr.line, tr.waiting)
	}
}

// waitWaiting waits until n waiters are in line.
func waitWaiting(t *testing.T, tr *turns, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		tr.mu.Lock()
		in := 0
		for _, q := range tr.waiting {
			in += len(q)
		}
		tr.mu.Unlock()
		if in == n {
			return
		}
	}
	t.Fatalf("%d waiters never in line", n)
}
