package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/bindery-dev/bindery/catalog"
)

// Workers and the waits on brokers.
//
// The engine's workers are tokens, not goroutines: a reconcile holds one
// while it reads and writes the catalog, and gives it back for as long as
// it waits on a broker, taking one again when the broker answers (or the
// call times out). So a broker that never answers holds no worker — only
// the calls in flight to it, at most --broker-max-inflight of them (see
// gates) — and every other broker's objects are worked on as if it were
// not there. The object's shard stays claimed (catalog.Claimer, which
// costs no connection) while it waits.

// run is one reconcile of one object: its context, cancelled when the
// object is abandoned while a call to its broker is in flight, and the
// broker slot it holds.
type run struct {
	key    objectKey
	cancel context.CancelCauseFunc
	// gate is the broker whose slot this reconcile holds (nil: none).
	gate *gate
	// inCall: waiting on the broker now.
	inCall atomic.Bool
	// keepSlot: the next answer of the broker does not give its slot
	// back, as another request follows at once (keepSlot).
	keepSlot bool
	// wrote is the revision of this reconcile's last write of its
	// object: a change of the feed after it is someone else's.
	wrote atomic.Int64
	// bypass: a broker's breaker closed and lifted this object's
	// status-held backoff for this reconcile.
	bypass bool
	// pending is a change of the instance's status this reconcile has
	// still to write: its next write carries it.
	pending *pendingWrite
	// log is the object's logger: its key, then its kind and name once
	// read (named).
	log *slog.Logger
}

// pendingWrite is a status change, with its history entries, that waits
// for the reconcile's next write of the instance.
type pendingWrite struct {
	fn     func(*catalog.Instance)
	events []catalog.EventRecord
}

type runKey struct{}

// logger is the logger of the object ctx reconciles (the engine's
// outside a reconcile).
func (c *Controller) logger(ctx context.Context) *slog.Logger {
	if r := runOf(ctx); r != nil && r.log != nil {
		return r.log
	}
	return c.log
}

// named gives the object of ctx's reconcile its name in the log, once it
// is read: kind ("instance", "binding") = namespace/name.
func (c *Controller) named(ctx context.Context, kind, namespace, name string) {
	if r := runOf(ctx); r != nil {
		r.log = c.log.With(kind, namespace+"/"+name)
	}
}

// runOf is the reconcile ctx belongs to, or nil.
func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// errAbandoned is the cause of a reconcile cancelled because its object
// was abandoned while the broker was being asked about it.
var errAbandoned = errors.New("the object was abandoned")

// runs are the reconciles in progress, by key.
type runs struct {
	mu sync.Mutex
	m  map[objectKey]*run
}

func (rs *runs) add(r *run) {
	rs.mu.Lock()
	rs.m[r.key] = r
	rs.mu.Unlock()
}

func (rs *runs) remove(r *run) {
	rs.mu.Lock()
	if rs.m[r.key] == r {
		delete(rs.m, r.key)
	}
	rs.mu.Unlock()
}

// waiting returns the reconcile of key if it is waiting on a broker and
// rev is news to it (not its own write).
func (rs *runs) waiting(key objectKey, rev int64) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[key]
	if r == nil || !r.inCall.Load() || rev <= r.wrote.Load() {
		return nil
	}
	return r
}

// keepSlot has the reconcile of ctx keep its broker slot through its next
// request's answer, for a request that follows it at once: the fetch of
// a binding after the poll that says its asynchronous bind succeeded.
// Given back between them, the slot could go to the first in line each
// time, and the binding, waiting in line for its fetch, poll for ever
// while the broker stays busy.
func keepSlot(ctx context.Context) {
	if r := runOf(ctx); r != nil {
		r.keepSlot = true
	}
}

// wrote records a write of the object of ctx's reconcile at revision rev.
func wrote(ctx context.Context, rev int64) {
	if r := runOf(ctx); r != nil {
		r.wrote.Store(rev)
	}
}

// checkAbandoned cancels r's call in flight if its object has been
// abandoned: the change of the feed that says so wakes it up, and the
// object is removed at once instead of after the broker's timeout.
func (c *Controller) checkAbandoned(ctx context.Context, r *run) {
	var abandoned bool
	switch r.key.kind {
	case instanceKeyKind:
		in, err := c.store.Store.GetInstance(ctx, r.key.id)
		abandoned = err == nil && in.DeletionTimestamp != nil && in.Annotations[AbandonAnnotation] == "true"
	case bindingKeyKind:
		b, err := c.store.Store.GetBinding(ctx, r.key.id)
		abandoned = err == nil && b.DeletionTimestamp != nil && b.Annotations[AbandonAnnotation] == "true"
	}
	if abandoned {
		r.log.Info("abandoned while its broker was asked: the call is cancelled")
		r.cancel(errAbandoned)
	}
}
