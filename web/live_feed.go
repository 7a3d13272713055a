package web

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// feed follows the catalog's change feed for the open pages: one follower
// per process however many pages are open, started by the first page and
// stopped with the last. Each open page says which changes concern it and
// is woken (never blocked on) when one commits. This file is the only one
// that knows how the change feed is read.
type feed struct {
	store *catalog.Store
	log   *slog.Logger

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// change is what a page needs to know of a committed change.
type change struct {
	Kind, ObjectID string
	// InstanceID is, for a binding, its instance's id.
	InstanceID string
}

type subscription struct {
	match func(change) bool
	wake  chan struct{}
}

func newFeed(store *catalog.Store, log *slog.Logger) *feed {
	return &feed{store: store, log: log, subs: map[*subscription]struct{}{}}
}

// subscribe registers a page; its wake channel receives when a matching
// change commits after subscribe returns. The page reads the current
// state after subscribing, so nothing between the two is missed.
func (f *feed) subscribe(ctx context.Context, match func(change) bool) (*subscription, func(), error) {
	s := &subscription{match: match, wake: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel == nil {
		after, err := f.store.Revision(ctx)
		if err != nil {
			return nil, nil, err
		}
		fctx, cancel := context.WithCancel(context.Background())
		f.cancel, f.done = cancel, make(chan struct{})
		go f.follow(fctx, after, f.done)
	}
	f.subs[s] = struct{}{}
	return s, func() { f.unsubscribe(s) }, nil
}

func (f *feed) unsubscribe(s *subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
	if len(f.subs) == 0 && f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
}

// follow reads the feed after each notification of a commit (and every
// few seconds, should a notification be lost), until ctx ends; a lost
// connection is retried with backoff and jitter.
func (f *feed) follow(ctx context.Context, after int64, done chan struct{}) {
	defer close(done)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := f.listen(ctx, &after)
		if ctx.Err() != nil {
			return
		}
		d := min(100*time.Millisecond<<min(attempt, 8), 10*time.Second)
		d = d/2 + rand.N(d/2+1)
		f.log.WarnContext(ctx, "web: following the change feed failed; retrying", "error", err, "in", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func (f *feed) listen(ctx context.Context, after *int64) error {
	cl, err := f.store.NewClaimer(ctx, 1)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Listen(ctx, 5*time.Second, func(bool) error {
		for {
			changes, err := f.store.Changes(ctx, *after, 1000)
			if err != nil {
				return err
			}
			for _, c := range changes {
				f.dispatch(change{Kind: c.Kind, ObjectID: c.ObjectID, InstanceID: c.InstanceID})
				*after = c.Revision
			}
			if len(changes) < 1000 {
				return nil
			}
		}
	})
}

func (f *feed) dispatch(c change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		if s.match(c) {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}
