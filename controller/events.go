package controller

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/kubecall"
)

// Events makes the entries the catalog records in objects' histories
// Kubernetes Events (events.k8s.io/v1) regarding the servicecatalog.k8s.io
// objects, so that `kubectl describe` and `kubectl events` show what the
// engine did. Give Publish to the engine's store when building it
// (catalog.PublishEventsTo).
type Events struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
}

// NewEvents returns Events that write to kube's events.k8s.io API once
// Start runs, each write bounded by timeout (kubecall.DefaultTimeout when
// not positive).
func NewEvents(kube kubernetes.Interface, timeout time.Duration) *Events {
	if timeout <= 0 {
		timeout = kubecall.DefaultTimeout
	}
	sink := &boundedSink{sink: &events.EventSinkImpl{Interface: kube.EventsV1()}, timeout: timeout, slots: make(chan struct{}, eventWrites)}
	b := events.NewBroadcaster(sink)
	return &Events{broadcaster: b, recorder: b.NewRecorder(runtime.NewScheme(), "bindery.dev/controller")}
}

// eventWrites is how many Event writes are under way at once at most.
const eventWrites = 16

// boundedSink bounds client-go's writes of Events. The broadcaster writes
// each Event from a goroutine of its own, with no deadline, retrying a
// failed write 12 times 10 s apart, and writes the series' counts holding
// the lock every new Event takes: against a kube-apiserver that never
// answers, goroutines piled up, one per Event, for as long as it did not.
// Here a write gives up after timeout and is retried as any failed write;
// at most eventWrites are under way, and an Event that finds none free
// within timeout is dropped (a 429, which the broadcaster does not retry),
// as the broadcaster drops what overflows its queue.
type boundedSink struct {
	sink    events.EventSink
	timeout time.Duration
	slots   chan struct{}
}

func (s *boundedSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return bounded(ctx, s, func(ctx context.Context) (*eventsv1.Event, error) { return s.sink.Create(ctx, ev) })
}

func (s *boundedSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return bounded(ctx, s, func(ctx context.Context) (*eventsv1.Event, error) { return s.sink.Update(ctx, ev) })
}

func (s *boundedSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return bounded(ctx, s, func(ctx context.Context) (*eventsv1.Event, error) { return s.sink.Patch(ctx, ev, data) })
}

// bounded makes write in one of s's slots, within s's timeout.
func bounded(ctx context.Context, s *boundedSink, write func(context.Context) (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, apierrors.NewTooManyRequests("too many Event writes under way: this Event is dropped", 0)
	}
	defer func() { <-s.slots }()
	return write(ctx)
}

// Start sends Events until ctx ends.
func (e *Events) Start(ctx context.Context) error {
	if err := e.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("start recording Kubernetes Events: %w", err)
	}
	go func() {
		<-ctx.Done()
		e.broadcaster.Shutdown()
	}()
	return nil
}

// Publish hands an Event per history entry to client-go's broadcaster and
// returns at once: the broadcaster sends them in the background (retrying
// while kube-apiserver is away, folding repeats of an entry into one Event
// with a count) until Start's context ends; what is still queued then is
// lost.
func (e *Events) Publish(evs []catalog.ObjectEvent) {
	for _, ev := range evs {
		ref := &corev1.ObjectReference{
			APIVersion: v1beta1.SchemeGroupVersion.String(),
			Kind:       ev.Kind,
			Name:       ev.Name,
			Namespace:  ev.Namespace,
			UID:        types.UID(ev.ObjectID),
		}
		action := ev.Operation
		if action == "" {
			action = ev.Reason
		}
		e.recorder.Eventf(ref, nil, ev.Type, ev.Reason, action, "%s", truncate(ev.Message, noteLimit))
	}
}

// noteLimit is the most bytes kube-apiserver accepts in an Event's note; a
// broker's error message can be longer (the catalog keeps it whole).
const noteLimit = 1024

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
