package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestDeletedBrokerForgotten: a broker deleted while its breaker is open,
// its catalogue failing too so that every probe fails, is probed no more:
// the engine would otherwise send the broker's credentials to its URL for
// as long as it ran, and keep a gate and metric series for every broker
// ever deleted (a namespace's admin may register and delete brokers
// without end).
func TestDeletedBrokerForgotten(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) {
		o.breakerFailures, o.breakerWait = 2, 50*time.Millisecond
		o.retryBase, o.retryCap = 30*time.Second, time.Minute
	})
	fake := e.registerFake()
	ctx := context.Background()
	// Every request fails, the orphan mitigation's deprovisions too: one
	// that succeeded between two failed provisions would reset the
	// breaker's count, which then opened only when two provisions happened
	// to fail back to back.
	for _, v := range []osbtest.Verb{osbtest.VerbProvision, osbtest.VerbDeprovision, osbtest.VerbCatalog} {
		fake.Fail(v, osbtest.Failure{Status: 503, Description: "backend down"})
	}
	var ins []*catalog.Instance
	for i := range 3 {
		ins = append(ins, e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	waitFor(t, 10*time.Second, "a failed probe of the open breaker", func() bool {
		return counter(t, e, "bindery_controller_broker_probes_total", "fake", "failed") >= 1
	})
	for _, in := range ins {
		if _, err := e.store.AbandonInstance(ctx, in.ID, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range ins {
		waitFor(t, 10*time.Second, "the abandoned instance gone", func() bool {
			_, err := e.store.GetInstance(ctx, in.ID)
			return errors.Is(err, catalog.ErrNotFound)
		})
	}
	if err := e.store.DeleteBroker(ctx, brokerID(t, e, "fake")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a probe under way may still arrive
	before := fake.Count(osbtest.VerbCatalog)
	time.Sleep(6 * time.Second)
	if n := fake.Count(osbtest.VerbCatalog) - before; n > 0 {
		t.Errorf("the deleted broker was probed %d times in 6 s", n)
	}
	for _, name := range []string{"bindery_controller_broker_circuit_open", "bindery_controller_broker_inflight"} {
		if g := gauge(t, e, name, "fake"); g != -1 {
			t.Errorf("%s{broker=\"fake\"} = %v: kept after the broker was deleted", name, g)
		}
	}
}
