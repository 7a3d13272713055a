package controller

import (
	"sync"

	"github.com/bindery-dev/bindery/catalog"
)

// wakeups keeps the engine from reconciling an object again for the
// change feed's news of the engine's own writes, once those writes left
// the object settled.
//
// Each status write comes back through the feed and, level-triggered,
// wakes its object up; most of them arrive while the reconcile that made
// them is still running (the broker call comes after the first write),
// which then runs once more for nothing: about one reconcile in two, at
// 10,000 objects. A feed change of revision R is news to the engine unless
// the engine itself left the object settled at a revision R' >= R: the
// object as stored at R' includes every change up to it (whoever made
// them), and a settled object needs nothing. Wake-ups that do not come
// from the feed (the Secrets' informer, resyncs, retries) are not
// filtered, nor those of an object through another (an instance's change
// waking its bindings).
type wakeups struct {
	mu sync.Mutex
	// working: the keys being reconciled, each with the highest revision
	// the feed announced for it meanwhile (0: none).
	working map[objectKey]int64
	// settled: the revision at which this engine's last write left each
	// object settled, until the feed has announced it.
	settled map[objectKey]int64
}

func newWakeups() *wakeups {
	return &wakeups{working: map[objectKey]int64{}, settled: map[objectKey]int64{}}
}

// start says key is being reconciled.
func (w *wakeups) start(key objectKey) {
	w.mu.Lock()
	w.working[key] = 0
	w.mu.Unlock()
}

// finish says the reconcile of key is over, and whether what the feed
// announced meanwhile needs another.
func (w *wakeups) finish(key objectKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rev := w.working[key]
	delete(w.working, key)
	return rev != 0 && w.news(key, rev)
}

// wrote records the engine's write of key at revision rev, which left it
// settled or not.
func (w *wakeups) wrote(key objectKey, rev int64, settled bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if settled {
		w.settled[key] = rev
	} else {
		delete(w.settled, key)
	}
}

// announce tells of the feed's change of key at revision rev, and whether
// to reconcile key now: not if it is news to nobody, nor while key is
// being reconciled (finish decides then).
func (w *wakeups) announce(key objectKey, rev int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seen, ok := w.working[key]; ok {
		w.working[key] = max(seen, rev)
		return false
	}
	return w.news(key, rev)
}

// news reports whether changes of key up to rev may need a reconcile; the
// engine's own settled write is forgotten once the feed has announced it,
// or anything after it. Called with mu held, key not being reconciled.
func (w *wakeups) news(key objectKey, rev int64) bool {
	settled, ok := w.settled[key]
	if !ok {
		return true
	}
	if rev >= settled {
		delete(w.settled, key)
	}
	return rev > settled
}

// instanceSettled reports whether an instance needs nothing from the
// engine: as catalog.Store.Unsettled has it, and with its generation
// reconciled.
func instanceSettled(in *catalog.Instance) bool {
	st := &in.Status
	return in.DeletionTimestamp == nil && !st.AsyncOpInProgress && !st.OrphanMitigationInProgress &&
		st.ObservedGeneration == in.Generation && st.ReconciledGeneration == in.Generation && ready(st.Conditions)
}

// bindingSettled is instanceSettled for a binding.
func bindingSettled(b *catalog.Binding) bool {
	st := &b.Status
	return b.DeletionTimestamp == nil && !st.AsyncOpInProgress && !st.OrphanMitigationInProgress &&
		st.ObservedGeneration == b.Generation && st.ReconciledGeneration == b.Generation && ready(st.Conditions)
}
