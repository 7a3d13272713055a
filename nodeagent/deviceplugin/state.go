package deviceplugin

import (
	"sync"
	"sync/atomic"
)

// maxPending bounds the snapshots queued for one slow ListAndWatch
// stream; beyond it the oldest are dropped, as each message carries the
// whole list anyway.
const maxPending = 64

// deviceState holds the current snapshot and delivers every change to each
// ListAndWatch stream in order, so a device that goes Unhealthy and back
// is seen going both ways.
type deviceState struct {
	cur  atomic.Pointer[snapshot]
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

// subscriber is one ListAndWatch stream's queue.
type subscriber struct {
	mu      sync.Mutex
	pending []*snapshot
	wake    chan struct{}
}

func newDeviceState(initial *snapshot) *deviceState {
	s := &deviceState{subs: map[*subscriber]struct{}{}}
	s.cur.Store(initial)
	return s
}

// current returns the snapshot Allocate and friends work from.
func (s *deviceState) current() *snapshot { return s.cur.Load() }

// publish makes snap current and, when the advertisement changed, queues
// it for every stream. It reports whether it changed.
func (s *deviceState) publish(snap *snapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := !sameAdvertisement(s.cur.Load(), snap)
	s.cur.Store(snap)
	if changed {
		for sub := range s.subs {
			sub.push(snap)
		}
	}
	return changed
}

// subscribe starts a stream's queue with the current snapshot.
func (s *deviceState) subscribe() *subscriber {
	sub := &subscriber{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.push(s.cur.Load())
	s.subs[sub] = struct{}{}
	return sub
}

func (s *deviceState) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
}

func (sub *subscriber) push(snap *snapshot) {
	sub.mu.Lock()
	sub.pending = append(sub.pending, snap)
	if len(sub.pending) > maxPending {
		sub.pending = append(sub.pending[:0], sub.pending[len(sub.pending)-maxPending:]...)
	}
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// take returns the queued snapshots, oldest first.
func (sub *subscriber) take() []*snapshot {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	p := sub.pending
	sub.pending = nil
	return p
}
