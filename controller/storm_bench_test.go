package controller_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkFailureStorm: 100 instances whose broker fails for a minute,
// with the engine's default backoff (1 s doubling to 20 min) and
// breaker. It reports, per failing object, the broker requests of that
// first minute (every one: provisions, polls, orphan-mitigation deletes
// and their polls), and the history and change-feed rows written; and the
// CPU of this process (the engine, with the fake broker beside it) and of
// the PostgreSQL backends serving it, during the storm and idle, in cores.
// The storms:
//
//   - all-500: the broker answers 500 to everything but its catalogue;
//   - provision-500: only to provisions (each failed provision is then
//     orphan-mitigated by a deprovision that succeeds);
//   - async-fail: provisions are accepted (202) and fail 3 s later;
//     deprovisions are asynchronous too, polled until done;
//   - async-never: provisions are accepted and never finish;
//   - async-retry-after: provisions are accepted and fail 20 s later, and
//     every "in progress" answer says Retry-After: 10.
//
// With STORM_LATE set (say 11m), each storm also runs that long and
// reports the requests per object of its last minute.
//
//	go test -run '^$' -bench FailureStorm -benchtime 1x ./controller/
func BenchmarkFailureStorm(b *testing.B) {
	window := time.Minute
	if s := os.Getenv("STORM_WINDOW"); s != "" {
		window, _ = time.ParseDuration(s)
	}
	var late time.Duration
	if s := os.Getenv("STORM_LATE"); s != "" {
		late, _ = time.ParseDuration(s)
	}
	for _, tc := range []stormMode{
		{name: "all-500", plan: osbtest.PlanSync, failures: map[osbtest.Verb]osbtest.Failure{
			osbtest.VerbProvision: fail500, osbtest.VerbDeprovision: fail500, osbtest.VerbLastOperation: fail500}},
		{name: "provision-500", plan: osbtest.PlanSync, failures: map[osbtest.Verb]osbtest.Failure{osbtest.VerbProvision: fail500}},
		{name: "async-fail", plan: osbtest.PlanAsync, failures: map[osbtest.Verb]osbtest.Failure{
			osbtest.VerbProvision: {AsyncFailed: true, After: 3 * time.Second, Description: "the backend gave up"}}},
		{name: "async-never", plan: osbtest.PlanAsync, failures: map[osbtest.Verb]osbtest.Failure{
			osbtest.VerbProvision: {NeverFinishes: true}}},
		{name: "async-retry-after", plan: osbtest.PlanAsync, retryAfter: 10 * time.Second, failures: map[osbtest.Verb]osbtest.Failure{
			osbtest.VerbProvision: {AsyncFailed: true, After: 20 * time.Second, Description: "the backend gave up"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				storm(b, window, late, tc)
			}
		})
	}
}

var fail500 = osbtest.Failure{Status: 500, Description: "the backend is down"}

// stormMode is how the broker fails in a storm: on plan, with these
// failures, and Retry-After on its "in progress" answers (0: osbtest's
// default, 1 s).
type stormMode struct {
	name       string
	plan       string
	retryAfter time.Duration
	failures   map[osbtest.Verb]osbtest.Failure
}

func storm(b *testing.B, window, late time.Duration, mode stormMode) {
	const n = 100
	e := setup(b, func(o *engineOptions) { o.retryBase, o.retryCap, o.workers, o.breakerFailures = 0, 0, 8, 0 })
	var opts []osbtest.Option
	if mode.retryAfter > 0 {
		opts = append(opts, osbtest.WithRetryAfter(mode.retryAfter))
	}
	fake := e.registerFake(opts...)

	// Idle: 100 Ready instances.
	var idle []*catalog.Instance
	for i := range n {
		idle = append(idle, e.createInstance(fmt.Sprintf("idle-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil))
	}
	for _, in := range idle {
		e.waitInstance(in.ID, "Ready", instanceReady)
	}
	idleCPU := measureCPU(b, e, 10*time.Second)

	for v, f := range mode.failures {
		fake.Fail(v, f)
	}
	before := counts(b, e)
	requestsBefore := len(fake.Requests())
	for i := range n {
		e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, mode.plan, nil)
	}
	stormCPU := measureCPU(b, e, window)
	after := counts(b, e)
	requests := len(fake.Requests()) - requestsBefore
	perMinute := float64(time.Minute) / float64(window)
	b.ReportMetric(float64(requests)/n, "broker-requests/object")
	b.ReportMetric(float64(after.events-before.events)/n*perMinute, "history-rows/object/min")
	b.ReportMetric(float64(after.changes-before.changes)/n*perMinute, "feed-rows/object/min")
	b.ReportMetric(stormCPU.engine, "engine-cores-storm")
	b.ReportMetric(idleCPU.engine, "engine-cores-idle")
	b.ReportMetric(stormCPU.postgres, "pg-cores-storm")
	b.ReportMetric(idleCPU.postgres, "pg-cores-idle")
	if late > window+time.Minute {
		time.Sleep(late - window - time.Minute)
		last := len(fake.Requests())
		time.Sleep(time.Minute)
		b.ReportMetric(float64(len(fake.Requests())-last)/n, "late-requests/object/min")
	}
	for v := range mode.failures {
		fake.Clear(v)
	}
}

type rowCounts struct{ events, changes int }

// counts are the history rows (with folded repeats as one) and the
// change-feed rows written so far.
func counts(b *testing.B, e *env) rowCounts {
	var c rowCounts
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM catalog.events), (SELECT count(*) FROM catalog.changes)`).Scan(&c.events, &c.changes); err != nil {
		b.Fatal(err)
	}
	return c
}

type cpu struct{ engine, postgres float64 }

// measureCPU waits for d and returns the CPU used meanwhile, in cores: by
// this process (getrusage) and by the PostgreSQL backends connected to the
// test's database (/proc/PID/stat).
func measureCPU(b *testing.B, e *env, d time.Duration) cpu {
	self0 := pgtest.SelfCPU()
	pg0 := pgtest.BackendsCPU(b, e.pool)
	start := time.Now()
	time.Sleep(d)
	self1 := pgtest.SelfCPU()
	pg1 := pgtest.BackendsCPU(b, e.pool)
	wall := time.Since(start)
	var pg time.Duration
	for pid, t := range pg1 {
		pg += t - pg0[pid] // a backend that came meanwhile counts whole
	}
	return cpu{engine: float64(self1-self0) / float64(wall), postgres: float64(pg) / float64(wall)}
}
