package web

import (
	"context"
	"log/slog"
	"sync"

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
	// Namespace is the object's namespace ("" for the cluster's brokers,
	// classes and plans).
	Namespace string
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

// follow hands on each change of the catalog's feed after revision after
// until ctx ends (catalog.Feed.Follow reads after each notification of a
// commit, every few seconds anyway, and retries a lost connection with
// backoff and jitter).
func (f *feed) follow(ctx context.Context, after int64, done chan struct{}) {
	defer close(done)
	f.store.Feed().Follow(ctx, after, catalog.FollowOptions{NamesOnly: true}, func(_ context.Context, page []catalog.Change) error {
		for _, c := range page {
			f.dispatch(change{Kind: c.Kind, ObjectID: c.Object.ID, Namespace: c.Object.Namespace, InstanceID: c.InstanceID})
		}
		return nil
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
