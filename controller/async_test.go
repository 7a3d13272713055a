package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// feedRows counts the change-feed rows of an object.
func feedRows(t *testing.T, e *env, id string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM catalog.changes WHERE object_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAsyncFailureBacksOff: asynchronous provisions that fail a second
// after they were accepted are retried with the status-held backoff, which
// counts every request the attempt cost (its polls, twice for the orphan
// mitigation); the next attempt is not polled from the shortest delay; and
// each attempt writes a handful of changes, not one per poll.
func TestAsyncFailureBacksOff(t *testing.T) {
	t.Parallel()
	const window = 8 * time.Second
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = 100*time.Millisecond, 10*time.Second })
	fake := e.registerFake()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{AsyncFailed: true, After: time.Second, Description: "the backend gave up"})
	var ins []*catalog.Instance
	for i := range 3 {
		ins = append(ins, e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	got := e.waitInstance(ins[0].ID, "failed once", func(in *catalog.Instance) bool {
		return retryOf(in.Status.Retries, catalog.OperationProvision).Failures >= 1
	})
	r := retryOf(got.Status.Retries, catalog.OperationProvision)
	if r.Requests < 4 {
		t.Errorf("the failed attempt counts %d requests; it cost a provision, polls and an orphan-mitigating deprovision", r.Requests)
	}
	if !strings.Contains(got.Status.LastError, "the backend gave up") || !hasMessage(t, e, got.ID, "the backend gave up") {
		t.Errorf("the broker's description is not shown: last error %q", got.Status.LastError)
	}
	// Ready says what the broker said and when the next attempt is, as
	// long as it waits for it.
	if c := condition(got.Status.Conditions, catalog.ConditionReady); c.Status != catalog.ConditionFalse ||
		(r.NextAttempt.After(time.Now()) && (!strings.Contains(c.Message, "the backend gave up") || !strings.Contains(c.Message, "next attempt at"))) {
		t.Errorf("Ready after a failed asynchronous provision says %s %q", c.Reason, c.Message)
	}
	time.Sleep(window - time.Since(ins[0].CreationTimestamp))
	for _, in := range ins {
		var requests []osbtest.Request
		for _, r := range fake.Requests() {
			if strings.Contains(r.Path, in.Spec.ExternalID) {
				requests = append(requests, r)
			}
		}
		// A provision, two polls, a deprovision; after the backoff of 6
		// requests (3.2 s less jitter), the next provision, and its first
		// poll as long after it (not half a second), its deprovision.
		if len(requests) > 7 {
			t.Errorf("instance %s: %d broker requests in %s", in.Name, len(requests), window)
		}
		var puts []time.Time
		for _, r := range requests {
			if r.Verb == osbtest.VerbProvision {
				puts = append(puts, r.Time)
			}
			if len(puts) == 2 && r.Verb == osbtest.VerbLastOperation {
				if gap := r.Time.Sub(puts[1]); gap < 3*time.Second {
					t.Errorf("instance %s: the second attempt was polled %s after it started, from the shortest delay", in.Name, gap)
				}
				break
			}
		}
		if len(puts) >= 2 && puts[1].Sub(puts[0]) < 2*time.Second {
			t.Errorf("instance %s: the second attempt came %s after the first", in.Name, puts[1].Sub(puts[0]))
		}
		// Per attempt: provision in flight, accepted, failed and
		// orphan-mitigated (one write); and the object's creation.
		if rows := feedRows(t, e, in.ID); rows > 7 {
			t.Errorf("instance %s: %d change-feed rows in %s", in.Name, rows, window)
		}
	}
}

// TestAsyncFailureCountedOnce: an asynchronous provision that ended
// failed, orphan-mitigated at once, is one failure costing its requests
// once. The failure used to be applied to the instance in memory and
// then again by the write that carried it, so that its failures and
// requests were counted twice and the next attempt, meant for a couple of
// minutes later with the default curve, came after the 20-minute cap.
func TestAsyncFailureCountedOnce(t *testing.T) {
	t.Parallel()
	const base = 10 * time.Second
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = base, time.Hour })
	fake := e.registerFake(osbtest.WithPolls(0), osbtest.WithRetryAfter(0))
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{AsyncFailed: true, Description: "the backend gave up", Times: 1})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	got := e.waitInstance(in.ID, "orphan-mitigated", func(in *catalog.Instance) bool {
		return !in.Status.OrphanMitigationInProgress && retryOf(in.Status.Retries, catalog.OperationProvision).Failures >= 1
	})
	r := retryOf(got.Status.Retries, catalog.OperationProvision)
	polls := len(callsFor(fake, osbtest.VerbLastOperation, in.Spec.ExternalID))
	if want := 2 * (1 + polls); r.Failures != 1 || r.Requests != want {
		t.Errorf("one failed attempt (a provision, %d polls, orphan-mitigated) counted as %d failures and %d requests; want 1 and %d",
			polls, r.Failures, r.Requests, want)
	}
	// The wait is the backoff's for those requests, less its jitter.
	last := fake.Requests()[len(fake.Requests())-1].Time
	if wait, want := r.NextAttempt.Sub(last), base<<(2*(1+polls)-1); wait > want || wait < want*7/10 {
		t.Errorf("the next attempt is %s after the deprovision; want %s less at most a fifth", wait, want)
	}
}

// TestInProgressPollsWriteNothing: an operation that never finishes,
// whose broker describes its progress anew on every poll, costs no
// change-feed row per poll.
func TestInProgressPollsWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithRetryAfter(-1))
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{NeverFinishes: true})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	time.Sleep(7 * time.Second)
	polls := len(callsFor(fake, osbtest.VerbLastOperation, in.Spec.ExternalID))
	if polls < 3 {
		t.Fatalf("%d polls in 7 s", polls)
	}
	if polls > 5 {
		t.Errorf("%d polls in 7 s: at 0.5, 1, 2, 4 s after the provision at most", polls)
	}
	// Created, provision in flight, accepted: the broker's word on
	// progress waits for the operation's first minute.
	if rows := feedRows(t, e, in.ID); rows > 3 {
		t.Errorf("%d change-feed rows for %d polls", rows, polls)
	}
}

// TestRetryAfterObeyed: a broker's Retry-After: 30 on "in progress" is
// obeyed to the second. (It takes half a minute: the figure is the
// broker's.)
func TestRetryAfterObeyed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithRetryAfter(30 * time.Second))
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{NeverFinishes: true})
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	waitFor(t, 45*time.Second, "two polls", func() bool { return len(callsFor(fake, osbtest.VerbLastOperation, in.Spec.ExternalID)) >= 2 })
	polls := callsFor(fake, osbtest.VerbLastOperation, in.Spec.ExternalID)
	if gap := polls[1].Time.Sub(polls[0].Time); gap < 30*time.Second || gap > 31*time.Second {
		t.Errorf("the poll after Retry-After: 30 came %s later", gap)
	}
	// The broker records a poll as it answers; the engine counts it once
	// it has read the answer, a moment later.
	waitFor(t, 5*time.Second, "the second poll counted", func() bool {
		return counter(t, e, "bindery_controller_broker_calls_total", "ok", "last_operation") >= 2
	})
}

// maintenanceCatalog is the default catalogue with maintenance_info
// version on its sync plan, ids kept from services.
func maintenanceCatalog(services []osbtest.Service, version string) []osbtest.Service {
	out := make([]osbtest.Service, len(services))
	copy(out, services)
	out[0].Plans = append([]osbtest.Plan(nil), services[0].Plans...)
	for i := range out[0].Plans {
		if out[0].Plans[i].Name == osbtest.PlanSync {
			out[0].Plans[i].MaintenanceInfo = &osbtest.MaintenanceInfo{Version: version}
		}
	}
	return out
}

// TestMaintenanceInfoConflict: a broker that answers
// MaintenanceInfoConflict has its catalogue fetched within a second; the
// provision is sent again with the new version (long before its backoff
// would allow), an update is not and says a maintenance upgrade is
// available.
func TestMaintenanceInfoConflict(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.retryBase, o.retryCap = time.Minute, time.Hour })
	base := osbtest.DefaultCatalog()
	fake := e.registerFake(osbtest.WithCatalog(maintenanceCatalog(base, "1.0.0")))
	ctx := context.Background()
	fake.SetCatalog(maintenanceCatalog(base, "2.0.0"))
	fetches := fake.Count(osbtest.VerbCatalog)
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	waitFor(t, 10*time.Second, "the provision refused", func() bool { return fake.Count(osbtest.VerbProvision) >= 1 })
	refused := time.Now()
	waitFor(t, 5*time.Second, "the catalogue fetched", func() bool { return fake.Count(osbtest.VerbCatalog) > fetches })
	if d := time.Since(refused); d > time.Second {
		t.Errorf("the catalogue was fetched %s after the conflict", d)
	}
	got := e.waitInstance(in.ID, "Ready", instanceReady)
	if v := got.Status.ExternalProperties.MaintenanceInfoVersion; v != "2.0.0" {
		t.Errorf("provisioned with maintenance_info %q, want 2.0.0", v)
	}
	if n := fake.Count(osbtest.VerbProvision); n != 2 {
		t.Errorf("%d provisions, want the refused one and one with the new version", n)
	}

	// Bindery learns of 3.0.0, the broker moves on to 4.0.0: the upgrade
	// the user asks for is refused, and not retried.
	fake.SetCatalog(maintenanceCatalog(base, "3.0.0"))
	if _, err := e.store.Relist(ctx, brokerID(t, e, "fake")); err != nil {
		t.Fatal(err)
	}
	fake.SetCatalog(maintenanceCatalog(base, "4.0.0"))
	fetches = fake.Count(osbtest.VerbCatalog)
	if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.UpdateRequests++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = e.waitInstance(in.ID, "failed", failedFor)
	if c := condition(got.Status.Conditions, catalog.ConditionFailed); !strings.Contains(c.Message, "maintenance upgrade is available") {
		t.Errorf("the failed update says %q", c.Message)
	}
	waitFor(t, 5*time.Second, "the catalogue fetched", func() bool { return fake.Count(osbtest.VerbCatalog) > fetches })
	time.Sleep(time.Second)
	if n := fake.Count(osbtest.VerbUpdate); n != 1 {
		t.Errorf("%d updates: the refused upgrade was sent again", n)
	}
}
