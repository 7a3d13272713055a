package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// registerNamed registers an osbtest broker whose one service is called
// service, so that several brokers can serve one catalog.
func (e *env) registerNamed(broker, service string, opts ...osbtest.Option) *osbtest.Broker {
	e.t.Helper()
	services := osbtest.DefaultCatalog()
	services[0].Name = service
	fake := osbtest.New(e.t, append([]osbtest.Option{osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services)}, opts...)...)
	e.register(broker, fake.URL(), "u", "p")
	return fake
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := eventually.Poll(t.Context(), d, func(context.Context) error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: not within %s", what, d)
	}
}

// TestHangingBrokerIsolated: a broker that never answers holds no worker.
// With two workers and six of its instances in flight, an instance and a
// binding of another broker are Ready at once; an abandoned instance of
// the hanging broker is gone at once, its call cancelled, though the
// broker timeout is far.
func TestHangingBrokerIsolated(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.workers, o.timeout = 2, 30*time.Second })
	hang := e.registerNamed("hang", "hang-svc")
	hang.Fail(osbtest.VerbProvision, osbtest.Failure{Delay: time.Hour})
	e.registerNamed("ok", "ok-svc")
	ctx := context.Background()
	var hung []*catalog.Instance
	for i := range 6 {
		hung = append(hung, e.createInstance(fmt.Sprintf("hung-%d", i), "hang-svc", osbtest.PlanSync, nil))
	}
	waitFor(t, 10*time.Second, "the hanging broker's provisions in flight", func() bool { return hang.Count(osbtest.VerbProvision) >= 2 })

	start := time.Now()
	in := e.createInstance("db", "ok-svc", osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the healthy broker's instance and binding took %s beside a hanging broker", d)
	}

	before := len(hang.Requests())
	start = time.Now()
	if _, err := e.store.AbandonInstance(ctx, hung[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the abandoned instance gone", func() bool {
		_, err := e.store.GetInstance(ctx, hung[0].ID)
		return errors.Is(err, catalog.ErrNotFound)
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("abandon took %s to take effect while the call hung", d)
	}
	for _, r := range hang.Requests()[before:] {
		if strings.Contains(r.Path, hung[0].Spec.ExternalID) {
			t.Errorf("the abandoned instance's broker was called again: %s %s", r.Method, r.Path)
		}
	}
}

// TestBrokerMaxInflight: no more requests are in flight to one broker
// than --broker-max-inflight, whatever the workers; the others wait in
// line and all get their turn.
func TestBrokerMaxInflight(t *testing.T) {
	t.Parallel()
	const limit, n, delay = 3, 9, 400 * time.Millisecond
	e := setup(t, func(o *engineOptions) { o.workers, o.maxInflight = 8, limit })
	fake := e.registerFake()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Delay: delay})
	// The gauges, sampled meanwhile: the highest in flight and waiting.
	sampled := make(chan [2]float64)
	stop := make(chan struct{})
	go func() {
		var most [2]float64
		for {
			select {
			case <-stop:
				sampled <- most
				return
			case <-time.After(20 * time.Millisecond):
				most[0] = max(most[0], gauge(t, e, "bindery_controller_broker_inflight", "fake"))
				most[1] = max(most[1], gauge(t, e, "bindery_controller_broker_waiting", "fake"))
			}
		}
	}()
	var ins []*catalog.Instance
	for i := range n {
		ins = append(ins, e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	for _, in := range ins {
		e.waitInstance(in.ID, "Ready", instanceReady)
	}
	close(stop)
	if most := <-sampled; most[0] != limit || most[1] < 1 {
		t.Errorf("bindery_controller_broker_inflight reached %v (the limit is %d), bindery_controller_broker_waiting %v", most[0], limit, most[1])
	}
	var starts []time.Time
	for _, r := range fake.Requests() {
		if r.Verb == osbtest.VerbProvision {
			starts = append(starts, r.Time)
		}
	}
	// Each provision is answered delay after it arrived: more than limit
	// arriving within less than delay of each other were in flight at once.
	for i, s := range starts {
		together := 0
		for _, o := range starts[i:] {
			if o.Sub(s) < delay*9/10 {
				together++
			}
		}
		if together > limit {
			t.Fatalf("%d provisions in flight at once; the limit is %d", together, limit)
		}
	}
}

// TestCircuitBreaker: a broker failing every request but its catalogue's
// opens its breaker
// after the failures allowed in a row; while it is open, only probes of
// its catalogue reach it (and, after each, a few requests paced), the
// broker's Available condition and the metric say so, and its instances
// say why they wait. Once the broker answers again, the waiting
// instances are retried at once instead of waiting out their backoff.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	const failures = 3
	e := setup(t, func(o *engineOptions) {
		o.breakerFailures, o.breakerWait = failures, 300*time.Millisecond
		o.retryBase, o.retryCap = 30*time.Second, time.Minute
	})
	fake := e.registerFake()
	ctx := context.Background()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 503, Description: "backend down"})
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 503, Description: "backend down"})
	var ins []*catalog.Instance
	for i := range 6 {
		ins = append(ins, e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	var broker *catalog.Broker
	waitFor(t, 10*time.Second, "the broker's Available condition False", func() bool {
		var err error
		broker, err = e.store.GetBroker(ctx, brokerID(t, e, "fake"))
		c, ok := catalog.FindCondition(broker.Status.Conditions, catalog.ConditionAvailable)
		return err == nil && ok && c.Status == catalog.ConditionFalse && c.Reason == catalog.ReasonCircuitOpen
	})
	// The breaker closes after each successful probe and opens again
	// after the next failures, so the gauge is 1 only most of the time.
	waitFor(t, 10*time.Second, "bindery_controller_broker_circuit_open 1 while the broker fails", func() bool {
		return gauge(t, e, "bindery_controller_broker_circuit_open", "fake") == 1
	})
	waitFor(t, 10*time.Second, "an instance saying it waits for the broker", func() bool {
		for _, in := range ins {
			got, _ := e.store.GetInstance(ctx, in.ID)
			if c := condition(got.Status.Conditions, catalog.ConditionReady); c.Reason == "WaitingForBroker" && strings.Contains(c.Message, `"fake" is not answering`) {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second)
	// After the first probe, between two probes, at most the failures
	// that open it again: one request at a time.
	run, probes := 0, 0
	for _, r := range fake.Requests() {
		switch r.Verb {
		case osbtest.VerbCatalog:
			probes++
			run = 0
		case osbtest.VerbProvision, osbtest.VerbDeprovision:
			run++
			if probes >= 2 && run > failures {
				t.Errorf("%d requests between two probes of an open breaker", run)
			}
		}
	}
	if probes < 3 { // the registration's fetch and two probes at least
		t.Errorf("%d catalogue requests: the open breaker was not probed", probes)
	}
	if n := counter(t, e, "bindery_controller_broker_probes_total", "fake", "ok"); n < 2 {
		t.Errorf("bindery_controller_broker_probes_total = %v after %d catalogue requests", n, probes)
	}

	fake.Clear(osbtest.VerbProvision)
	fake.Clear(osbtest.VerbDeprovision)
	start := time.Now()
	err := eventually.Poll(ctx, 20*time.Second, func(ctx context.Context) error {
		for _, in := range ins {
			got, err := e.store.GetInstance(ctx, in.ID)
			if err != nil {
				return err
			}
			if !instanceReady(got) {
				return fmt.Errorf("%s: %+v", in.Name, got.Status)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("not all Ready after the broker came back: %v\nlog:\n%s", err, tail(e.logs.String()))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the instances took %s after the broker came back: they waited out their backoff", d)
	}
	waitFor(t, 5*time.Second, "the Available condition gone", func() bool {
		b, err := e.store.GetBroker(ctx, broker.ID)
		_, ok := catalog.FindCondition(b.Status.Conditions, catalog.ConditionAvailable)
		return err == nil && !ok
	})
	if g := gauge(t, e, "bindery_controller_broker_circuit_open", "fake"); g != 0 {
		t.Errorf("bindery_controller_broker_circuit_open = %v once closed", g)
	}
	if !hasMessage(t, e, broker.ID, "answers again") {
		t.Error("the broker's history does not say its breaker closed")
	}
}

// brokerID is the id of the cluster broker called name.
func brokerID(t *testing.T, e *env, name string) string {
	t.Helper()
	b, err := e.store.GetBrokerIn(context.Background(), "", name)
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// gauge reads one series of a gauge vector from the engine's registry,
// -1 when there is none.
func gauge(t *testing.T, e *env, name string, labels ...string) float64 {
	t.Helper()
	if m := metricSeries(t, e, name, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestBreakerOpenBeforeARestart: a broker whose breaker was open when the
// engine stopped (a rollout, a crash) says so in its Available condition;
// the next engine's gates start closed, and a success there says the
// broker answers again, as no probe of that engine will.
func TestBreakerOpenBeforeARestart(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) {
		o.breakerFailures, o.breakerWait = 2, time.Hour
		o.retryBase, o.retryCap = 100*time.Millisecond, time.Second
	})
	fake := e.registerFake()
	ctx := context.Background()
	id := brokerID(t, e, "fake")
	available := func() (catalog.Condition, bool) {
		b, err := e.store.GetBroker(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return catalog.FindCondition(b.Status.Conditions, catalog.ConditionAvailable)
	}
	// A 503 is orphan-mitigated: the deprovisions fail too.
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 503, Times: 3})
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 503, Times: 3})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	waitFor(t, 20*time.Second, "the breaker open", func() bool {
		c, ok := available()
		return ok && c.Status == catalog.ConditionFalse
	})
	e.stop()
	// A new process starts with nothing cached; this one's store stays.
	e.store.ForgetCached("")
	fake.Clear(osbtest.VerbProvision)
	fake.Clear(osbtest.VerbDeprovision)
	e.start()
	e.waitInstance(in.ID, "Ready", instanceReady)
	waitFor(t, 20*time.Second, "the Available condition gone", func() bool {
		_, ok := available()
		return !ok
	})
}
