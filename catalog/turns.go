package catalog

import (
	"context"
	"sync"
)

// turns hands out a limited number of slots to parties that take turns:
// while slots are short, a freed slot goes to the party whose turn it is,
// which then goes to the back of the line, so one party asking for many
// slots at once (a namespace's flood of catalogue fetches) delays
// another's next slot by at most one slot of each party waiting, however
// many it asked for. Within a party, slots go in the order asked.
type turns struct {
	mu   sync.Mutex
	free int
	// line is the parties with someone waiting, in turn order; waiting,
	// each one's waiters in order. A waiter's channel is closed when it is
	// given a slot.
	line    []string
	waiting map[string][]chan struct{}
}

func newTurns(n int) *turns {
	return &turns{free: n, waiting: map[string][]chan struct{}{}}
}

// acquire waits for a slot for party, or for ctx to end (then it holds
// none).
func (t *turns) acquire(ctx context.Context, party string) error {
	t.mu.Lock()
	if t.free > 0 && len(t.line) == 0 {
		t.free--
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if len(t.waiting[party]) == 0 {
		t.line = append(t.line, party)
	}
	t.waiting[party] = append(t.waiting[party], ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-ch:
		// Given a slot as ctx ended: handed on.
		t.releaseLocked()
	default:
		t.dropLocked(party, ch)
	}
	return ctx.Err()
}

// release gives a slot back: to the party whose turn it is, if any waits.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked()
}

func (t *turns) releaseLocked() {
	if len(t.line) == 0 {
		t.free++
		return
	}
	party := t.line[0]
	t.line = t.line[1:]
	q := t.waiting[party]
	close(q[0])
	if q = q[1:]; len(q) > 0 {
		t.waiting[party] = q
		t.line = append(t.line, party)
	} else {
		delete(t.waiting, party)
	}
}

// dropLocked takes a waiter that gave up out of its party's line.
func (t *turns) dropLocked(party string, ch chan struct{}) {
	q := t.waiting[party]
	for i, c := range q {
		if c == ch {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		t.waiting[party] = q
		return
	}
	delete(t.waiting, party)
	for i, p := range t.line {
		if p == party {
			t.line = append(t.line[:i:i], t.line[i+1:]...)
			break
		}
	}
}
