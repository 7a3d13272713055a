package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// startReplica runs another engine on e's catalog until the returned stop.
func (e *env) startReplica() (stop func()) {
	e.t.Helper()
	engine, err := controller.New(controller.Config{Store: e.store, Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
		BrokerTimeout: e.opts.timeout, Workers: e.opts.workers,
		RetryBase: e.opts.retryBase, RetryCap: e.opts.retryCap, BreakerFailures: e.opts.breakerFailures})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("replica: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// TestReplicasShareAndTakeOver: two engines on one catalog each work on
// the objects of the shards they own, so no object reaches the broker
// twice; when one stops, the other takes over its shards and makes the
// objects created since Ready.
func TestReplicasShareAndTakeOver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithRetryAfter(0))
	e.startReplica()
	var ids []string
	create := func(from, to int) {
		for i := from; i < to; i++ {
			in := e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil)
			ids = append(ids, in.ID)
		}
		for _, id := range ids[from:to] {
			e.waitInstance(id, "Ready", instanceReady)
		}
	}
	create(0, 30)
	var owners int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(DISTINCT pid) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = 1650749050 AND objsubid = 2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&owners); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d engines own shards", owners)

	// The first engine stops; the objects created since in its shards
	// wait for the other's next probe.
	e.stop()
	start := time.Now()
	create(30, 60)
	t.Logf("the last 30 Ready %s after the first engine stopped", time.Since(start))

	provisions := map[string]int{}
	for _, r := range fake.Requests() {
		if r.Verb == osbtest.VerbProvision {
			provisions[r.Path]++
		}
	}
	if len(provisions) != len(ids) {
		t.Errorf("%d instances reached the broker, want %d", len(provisions), len(ids))
	}
	for path, n := range provisions {
		if n != 1 {
			t.Errorf("%s provisioned %d times", path, n)
		}
	}
}
