package catalog

import (
	"context"
	"sync"
)

// Catalogue fetches in one process are coalesced and limited. A broker is
// fetched once at a time: a relist asked for while its fetch is under way
// joins the next fetch, which starts when that one ends (the fetch under
// way may have read the catalogue before whatever prompted the request),
// and every relist asked for meanwhile shares it. So any number of relists
// asked for during a fetch make one more fetch, not one each. Across
// brokers, at most MaxCatalogueFetches run at once; the others wait their
// turn, the brokers' namespaces (the cluster's brokers being one more)
// taking turns (turns): a namespace asking for many fetches at once delays
// another's by at most a fetch, not by all of its own. A catalogue costs
// about its size in memory while it is stored
// (osb.Catalogue), so these bound what fetches hold: MaxCatalogueFetches ×
// osb.MaxCatalog at worst.
//
// Replicas coalesce through PostgreSQL only for the scheduled relists
// (claimRelist); relists asked of two replicas at once fetch twice.

// DefaultCatalogueFetches is how many catalogues a process fetches at once
// unless WithCatalogueFetches says otherwise.
const DefaultCatalogueFetches = 2

// WithCatalogueFetches bounds how many catalogues the store fetches and
// stores at once (default DefaultCatalogueFetches).
func WithCatalogueFetches(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.fetches.slots = newTurns(n)
		}
	}
}

// fetches are the catalogue fetches of a store: per broker, the round under
// way and the one asked for after it.
type fetches struct {
	mu      sync.Mutex
	brokers map[string]*brokerRounds
	// slots are the fetches that may run at once, which the brokers'
	// namespaces take in turns.
	slots *turns
}

type brokerRounds struct {
	running, next *round
}

// round is one fetch of a broker's catalogue and the relists waiting for
// it. It is cancelled when every relist that waited for it has given up
// and nothing asked for it without waiting (RequestRelist).
type round struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// holders: relists waiting, plus requests that do not wait (which
	// never leave); started: the round is the one under way. Both are
	// guarded by fetches.mu.
	holders int
	started bool
	broker  *Broker
	err     error
}

func newRound() *round {
	ctx, cancel := context.WithCancel(context.Background())
	return &round{ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// join returns the round a relist of broker id asked for now gets, held
// once more: the next one when a fetch is under way, else a new one,
// started.
func (s *Store) join(id string) *round {
	f := &s.fetches
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.brokers == nil {
		f.brokers = map[string]*brokerRounds{}
	}
	br := f.brokers[id]
	if br == nil {
		br = &brokerRounds{running: newRound()}
		f.brokers[id] = br
		br.running.holders++
		br.running.started = true
		go s.runRounds(id, br)
		return br.running
	}
	if br.next == nil || br.next.ctx.Err() != nil {
		// None asked for yet, or asked for by relists that all gave up
		// before it started (it has no holders left): a fresh one.
		br.next = newRound()
	}
	br.next.holders++
	return br.next
}

// leave gives up a hold on r; the last one out cancels it, and learns
// whether it cancelled a fetch under way.
func (s *Store) leave(r *round) (cancelledFetch bool) {
	s.fetches.mu.Lock()
	defer s.fetches.mu.Unlock()
	r.holders--
	if r.holders == 0 {
		r.cancel()
		return r.started
	}
	return false
}

// runRounds runs the rounds of broker id until none is asked for.
func (s *Store) runRounds(id string, br *brokerRounds) {
	f := &s.fetches
	for {
		r := br.running
		if r.ctx.Err() == nil {
			r.broker, r.err = s.fetchRound(r.ctx, id)
		} else {
			r.err = r.ctx.Err()
		}
		r.cancel()
		close(r.done)
		f.mu.Lock()
		if br.next == nil {
			delete(f.brokers, id)
			f.mu.Unlock()
			return
		}
		br.running, br.next = br.next, nil
		br.running.started = true
		f.mu.Unlock()
	}
}

// fetchRound takes a slot and relists; then, the slot given back (icons
// are small and bounded on their own), it refreshes the services' icons.
func (s *Store) fetchRound(ctx context.Context, id string) (*Broker, error) {
	// A broker gone (or no broker) gets its answer from relist, which
	// records nothing then: the cluster's turn for it is as good as any.
	var ns string
	_ = s.pool.QueryRow(ctx, `SELECT namespace FROM catalog.brokers WHERE id = $1::uuid`, id).Scan(&ns)
	if err := s.fetches.slots.acquire(ctx, ns); err != nil {
		return nil, err
	}
	b, err := s.relist(ctx, id)
	s.fetches.slots.release()
	if err == nil {
		s.refreshIcons(ctx, id)
	}
	return b, err
}

// Relist fetches a broker's catalogue and stores its classes and plans in
// the broker's order, coalesced with the other relists of the broker (see
// above): it waits for the fetch under way, if any, and then for the
// next. Services and plans the broker no longer offers (or that its
// catalog restrictions filter out) are marked removed; ones that come back
// are restored. A broker that cannot be reached, or answers garbage, keeps
// everything already stored: its status says why, and the relister tries
// again with backoff. The error is returned as well, with the broker as
// recorded. The broker returned is shared by every relist of the round:
// do not change it.
//
// When ctx ends first, Relist returns ctx's error; the fetch goes on for
// the other relists that wait for it, and is cancelled when none is left
// (the broker's status then says the fetch was cancelled, and the last
// relist returns it with the error).
func (s *Store) Relist(ctx context.Context, id string) (*Broker, error) {
	r := s.join(id)
	select {
	case <-r.done:
		s.leave(r)
		return r.broker, r.err
	case <-ctx.Done():
	}
	if !s.leave(r) {
		return nil, ctx.Err()
	}
	// The fetch under way was cancelled for want of anyone waiting: it
	// records that promptly, and this relist answers with the broker as
	// recorded.
	<-r.done
	return r.broker, ctx.Err()
}

// RequestRelist asks for a fetch of a broker's catalogue and returns at
// once: it joins the next fetch when one is under way (so a catalogue read
// before the broker changed it is not the last word), else starts one.
// The fetch's outcome goes to the broker's status. For the engine, which
// must not hold a worker while a catalogue is fetched (after a
// MaintenanceInfoConflict, OSB says the platform should fetch it).
func (s *Store) RequestRelist(id string) {
	s.join(id)
}
