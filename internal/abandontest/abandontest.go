// Package abandontest checks abandon through one of Bindery's front
// doors: against a broker that answers 500 to every delete and one that
// never answers, an instance and a binding whose deletion is stuck are
// abandoned through the door; each must be gone within 2 seconds, with no
// further call to its broker, and its history must say who abandoned it.
// It runs the engine itself, on the caller's store.
package abandontest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// Namespace is where the objects are.
const Namespace = "abandon"

// Door abandons the object of kind ("instance" or "binding") named
// namespace/name (id is its id) through a front door, failing the test if
// the door refuses.
type Door func(t *testing.T, kind, namespace, name, id string)

// Run abandons an instance and a binding of each stuck broker through
// door; who is what the history must say abandoned them (a token's name,
// a user).
func Run(t *testing.T, store *catalog.Store, door Door, who string) {
	t.Helper()
	startEngine(t, store)
	for _, tc := range []struct {
		name    string
		failure osbtest.Failure
	}{
		{"refuses", osbtest.Failure{Status: 500, Description: "cannot delete anything today"}},
		{"hangs", osbtest.Failure{Delay: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := register(t, store, "gone-"+tc.name, "svc-"+tc.name)
			in, b := create(t, store, tc.name)
			fake.Fail(osbtest.VerbUnbind, tc.failure)
			fake.Fail(osbtest.VerbDeprovision, tc.failure)

			if _, err := store.DeleteBinding(context.Background(), b.ID); err != nil {
				t.Fatal(err)
			}
			stuck(t, fake, osbtest.VerbUnbind, b.Spec.ExternalID)
			abandon(t, store, fake, door, "binding", b.Name, b.ID, b.Spec.ExternalID, who, func(ctx context.Context) error {
				_, err := store.GetBinding(ctx, b.ID)
				return err
			})

			if _, err := store.DeleteInstance(context.Background(), in.ID); err != nil {
				t.Fatal(err)
			}
			stuck(t, fake, osbtest.VerbDeprovision, in.Spec.ExternalID)
			abandon(t, store, fake, door, "instance", in.Name, in.ID, in.Spec.ExternalID, who, func(ctx context.Context) error {
				_, err := store.GetInstance(ctx, in.ID)
				return err
			})
		})
	}
}

func startEngine(t *testing.T, store *catalog.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := controller.New(controller.Config{Store: store, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		BrokerTimeout: 30 * time.Second, Workers: 4, RetryBase: time.Second, RetryCap: 2 * time.Second, BreakerFailures: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the engine did not stop within 30s")
		}
	})
}

// register registers an osbtest broker whose one service is called
// service.
func register(t *testing.T, store *catalog.Store, name, service string) *osbtest.Broker {
	services := osbtest.DefaultCatalog()
	services[0].Name = service
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	ctx := context.Background()
	br := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	br.Name = name
	br, err := store.CreateBroker(ctx, br, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Relist(ctx, br.ID); err != nil {
		t.Fatal(err)
	}
	return fake
}

// create makes a Ready instance and binding of the broker of service
// "svc-"+suffix.
func create(t *testing.T, store *catalog.Store, suffix string) (*catalog.Instance, *catalog.Binding) {
	ctx := context.Background()
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "svc-" + suffix, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db-"+suffix, Namespace
	in, err := store.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: in.Name}}}
	b.Name, b.Namespace = "app-"+suffix, Namespace
	if b, err = store.CreateBinding(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the instance and the binding Ready", func(ctx context.Context) bool {
		gotIn, err1 := store.GetInstance(ctx, in.ID)
		gotB, err2 := store.GetBinding(ctx, b.ID)
		return err1 == nil && err2 == nil && ready(gotIn.Status.Conditions) && ready(gotB.Status.Conditions)
	})
	return in, b
}

func ready(conds []catalog.Condition) bool {
	c, ok := catalog.FindCondition(conds, catalog.ConditionReady)
	return ok && c.Status == catalog.ConditionTrue
}

// stuck waits until the broker was asked verb about the object.
func stuck(t *testing.T, fake *osbtest.Broker, verb osbtest.Verb, externalID string) {
	poll(t, 30*time.Second, "the broker asked to "+string(verb), func(context.Context) bool { return calls(fake, externalID, verb) > 0 })
}

// calls counts the requests about the object with externalID, of verb.
func calls(fake *osbtest.Broker, externalID string, verb osbtest.Verb) int {
	n := 0
	for _, r := range fake.Requests() {
		if strings.Contains(r.Path, externalID) && r.Verb == verb {
			n++
		}
	}
	return n
}

// callsSince are the requests about the object with externalID that came
// after since.
func callsSince(fake *osbtest.Broker, externalID string, since time.Time) []osbtest.Request {
	var out []osbtest.Request
	for _, r := range fake.Requests() {
		if strings.Contains(r.Path, externalID) && r.Time.After(since) {
			out = append(out, r)
		}
	}
	return out
}

// abandon abandons the object through the door and checks it is gone
// within 2 s of the door's first request, that its broker heard nothing
// more of it once the abandon was recorded, and its history.
func abandon(t *testing.T, store *catalog.Store, fake *osbtest.Broker, door Door, kind, name, id, externalID, who string, get func(context.Context) error) {
	t.Helper()
	start := time.Now()
	door(t, kind, Namespace, name, id)
	poll(t, 10*time.Second, kind+" gone", func(ctx context.Context) bool { return errors.Is(get(ctx), catalog.ErrNotFound) })
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the abandoned %s was gone after %s, want within 2s", kind, d)
	}
	time.Sleep(time.Second)
	events, err := store.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var abandoned *catalog.Event
	for i, e := range events {
		if e.Reason == catalog.ReasonAbandoned && strings.Contains(e.Message, "Abandoned by "+who) {
			abandoned = &events[i]
		}
	}
	if abandoned == nil {
		t.Fatalf("the %s's history does not say it was abandoned by %s: %+v", kind, who, events)
	}
	for _, r := range callsSince(fake, externalID, abandoned.Time) {
		t.Errorf("the broker was called about the abandoned %s: %s %s at %s, abandoned at %s", kind, r.Method, r.Path, r.Time, abandoned.Time)
	}
}

func poll(t *testing.T, d time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s", what, d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
