package controller_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// maxAttempts is how many calls the backoff allows within window: the
// first at once, then one after each wait, every wait at least 0.8 of
// min(cap, base·2^(n−1)) — the formula, stated apart from the engine's.
func maxAttempts(window, base, limit time.Duration) int {
	calls, at := 1, time.Duration(0)
	for {
		d := limit
		if n := calls - 1; n < 40 && base<<n < limit {
			d = base << n
		}
		at += d * 8 / 10
		if at > window {
			return calls
		}
		calls++
	}
}

// callsFor are the requests of verb about the object with external id.
func callsFor(fake *osbtest.Broker, verb osbtest.Verb, externalID string) []osbtest.Request {
	var out []osbtest.Request
	for _, r := range fake.Requests() {
		if r.Verb == verb && strings.Contains(r.Path, externalID) {
			out = append(out, r)
		}
	}
	return out
}

func retryOf(retries map[string]catalog.Retry, op string) catalog.Retry { return retries[op] }

// TestBackoffFailingBroker: a broker answering 500 gets no more calls per
// object than the backoff formula allows in the time it failed; once it is
// back, the next attempt (and only it) succeeds, no earlier than it was
// due.
func TestBackoffFailingBroker(t *testing.T) {
	t.Parallel()
	const base, limit = 100 * time.Millisecond, 5 * time.Second
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = base, limit })
	fake := e.registerFake()
	ctx := context.Background()
	var ins []*catalog.Instance
	for _, name := range []string{"a", "b", "c"} {
		in := e.createInstance(name, osbtest.DefaultService, osbtest.PlanSync, nil)
		e.waitInstance(in.ID, "Ready", instanceReady)
		ins = append(ins, in)
	}
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 500, Description: "down for maintenance"})
	start := time.Now()
	for _, in := range ins {
		if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
	}
	const failures = 6
	var due []time.Time
	for _, in := range ins {
		got := e.waitInstance(in.ID, "failing with backoff", func(in *catalog.Instance) bool {
			return retryOf(in.Status.Retries, catalog.OperationDeprovision).Failures >= failures
		})
		window := time.Since(start)
		calls := callsFor(fake, osbtest.VerbDeprovision, in.Spec.ExternalID)
		if allowed := maxAttempts(window, base, limit); len(calls) > allowed {
			t.Errorf("instance %s: %d deprovision calls in %s; the backoff allows %d", in.Name, len(calls), window, allowed)
		}
		for i := 1; i < len(calls); i++ {
			if gap, least := calls[i].Time.Sub(calls[i-1].Time), base<<(i-1)*8/10; gap < least {
				t.Errorf("instance %s: call %d came %s after the one before, before the backoff's %s", in.Name, i+1, gap, least)
			}
		}
		if c := condition(got.Status.Conditions, catalog.ConditionReady); !strings.Contains(c.Message, "down for maintenance") || !strings.Contains(c.Message, "next attempt at") {
			t.Errorf("Ready condition does not say why nor when next: %q", c.Message)
		}
	}
	fake.Clear(osbtest.VerbDeprovision)
	for _, in := range ins {
		got, err := e.store.GetInstance(ctx, in.ID)
		if err == nil {
			due = append(due, got.Status.Retries[catalog.OperationDeprovision].NextAttempt)
		} else {
			due = append(due, time.Time{})
		}
	}
	for i, in := range ins {
		e.waitGone("instance "+in.Name, func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
		calls := callsFor(fake, osbtest.VerbDeprovision, in.Spec.ExternalID)
		events, _ := e.store.Events(ctx, in.ID, 0)
		failed := 0
		for _, ev := range events {
			if ev.Reason == "DeprovisionCallFailed" {
				failed += ev.Count
			}
		}
		if len(calls) != failed+1 {
			t.Errorf("instance %s: %d calls for %d failures: the broker's return took more than the next attempt", in.Name, len(calls), failed)
		}
		if last := calls[len(calls)-1].Time; !due[i].IsZero() && last.Before(due[i].Add(-5*time.Millisecond)) {
			t.Errorf("instance %s: the successful call came at %s, before it was due at %s", in.Name, last, due[i])
		}
	}
	if len(fake.Instances()) != 0 {
		t.Errorf("left at the broker: %v", fake.Instances())
	}
}

// TestBackoffSurvivesRestart: a restarted engine waits for the backoff in
// status, and goes on counting failures from where it was.
func TestBackoffSurvivesRestart(t *testing.T) {
	t.Parallel()
	const base = 300 * time.Millisecond
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = base, time.Minute })
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 503, Description: "maintenance"})
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitInstance(in.ID, "failed three times", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, catalog.OperationDeprovision).Failures >= 3
	})
	e.stop()
	got, err := e.store.GetInstance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	before := got.Status.Retries[catalog.OperationDeprovision]
	e.start()
	e.waitInstance(in.ID, "failed once more", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, catalog.OperationDeprovision).Failures == before.Failures+1
	})
	calls := callsFor(fake, osbtest.VerbDeprovision, in.Spec.ExternalID)
	if len(calls) != before.Failures+1 {
		t.Fatalf("%d calls for %d failures", len(calls), before.Failures+1)
	}
	if last := calls[len(calls)-1].Time; last.Before(before.NextAttempt.Add(-5 * time.Millisecond)) {
		t.Errorf("the restarted engine called at %s, before the attempt was due at %s", last, before.NextAttempt)
	}
}

// TestSpecChangeResetsBackoff: a user's change to the spec is tried at
// once, with the failures counted afresh.
func TestSpecChangeResetsBackoff(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = time.Hour, time.Hour })
	fake := e.registerFake()
	ctx := context.Background()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 422, Code: "ConcurrencyError", Times: 1})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 1})
	got := e.waitInstance(in.ID, "backing off", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, catalog.OperationProvision).Failures == 1
	})
	if wait := time.Until(got.Status.Retries[catalog.OperationProvision].NextAttempt); wait < 40*time.Minute {
		t.Fatalf("next attempt in %s, want about an hour", wait)
	}
	if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.Parameters = []byte(`{"size": 2}`)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = e.waitInstance(in.ID, "Ready", instanceReady)
	if len(got.Status.Retries) != 0 {
		t.Errorf("backoff left after success: %+v", got.Status.Retries)
	}
	if n := fake.Count(osbtest.VerbProvision); n != 2 {
		t.Errorf("%d provision calls, want 2", n)
	}
}

// TestTooManyRequestsRetried: a broker throttling a provision, bind or
// update with 429 Too Many Requests asks to be asked again later; it used
// to fail the object for good (Failed, not retried until its spec
// changed), as a 400 does, though the breaker counts a 429 as the
// broker's trouble. Each is now tried again after its backoff, held in
// status, or the broker's Retry-After when longer, and is not
// orphan-mitigated (OSB's table: a 4xx created nothing).
func TestTooManyRequestsRetried(t *testing.T) {
	t.Parallel()
	throttled := osbtest.Failure{Status: 429, Description: "slow down", RetryAfter: time.Second, Times: 1}
	for _, verb := range []osbtest.Verb{osbtest.VerbProvision, osbtest.VerbBind, osbtest.VerbUpdate} {
		t.Run(string(verb), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			fake := e.registerFake()
			ctx := context.Background()
			if verb == osbtest.VerbProvision {
				fake.Fail(verb, throttled)
			}
			in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 1})
			external, wait := in.Spec.ExternalID, func() { e.waitInstance(in.ID, "Ready", instanceReady) }
			switch verb {
			case osbtest.VerbBind:
				e.waitInstance(in.ID, "Ready", instanceReady)
				fake.Fail(verb, throttled)
				b := e.createBinding("app", "db")
				external, wait = b.Spec.ExternalID, func() { e.waitBinding(b.ID, "Ready", bindingReady) }
			case osbtest.VerbUpdate:
				e.waitInstance(in.ID, "Ready", instanceReady)
				fake.Fail(verb, throttled)
				if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
					in.Spec.Parameters = []byte(`{"size": 2}`)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				wait = func() {
					e.waitInstance(in.ID, "updated", func(got *catalog.Instance) bool {
						return got.Status.ReconciledGeneration > in.Generation && instanceReady(got)
					})
				}
			}
			wait()
			calls := callsFor(fake, verb, external)
			if len(calls) != 2 {
				t.Fatalf("%d %s calls, want the throttled one and one more", len(calls), verb)
			}
			if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second-50*time.Millisecond {
				t.Errorf("retried %s after a Retry-After of 1s", gap)
			}
			if n := fake.Count(osbtest.VerbDeprovision) + fake.Count(osbtest.VerbUnbind); n > 0 {
				t.Errorf("%d deprovision or unbind calls after a 429", n)
			}
		})
	}
}

// TestRetryAfterOnErrors: a Retry-After longer than the backoff is
// honoured on an error answer.
func TestRetryAfterOnErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 422, Code: "ConcurrencyError", RetryAfter: 2 * time.Second, Times: 1})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	calls := callsFor(fake, osbtest.VerbProvision, in.Spec.ExternalID)
	if len(calls) != 2 {
		t.Fatalf("%d provision calls, want 2", len(calls))
	}
	if gap := calls[1].Time.Sub(calls[0].Time); gap < 2*time.Second-50*time.Millisecond {
		t.Errorf("retried %s after a Retry-After of 2s", gap)
	}
}

// TestFailureStormBounded: 100 objects failing at once leave a bounded
// history and change feed: identical failures fold into one entry each.
func TestFailureStormBounded(t *testing.T) {
	t.Parallel()
	const base, limit = 50 * time.Millisecond, 400 * time.Millisecond
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap, o.workers = base, limit, 8 })
	fake := e.registerFake()
	ctx := context.Background()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 500, Description: "the backend is down"})
	var revBefore int64
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(max(revision), 0) FROM catalog.changes`).Scan(&revBefore); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var ins []*catalog.Instance
	for i := range n {
		ins = append(ins, e.createInstance("db-"+strconv.Itoa(i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	const failures = 4
	for _, in := range ins {
		e.waitInstance(in.ID, "failing", func(in *catalog.Instance) bool {
			return retryOf(in.Status.Retries, catalog.OperationProvision).Failures >= failures
		})
	}
	e.stop()
	var maxFailures int
	for _, in := range ins {
		got, _ := e.store.GetInstance(ctx, in.ID)
		maxFailures = max(maxFailures, got.Status.Retries[catalog.OperationProvision].Failures)
	}
	var events, perObject, changes int
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(c), 0), coalesce(max(c), 0) FROM (SELECT object_id, count(*) c FROM catalog.events
		WHERE kind = 'ServiceInstance' GROUP BY object_id) e`).Scan(&events, &perObject); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.changes WHERE revision > $1 AND kind = 'ServiceInstance'`, revBefore).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	// Per object: its creation, the failure that starts orphan mitigation
	// and its end, folded however often they repeat.
	if perObject > 4 {
		t.Errorf("an object has %d history entries after %d identical failures, want at most 4", perObject, maxFailures)
	}
	// Per attempt at most four writes: the provision recorded, its failure,
	// the deprovision recorded, its end; plus the creation.
	if bound := n * (1 + 4*(maxFailures+1)); changes > bound {
		t.Errorf("%d change-feed rows for %d objects failing at most %d times; want at most %d", changes, n, maxFailures, bound)
	}
	t.Logf("%d objects, up to %d failures each: %d history rows (max %d per object), %d change-feed rows", n, maxFailures, events, perObject, changes)
}

// TestPollErrorsVisible: while last_operation answers 500, the Ready
// condition says the last poll failed and why, the history has one entry
// counting the failures, and the metric counts them; for a binding too.
func TestPollErrorsVisible(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithPolls(0), osbtest.WithRetryAfter(-1))
	ctx := context.Background()
	fake.Fail(osbtest.VerbLastOperation, osbtest.Failure{Status: 500, Description: "status store unavailable"})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanAsync, nil)
	got := e.waitInstance(in.ID, "showing poll failures", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, "LastOperation").Failures >= 3
	})
	if c := condition(got.Status.Conditions, catalog.ConditionReady); c.Reason != "ErrorPollingLastOperation" || !strings.Contains(c.Message, "Error polling last operation") || !strings.Contains(c.Message, "status store unavailable") {
		t.Errorf("Ready says %q", c.Message)
	}
	events, _ := e.store.Events(ctx, in.ID, 0)
	entries, count := 0, 0
	for _, ev := range events {
		if ev.Reason == "ErrorPollingLastOperation" {
			entries++
			count = ev.Count
			if !ev.LastTime.After(ev.Time) {
				t.Errorf("folded entry's last time %s is not after its first %s", ev.LastTime, ev.Time)
			}
		}
	}
	if entries != 1 || count < 3 {
		t.Errorf("%d poll-failure entries counting %d, want 1 counting at least 3", entries, count)
	}
	if n := counter(t, e, "bindery_controller_poll_errors_total", "instance", catalog.OperationProvision); n < 3 {
		t.Errorf("poll errors metric %v, want at least 3", n)
	}
	fake.Clear(osbtest.VerbLastOperation)
	got = e.waitInstance(in.ID, "Ready", instanceReady)
	if len(got.Status.Retries) != 0 {
		t.Errorf("backoff left after success: %+v", got.Status.Retries)
	}

	fake.Fail(osbtest.VerbBindingLastOperation, osbtest.Failure{Status: 500, Description: "binding status unavailable"})
	b := e.createBinding("app", "db")
	gotB := e.waitBinding(b.ID, "showing poll failures", func(b *catalog.Binding) bool {
		return retryOf(b.Status.Retries, "LastOperation").Failures >= 2
	})
	if c := condition(gotB.Status.Conditions, catalog.ConditionReady); c.Reason != "ErrorPollingLastOperation" || !strings.Contains(c.Message, "binding status unavailable") || !strings.Contains(c.Message, "next attempt at") {
		t.Errorf("binding's Ready says %s %q", c.Reason, c.Message)
	}
	if !strings.Contains(e.logs.String(), "poll binding last operation") {
		t.Error("binding poll errors are not logged")
	}
	// The credentials of a finished asynchronous bind cannot be fetched
	// at first: seen and retried the same way.
	fake.Fail(osbtest.VerbFetchBinding, osbtest.Failure{Status: 503, Times: 2})
	fake.Clear(osbtest.VerbBindingLastOperation)
	e.waitBinding(b.ID, "Ready", bindingReady)
	if !hasMessage(t, e, b.ID, "fetch the binding after its asynchronous bind") {
		t.Error("the failed fetch of the binding is not in its history")
	}
	if n := fake.Count(osbtest.VerbFetchBinding); n != 3 {
		t.Errorf("%d fetches of the binding, want 2 failed and 1", n)
	}
}

// counter reads one series of a counter vector from the engine's registry,
// its label values given in the order of the label names; 0 when there is
// none.
func counter(t *testing.T, e *env, name string, labels ...string) float64 {
	t.Helper()
	if m := metricSeries(t, e, name, labels); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// metricSeries is the series of metric name whose label values begin with
// labels, in the order of the label names; nil when there is none.
func metricSeries(t *testing.T, e *env, name string, labels []string) *dto.Metric {
	t.Helper()
	families, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(labels) || l.GetValue() != labels[i] {
					continue series
				}
			}
			return m
		}
	}
	return nil
}

// TestRetryAfterPastMaxPolling: a broker whose "in progress" asks to be
// polled again in an hour does not hold the operation past the maximum
// polling duration: it is failed (and orphan-mitigated) at the deadline.
func TestRetryAfterPastMaxPolling(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.maxPolling = 2 * time.Second })
	fake := e.registerFake(osbtest.WithRetryAfter(time.Hour))
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{NeverFinishes: true, Times: 1})
	fake.Fail(osbtest.VerbBind, osbtest.Failure{NeverFinishes: true, Times: 1})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready after its first provision timed out", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready after its first bind timed out", bindingReady)
	if n, m := fake.Count(osbtest.VerbDeprovision), fake.Count(osbtest.VerbUnbind); n != 1 || m != 1 {
		t.Errorf("%d deprovisions and %d unbinds, want the timed-out provision and bind orphan-mitigated", n, m)
	}
}

// TestMaxPollingDuration: operations that never finish are failed at the
// platform's maximum polling duration: a provision and a bind with
// orphan mitigation, a deprovision sent again until it succeeds.
func TestMaxPollingDuration(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.maxPolling = time.Second })
	fake := e.registerFake(osbtest.WithPolls(0), osbtest.WithRetryAfter(-1))
	ctx := context.Background()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{NeverFinishes: true, Times: 1})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	if fake.Count(osbtest.VerbDeprovision) != 1 {
		t.Errorf("%d deprovisions: the timed-out provision was not orphan-mitigated", fake.Count(osbtest.VerbDeprovision))
	}
	if !hasMessage(t, e, in.ID, "maximum polling duration (1s)") {
		t.Error("the history does not say the provision ran past the maximum polling duration")
	}

	fake.Fail(osbtest.VerbBind, osbtest.Failure{NeverFinishes: true, Times: 1})
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	if fake.Count(osbtest.VerbUnbind) != 1 {
		t.Errorf("%d unbinds: the timed-out bind was not orphan-mitigated", fake.Count(osbtest.VerbUnbind))
	}
	if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })

	// A deprovision that never finishes is failed at the maximum and sent
	// again — the broker answers the repeated DELETE with the same
	// operation, as the spec requires — never forgotten.
	before := fake.Count(osbtest.VerbDeprovision)
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{NeverFinishes: true, Times: 1})
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	got := e.waitInstance(in.ID, "deprovisioned again", func(in *catalog.Instance) bool {
		return fake.Count(osbtest.VerbDeprovision)-before >= 2 && retryOf(in.Status.Retries, catalog.OperationDeprovision).Failures >= 1
	})
	if got.Status.LastError == "" || !strings.Contains(got.Status.LastError, "maximum polling duration") {
		t.Errorf("last error %q does not say the deprovision ran past the maximum polling duration", got.Status.LastError)
	}
	if _, err := e.store.UpdateInstanceMeta(ctx, in.ID, 0, func(m *catalog.Meta) error {
		m.Annotations = map[string]string{controller.AbandonAnnotation: "true"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
}

func hasMessage(t *testing.T, e *env, id, part string) bool {
	t.Helper()
	events, err := e.store.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if strings.Contains(ev.Message, part) {
			return true
		}
	}
	return false
}

// TestAbandonWhileDeleting: a binding and an instance whose deletion the
// broker keeps refusing are removed without the broker once abandoned.
func TestAbandonWhileDeleting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	fake.Fail(osbtest.VerbUnbind, osbtest.Failure{Status: 500})
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 500})
	if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitBinding(b.ID, "failing to unbind", func(b *catalog.Binding) bool {
		return retryOf(b.Status.Retries, catalog.OperationUnbind).Failures >= 2
	})
	if _, err := e.store.UpdateBindingMeta(ctx, b.ID, 0, func(m *catalog.Meta) error {
		m.Annotations = map[string]string{controller.AbandonAnnotation: "true"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })
	if len(fake.Bindings()) != 1 {
		t.Errorf("the abandoned binding is not left at the broker: %v", fake.Bindings())
	}

	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitInstance(in.ID, "failing to deprovision", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, catalog.OperationDeprovision).Failures >= 2
	})
	if _, err := e.store.UpdateInstanceMeta(ctx, in.ID, 0, func(m *catalog.Meta) error {
		m.Annotations = map[string]string{controller.AbandonAnnotation: "true"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	if len(fake.Instances()) != 1 {
		t.Errorf("the abandoned instance is not left at the broker: %v", fake.Instances())
	}
}

// TestGoneRecorded: a 410 to unbind and deprovision is recorded as the
// broker's answer.
func TestGoneRecorded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	fake.Fail(osbtest.VerbUnbind, osbtest.Failure{Status: 410, Body: "{}", Times: 1})
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 410, Body: "{}", Times: 1})
	if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	for _, id := range []string{b.ID, in.ID} {
		if !hasMessage(t, e, id, "410 Gone") {
			t.Errorf("object %s: the history does not say the broker answered 410 Gone", id)
		}
	}
}
