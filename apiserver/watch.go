package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/catalog"
)

// hub follows the catalog's change feed for the whole server: one LISTEN
// connection, one read of the feed per notification, each change converted
// once and fanned out to every watcher of its kind.
type hub struct {
	store *catalog.Store
	log   *slog.Logger
	// poll is how often the hub reads the feed without being notified, and
	// forgets what the feed no longer holds.
	poll time.Duration

	mu   sync.Mutex
	subs map[*subscription]struct{}
	// stopped: run has returned, and every subscription is closed; a new
	// one is closed at once.
	stopped bool
	// last is the newest revision fanned out: every change up to it is in
	// the channels of the subscriptions that existed when it was sent.
	// moved is closed (and replaced) whenever it moves on.
	last  atomic.Int64
	moved chan struct{}
	ready chan struct{}
	// done is closed when run returns.
	done chan struct{}
	// encoded counts the encodings of changes made for watchers: one per
	// change and encoding, however many watchers send it.
	encoded atomic.Int64

	// kmu guards known and gone, which only catchUp (and seed) write.
	kmu sync.Mutex
	// known is the last state the hub saw of each object, by id: a
	// change's prev, and the Extra of a change whose row is gone.
	known map[objectID]*attrs
	// gone is the last state of deleted objects, by id, until the feed
	// before their deletion is pruned (forget): the Extra of a watch's
	// backlog changes whose row is gone.
	gone map[objectID]goneAttrs
}

// goneAttrs is the last state of a deleted object and the revision of its
// deletion.
type goneAttrs struct {
	*attrs
	rev int64
}

// hubEvent is one change, converted. obj is shared by every watcher: they
// copy it before handing it on.
type hubEvent struct {
	rev int64
	typ watch.EventType
	obj runtime.Object
	// shared is obj as every watcher sends it: encoded once per encoding.
	shared runtime.Object
	// prev is the object before the change, when the hub knows it: a
	// watch with a selector turns a MODIFIED into ADDED or DELETED when
	// the object starts or stops matching.
	prev *attrs
	// pruned says a backlog's change has no prev because the feed no
	// longer holds the object's state at the revision the watch starts
	// from.
	pruned bool
}

// subscription is a watcher's queue of changes of one kind. The hub closes
// it when the watcher falls too far behind; the watcher then ends and its
// client watches again from the last resourceVersion it saw.
//
// The queue grows with what waits in it, instead of a channel of
// subscriptionBuffer changes made up front (some 260 kB per watcher, most
// of a watcher's memory, for a queue nearly always empty); the watcher
// takes everything waiting at once.
//
// While the watch follows the hub, the hub hands a change straight to the
// client's handler when it is waiting for one and nothing is held back
// (handOver): one hand-over between goroutines per change and watcher
// instead of two, most of the time.
type subscription struct {
	kind string
	// ready has a value when changes wait or the queue is closed.
	ready chan struct{}

	mu     sync.Mutex
	queue  []hubEvent
	spare  []hubEvent
	closed bool
	// direct is where the hub may hand changes over, nil while the watch
	// sends its initial events or backlog.
	direct *directSend
	// held: the watch's goroutine has changes (or a bookmark) to send, so
	// the hub queues what follows them.
	held bool
	// handed is the newest revision the hub handed over.
	handed int64
}

// directSend is what the hub needs to hand a change over: the watch's
// result channel, its predicate and the revision its list or backlog
// covered.
type directSend struct {
	result  chan<- watch.Event
	pred    predicate
	covered int64
}

// subscriptionBuffer is how many changes a watcher may lag behind.
const subscriptionBuffer = 4096

// push queues ev; false when the watcher is too far behind, and the
// queue is closed.
func (s *subscription) push(ev hubEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.handOver(ev) {
		return true
	}
	if len(s.queue) >= subscriptionBuffer {
		s.closeLocked()
		return false
	}
	s.queue = append(s.queue, ev)
	s.signal()
	return true
}

// handOver sends ev to the watch's client if it waits for an event and
// nothing comes before ev; true when ev needs nothing more (sent, or not
// for this watch). The send never blocks: a client busy with the previous
// event gets ev through the queue.
func (s *subscription) handOver(ev hubEvent) bool {
	d := s.direct
	if d == nil || s.held || len(s.queue) > 0 {
		return false
	}
	if ev.rev <= d.covered {
		return true
	}
	e, ok := d.pred.event(ev, ev.shared)
	if !ok {
		return true
	}
	select {
	case d.result <- e:
		s.handed = max(s.handed, ev.rev)
		return true
	default:
		return false
	}
}

// handOverTo lets the hub hand changes over to d (nil: no more).
func (s *subscription) handOverTo(d *directSend) {
	s.mu.Lock()
	s.direct = d
	s.mu.Unlock()
}

// hold stops the hand-overs until release, and returns the newest
// revision handed over.
func (s *subscription) hold() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
	return s.handed
}

// release lets the hub hand over again, once nothing waits in the queue.
func (s *subscription) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.held = false
	}
}

func (s *subscription) close() {
	s.mu.Lock()
	s.closeLocked()
	s.mu.Unlock()
}

func (s *subscription) closeLocked() {
	if !s.closed {
		s.closed = true
		s.queue = nil
		s.signal()
	}
}

func (s *subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns what waits, oldest first (valid until the next take), and
// false once the queue is closed. The hub hands nothing over until
// release: what it took is sent first.
func (s *subscription) take() ([]hubEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	out := s.queue
	if len(out) > 0 {
		s.held = true
	}
	clear(s.spare)
	s.queue, s.spare = s.spare[:0], out
	return out, true
}

func newHub(store *catalog.Store, log *slog.Logger) *hub {
	return &hub{store: store, log: log, poll: 5 * time.Second, subs: map[*subscription]struct{}{}, ready: make(chan struct{}), done: make(chan struct{}), moved: make(chan struct{}),
		known: map[objectID]*attrs{}, gone: map[objectID]goneAttrs{}}
}

func (h *hub) subscribe(kind string) *subscription {
	s := &subscription{kind: kind, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.stopped {
		s.close()
	} else {
		h.subs[s] = struct{}{}
	}
	h.mu.Unlock()
	return s
}

// stop closes every subscription, and those made later, so that every
// watch ends: a server that stops serves none (net/http's Shutdown waits
// for the handlers of open watches).
func (h *hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for s := range h.subs {
		s.close()
	}
	clear(h.subs)
}

func (h *hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		s.close()
	}
	h.mu.Unlock()
}

// run seeds the hub and follows the feed until ctx ends (catalog.Feed
// reconnects after failures), then ends every watch.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	defer h.stop()
	retry := seedRetry
	var rev int64
	for {
		r, err := h.store.Revision(ctx)
		if err == nil {
			err = h.seed(ctx)
		}
		if err == nil {
			rev = r
			break
		}
		h.log.WarnContext(ctx, "read the catalog revision", "err", err)
		if !sleep(ctx, retry.Step()) {
			return
		}
	}
	h.last.Store(rev)
	close(h.ready)
	h.store.Feed().Follow(ctx, rev, catalog.FollowOptions{Page: 1000, Idle: h.poll, OnIdle: h.forgetPruned}, h.fanOut)
}

// seedRetry spaces out attempts to seed the hub: a second doubling up to
// 30 seconds, with jitter.
var seedRetry = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 30 * time.Second}

// seed reads the state of every object, so that the first change of each
// has its prev and Extra. The lists are at least as new as the revision
// the hub starts after: a change between the two may get a prev newer than
// itself, which only matters to a selector's transitions, at start.
func (h *hub) seed(ctx context.Context) error {
	known := map[objectID]*attrs{}
	for _, kind := range []string{catalog.KindBroker, catalog.KindServiceClass, catalog.KindServicePlan, catalog.KindInstance, catalog.KindBinding,
		catalog.KindNamespacedBroker, catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan} {
		for cont := ""; ; {
			l, err := h.store.ListRaw(ctx, kind, catalog.ListOptions{Continue: cont, Limit: 5000})
			if err != nil {
				return err
			}
			for _, r := range l.Items {
				obj, err := fromRaw(kind, r)
				if err != nil {
					return err
				}
				if id, ok := idOf(r.ID); ok {
					known[id] = attrsOf(obj, r.Extra)
				}
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
	}
	h.kmu.Lock()
	h.known = known
	h.kmu.Unlock()
	return nil
}

// lastExtra is the Extra the hub last saw of an object, deleted or not.
func (h *hub) lastExtra(objectID string) json.RawMessage {
	id, ok := idOf(objectID)
	if !ok {
		return nil
	}
	h.kmu.Lock()
	defer h.kmu.Unlock()
	if a := h.known[id]; a != nil {
		return a.extraJSON()
	}
	if a, ok := h.gone[id]; ok {
		return a.extraJSON()
	}
	return nil
}

// forget drops what the hub keeps of objects deleted before revision
// before, once the feed before it is pruned.
func (h *hub) forget(before int64) {
	h.kmu.Lock()
	defer h.kmu.Unlock()
	for id, a := range h.gone {
		if a.rev < before {
			delete(h.gone, id)
		}
	}
}

// toEvent converts a change, its Extra filled in from what the hub last
// saw when the object's row is gone.
func (h *hub) toEvent(c catalog.Change) (hubEvent, error) {
	if !c.Current && len(c.Object.Extra) == 0 {
		c.Object.Extra = h.lastExtra(c.Object.ID)
	}
	return toEvent(c)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fanOut converts a page of the feed and hands it to the subscriptions.
func (h *hub) fanOut(ctx context.Context, page []catalog.Change) error {
	for _, c := range page {
		ev, err := h.toEvent(c)
		if err != nil {
			h.log.ErrorContext(ctx, "convert a change", "kind", c.Kind, "revision", c.Revision, "err", err)
			continue
		}
		a := attrsOf(ev.obj, c.Object.Extra)
		ev.shared = share(ev.obj, &h.encoded)
		if id, ok := idOf(c.Object.ID); ok {
			h.kmu.Lock()
			ev.prev = h.known[id]
			if ev.typ == watch.Deleted {
				delete(h.known, id)
				h.gone[id] = goneAttrs{attrs: a, rev: c.Revision}
			} else {
				h.known[id] = a
			}
			h.kmu.Unlock()
		}
		h.deliver(c.Kind, ev)
	}
	h.mu.Lock()
	h.last.Store(page[len(page)-1].Revision)
	close(h.moved)
	h.moved = make(chan struct{})
	h.mu.Unlock()
	return nil
}

// settleWait bounds how long a response waits for the hub (waitFor).
const settleWait = 10 * time.Second

// waitFor waits until the hub has fanned out revision rev, so that every
// revision up to it is final: a client that watches from an object's
// resourceVersion then misses no change that commits after it read the
// object (a revision below it may commit after it, while in flight;
// catalog/revision.go). It gives up after settleWait, or when ctx ends.
func (h *hub) waitFor(ctx context.Context, rev int64) {
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for {
		h.mu.Lock()
		moved := h.moved
		h.mu.Unlock()
		if h.last.Load() >= rev {
			return
		}
		select {
		case <-moved:
		case <-t.C:
			h.log.WarnContext(ctx, "the watch hub did not reach an object's revision: answering anyway", "revision", rev, "hub", h.last.Load())
			return
		case <-ctx.Done():
			return
		}
	}
}

// forgetPruned drops what the hub keeps of objects whose deletion the feed
// no longer holds (whichever process pruned it).
func (h *hub) forgetPruned(ctx context.Context) error {
	kept, err := h.store.Feed().KeptAfter(ctx)
	if err != nil {
		return err
	}
	h.forget(kept + 1)
	return nil
}

func toEvent(c catalog.Change) (hubEvent, error) {
	obj, err := fromRaw(c.Kind, c.Object)
	if err != nil {
		return hubEvent{}, err
	}
	// A deleted object carries the revision of its deletion, as in
	// Kubernetes.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(c.Revision, 10))
	}
	return hubEvent{rev: c.Revision, typ: watch.EventType(c.Type), obj: obj}, nil
}

func (h *hub) deliver(kind string, ev hubEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.kind != kind {
			continue
		}
		if !s.push(ev) {
			// Too far behind: end this watch rather than hold up the others.
			delete(h.subs, s)
		}
	}
}

// watcher is one watch: optional initial events, then the feed's backlog
// after the requested revision, then the hub's changes.
type watcher struct {
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

// ResultChan is the channel of events; it closes when the watch ends.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch.
func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// watchRequest is what a watch asks for.
type watchRequest struct {
	pred        predicate
	from        int64
	initial     bool // send the current objects as ADDED first
	initialMark bool // end the initial events with a bookmark (sendInitialEvents)
	bookmarks   bool
}

func (st *storage) startWatch(ctx context.Context, req watchRequest) *watcher {
	w := &watcher{result: make(chan watch.Event), stop: make(chan struct{})}
	sub := st.hub.subscribe(st.kind)
	go st.runWatch(ctx, w, sub, req)
	return w
}

// runWatch runs one watch in three phases: the initial events or the
// feed's backlog after the requested revision, then the hub's changes.
func (st *storage) runWatch(ctx context.Context, w *watcher, sub *subscription, req watchRequest) {
	defer close(w.result)
	defer st.hub.unsubscribe(sub)
	r := &watchRun{st: st, ctx: ctx, w: w, sub: sub, req: req}
	// The hub fans out only what comes after the revision it started at:
	// the backlog must be read after that.
	select {
	case <-st.hub.ready:
	case <-st.hub.done:
		return
	case <-w.stop:
		return
	case <-ctx.Done():
		return
	}
	var last int64
	var ok bool
	if req.initial {
		last, ok = r.initialEvents()
	} else {
		last, ok = r.backlog()
	}
	if ok {
		r.follow(last)
	}
}

// watchRun is one running watch's state, shared by its phases.
type watchRun struct {
	st  *storage
	ctx context.Context
	w   *watcher
	sub *subscription
	req watchRequest
}

// send passes ev to the client; false when the watch has ended.
func (r *watchRun) send(ev watch.Event) bool {
	select {
	case r.w.result <- ev:
		return true
	case <-r.w.stop:
		return false
	case <-r.ctx.Done():
		return false
	}
}

// fail ends the watch with err as its last event.
func (r *watchRun) fail(err error) {
	r.send(watch.Event{Type: watch.Error, Object: statusOf(err)})
}

// initialEvents sends the current objects as ADDED, then, for
// sendInitialEvents, the bookmark that ends them; it returns the revision
// they were read at. Initial events asked to be at least as new as a
// revision the catalog has not reached end the watch with kube-apiserver's
// error for it (a Timeout whose cause client-go's reflector acts on): the
// catalog has nothing that new to send.
func (r *watchRun) initialEvents() (int64, bool) {
	if r.req.from > 0 {
		if err := r.st.reached(r.ctx, r.req.from); err != nil {
			r.fail(err)
			return 0, false
		}
	}
	last, ok := r.st.sendInitial(r.ctx, r.req, r.send, r.fail)
	if !ok {
		return 0, false
	}
	if r.req.initialMark {
		mark := r.st.bookmark(last)
		mark.(metav1.Object).SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		if !r.send(watch.Event{Type: watch.Bookmark, Object: mark}) {
			return 0, false
		}
	}
	return last, true
}

// backlog sends the feed's changes after the requested revision (410 Gone
// when the feed no longer keeps them) and returns the revision it read up
// to.
func (r *watchRun) backlog() (int64, bool) {
	st, ctx, req := r.st, r.ctx, r.req
	if !r.kept() {
		return 0, false
	}
	page, err := st.store.Feed().Read(ctx, req.from, []string{st.kind}, 0)
	if err != nil {
		r.fail(apierrors.NewInternalError(err))
		return 0, false
	}
	// A resourceVersion beyond the final revision the read went up to is
	// none the catalog has given: not followed from there.
	if err := tooNew(req.from, page.Final); err != nil {
		r.fail(err)
		return 0, false
	}
	// A prune that committed between the check and the read took changes
	// the read then did not see: the watch would go on with a gap. Pruning
	// keeps a suffix of the feed, so the same check after the read says
	// whether it did (the first spares a long read that would be lost).
	if !r.kept() {
		return 0, false
	}
	prevs, err := st.statesAt(ctx, req, page.Changes)
	if err != nil {
		r.fail(apierrors.NewInternalError(err))
		return 0, false
	}
	last := req.from
	for _, c := range page.Changes {
		ev, err := st.hub.toEvent(c)
		if err != nil {
			r.fail(apierrors.NewInternalError(err))
			return 0, false
		}
		last = ev.rev
		id := c.Object.ID
		ev.prev = prevs[id]
		ev.pruned = ev.prev == nil && req.pred.selects()
		prevs[id] = attrsOf(ev.obj, nil)
		if e, ok := req.pred.event(ev, ev.obj); ok && !r.send(e) {
			return 0, false
		}
	}
	// Read up to the final revision: the hub's changes up to it were read
	// here.
	return max(last, page.UpTo), true
}

// follow passes on the hub's changes after covered, the revision the list
// or backlog read up to (the hub's changes up to it were sent already),
// with bookmarks when asked, until the watch ends. The changes of one
// transaction written by an earlier release share a revision (this one's
// have one each), so a change of the revision last sent is not one sent
// before.
func (r *watchRun) follow(covered int64) {
	// last is the revision the watch has sent up to; fromHub, the newest
	// of the hub's changes it passed on from the queue.
	last, fromHub := covered, int64(0)
	// drain handles what waits in the subscription; false ends the watch.
	drain := func() bool {
		evs, ok := r.sub.take()
		if !ok {
			return false
		}
		for _, ev := range evs {
			if ev.rev <= covered {
				continue // in the list or backlog already
			}
			last, fromHub = max(last, ev.rev), max(fromHub, ev.rev)
			if e, ok := r.req.pred.event(ev, ev.shared); ok && !r.send(e) {
				return false
			}
		}
		return true
	}
	if r.req.pred.hide == nil {
		// A predicate that hides objects asks the authorizer, and keeps
		// its answers: only this goroutine may call it.
		r.sub.handOverTo(&directSend{result: r.w.result, pred: r.req.pred, covered: covered})
		defer r.sub.handOverTo(nil)
	}
	var tick <-chan time.Time
	if r.req.bookmarks {
		t := time.NewTicker(r.st.bookmarkEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.sub.ready:
			if !drain() {
				return
			}
			r.sub.release()
		case <-tick:
			// Every change up to the hub's last revision has been handed
			// over or is in the subscription once last has been read (with
			// the hand-overs held, so that none comes after the bookmark):
			// drain it, then the bookmark is true.
			handed := r.sub.hold()
			upTo := r.st.hub.last.Load()
			if !drain() {
				return
			}
			// The hub hands a revision's changes over one at a time (an
			// earlier release's relist wrote a broker's classes at one
			// revision), and its
			// last is a revision fanned out whole: while the changes sent
			// are of a newer one, some of it may be still to come, and the
			// bookmark waits for the next tick. A client resumes from a
			// bookmark's revision, and would miss the rest.
			if max(handed, fromHub) <= upTo {
				last = max(last, upTo)
				if !r.send(watch.Event{Type: watch.Bookmark, Object: r.st.bookmark(last)}) {
					return
				}
			}
			r.sub.release()
		case <-r.w.stop:
			return
		case <-r.ctx.Done():
			return
		}
	}
}

// kept says whether the feed keeps every change after the requested
// revision, and fails the watch with 410 Gone when it does not.
func (r *watchRun) kept() bool {
	kept, err := r.st.store.Feed().KeptAfter(r.ctx)
	if err != nil {
		r.fail(apierrors.NewInternalError(err))
		return false
	}
	if r.req.from < kept {
		r.fail(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", r.req.from, kept)))
		return false
	}
	return true
}

// errStopped ends a scan whose watch has ended.
var errStopped = errors.New("the watch ended")

// sendInitial sends the objects the watch selects as ADDED, read from one
// snapshot a chunk at a time as the client takes them, and returns the
// snapshot's revision; false when the watch ended (fail has said why, if
// it failed). The snapshot is held no longer than the store allows: a
// client that reads the initial events more slowly gets a Timeout error,
// and lists again.
func (st *storage) sendInitial(ctx context.Context, req watchRequest, send func(watch.Event) bool, fail func(error)) (int64, bool) {
	var rev int64
	lo := catalog.ListOptions{Namespace: req.pred.namespace, Labels: req.pred.label}
	err := st.store.ScanRaw(ctx, st.kind, lo, func(r int64, _ string, items []*catalog.RawObject) error {
		rev = r
		for _, raw := range items {
			obj, err := fromRaw(st.kind, raw)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			if req.pred.matches(obj) && !send(watch.Event{Type: watch.Added, Object: req.pred.narrow.object(obj)}) {
				return errStopped
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errStopped):
		return 0, false
	case isExpired(err):
		fail(apierrors.NewTimeoutError(fmt.Sprintf("%v: the initial events were read too slowly", err), 1))
		return 0, false
	case err != nil:
		fail(st.listError(err))
		return 0, false
	}
	return rev, true
}

// statesAt reads what the objects a backlog modifies were at the revision
// the watch starts from, for a watch with a selector or one that hides
// plans from its user (the others need no prev): nil for what the feed no
// longer knows.
func (st *storage) statesAt(ctx context.Context, req watchRequest, changes []catalog.Change) (map[string]*attrs, error) {
	prevs := map[string]*attrs{}
	if !req.pred.selects() && req.pred.hide == nil {
		return prevs, nil
	}
	seen := map[string]bool{}
	var ids []string
	for _, c := range changes {
		if !seen[c.Object.ID] {
			seen[c.Object.ID] = true
			if c.Type == catalog.Modified {
				ids = append(ids, c.Object.ID)
			}
		}
	}
	at, err := st.store.Feed().At(ctx, st.kind, ids, req.from)
	if err != nil {
		return nil, err
	}
	for id, c := range at {
		obj, err := fromRaw(st.kind, c.Object)
		if err != nil {
			return nil, err
		}
		prevs[id] = attrsOf(obj, nil)
	}
	return prevs, nil
}

// bookmark is an empty object of the kind carrying only a resourceVersion.
func (st *storage) bookmark(rev int64) runtime.Object {
	obj := st.newFn()
	obj.(metav1.Object).SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj
}

func statusOf(err error) *metav1.Status {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		st := s.Status()
		return &st
	}
	st := apierrors.NewInternalError(err).Status()
	return &st
}
