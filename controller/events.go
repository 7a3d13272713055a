package controller

import (
	"context"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
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
// Start runs.
func NewEvents(kube kubernetes.Interface) *Events {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	return &Events{broadcaster: b, recorder: b.NewRecorder(runtime.NewScheme(), "bindery.dev/controller")}
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
