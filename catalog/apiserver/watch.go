package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/catalog"
)

// hub follows the catalog's change feed for the whole server: one LISTEN
// connection, one read of the feed per notification, each change converted
// once and fanned out to every watcher of its kind.
type hub struct {
	store *catalog.Store
	log   *slog.Logger
	// poll is how long the hub waits for a notification before it reads the
	// feed anyway (a notification lost with a broken connection).
	poll time.Duration

	mu   sync.Mutex
	subs map[*subscription]struct{}
	// last is the newest revision fanned out: every change up to it is in
	// the channels of the subscriptions that existed when it was sent.
	last  atomic.Int64
	ready chan struct{}
}

// hubEvent is one change, converted. obj is shared by every watcher: they
// copy it before handing it on.
type hubEvent struct {
	rev int64
	typ watch.EventType
	obj runtime.Object
}

// subscription is a watcher's queue of changes of one kind. The hub closes
// ch when the watcher falls too far behind; the watcher then ends and its
// client watches again from the last resourceVersion it saw.
type subscription struct {
	kind string
	ch   chan hubEvent
}

// subscriptionBuffer is how many changes a watcher may lag behind.
const subscriptionBuffer = 4096

func newHub(store *catalog.Store, log *slog.Logger) *hub {
	return &hub{store: store, log: log, poll: 5 * time.Second, subs: map[*subscription]struct{}{}, ready: make(chan struct{})}
}

func (h *hub) subscribe(kind string) *subscription {
	s := &subscription{kind: kind, ch: make(chan hubEvent, subscriptionBuffer)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
	h.mu.Unlock()
}

// run follows the feed until ctx ends, reconnecting after failures.
func (h *hub) run(ctx context.Context) {
	for {
		rev, err := h.store.Revision(ctx)
		if err == nil {
			h.last.Store(rev)
			close(h.ready)
			break
		}
		h.log.WarnContext(ctx, "read the catalog revision", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
	for {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		h.log.WarnContext(ctx, "follow the change feed; reconnecting", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
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

// listen holds its own connection (not one of the pool's) for LISTEN.
func (h *hub) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, h.store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+catalog.NotifyChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for {
		if err := h.catchUp(ctx); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, h.poll)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil, errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// catchUp reads the feed after the last revision and fans it out.
func (h *hub) catchUp(ctx context.Context) error {
	const page = 1000
	for {
		changes, err := h.store.ChangesSince(ctx, h.last.Load(), nil, page)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			return nil
		}
		for _, c := range changes {
			ev, err := toEvent(c)
			if err != nil {
				h.log.ErrorContext(ctx, "convert a change", "kind", c.Kind, "revision", c.Revision, "err", err)
				continue
			}
			h.deliver(c.Kind, ev)
		}
		h.last.Store(changes[len(changes)-1].Revision)
		if len(changes) < page {
			return nil
		}
	}
}

func toEvent(c catalog.FeedChange) (hubEvent, error) {
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
		select {
		case s.ch <- ev:
		default:
			// Too far behind: end this watch rather than hold up the others.
			delete(h.subs, s)
			close(s.ch)
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

func (st *storage) runWatch(ctx context.Context, w *watcher, sub *subscription, req watchRequest) {
	defer close(w.result)
	defer st.hub.unsubscribe(sub)
	send := func(ev watch.Event) bool {
		select {
		case w.result <- ev:
			return true
		case <-w.stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	fail := func(err error) {
		send(watch.Event{Type: watch.Error, Object: statusOf(err)})
	}
	// The hub fans out only what comes after the revision it started at:
	// the backlog must be read after that.
	select {
	case <-st.hub.ready:
	case <-w.stop:
		return
	case <-ctx.Done():
		return
	}
	last := req.from
	if req.initial {
		l, err := st.store.ListRaw(ctx, st.kind, catalog.ListOptions{Namespace: req.pred.namespace})
		if err != nil {
			fail(apierrors.NewInternalError(err))
			return
		}
		for _, r := range l.Items {
			obj, err := fromRaw(st.kind, r)
			if err != nil {
				fail(apierrors.NewInternalError(err))
				return
			}
			if req.pred.matches(obj) && !send(watch.Event{Type: watch.Added, Object: obj}) {
				return
			}
		}
		last = l.ResourceVersion
		if req.initialMark {
			mark := st.bookmark(last)
			mark.(metav1.Object).SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			if !send(watch.Event{Type: watch.Bookmark, Object: mark}) {
				return
			}
		}
	} else {
		kept, err := st.store.ChangesKeptAfter(ctx)
		if err != nil {
			fail(apierrors.NewInternalError(err))
			return
		}
		if req.from < kept {
			fail(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", req.from, kept)))
			return
		}
		changes, err := st.store.ChangesSince(ctx, req.from, []string{st.kind}, 0)
		if err != nil {
			fail(apierrors.NewInternalError(err))
			return
		}
		for _, c := range changes {
			ev, err := toEvent(c)
			if err != nil {
				fail(apierrors.NewInternalError(err))
				return
			}
			last = ev.rev
			if req.pred.matches(ev.obj) && !send(watch.Event{Type: ev.typ, Object: ev.obj}) {
				return
			}
		}
	}
	// handle passes on a change from the hub; false ends the watch.
	handle := func(ev hubEvent) bool {
		if ev.rev <= last {
			return true // in the list or backlog already
		}
		last = ev.rev
		if !req.pred.matches(ev.obj) {
			return true
		}
		return send(watch.Event{Type: ev.typ, Object: ev.obj.DeepCopyObject()})
	}
	var tick <-chan time.Time
	if req.bookmarks {
		t := time.NewTicker(st.bookmarkEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, ok := <-sub.ch:
			if !ok || !handle(ev) {
				return
			}
		case <-tick:
			// Every change up to the hub's last revision is in sub.ch once
			// last has been read: drain it, then the bookmark is true.
			upTo := st.hub.last.Load()
			for drained := false; !drained; {
				select {
				case ev, ok := <-sub.ch:
					if !ok || !handle(ev) {
						return
					}
				default:
					drained = true
				}
			}
			last = max(last, upTo)
			if !send(watch.Event{Type: watch.Bookmark, Object: st.bookmark(last)}) {
				return
			}
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
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
