package controller_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkHostileBroker is the attack that grew a database from 52 to
// 663 MB in 75 s: 8 instances whose broker answers every provision with
// 500 and a description that changes every time, with the engine's
// default backoff, for 75 s (HOSTILE_N, HOSTILE_WINDOW). Two brokers: one
// whose descriptions are 4 MiB (past the bound answers are read to), one
// whose are 60 KiB (read, cut and stored). It reports the live data the
// instances added, per instance (pgstattuple: live row versions of the
// catalog's tables, their TOAST and their indexes), in all and in the
// change feed, the instances and the history; then, once they are
// deleted, what is left per instance (the feed keeps their changes until
// it is pruned), and the provisions that reached the broker per instance.
//
//	go test -run '^$' -bench HostileBroker -benchtime 1x ./controller/
func BenchmarkHostileBroker(b *testing.B) {
	window, n := 75*time.Second, 8
	if s := os.Getenv("HOSTILE_WINDOW"); s != "" {
		window, _ = time.ParseDuration(s)
	}
	if s := os.Getenv("HOSTILE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for _, size := range []int{4_000_000, 60 << 10} {
		b.Run(fmt.Sprintf("description-%dB", size), func(b *testing.B) {
			for range b.N {
				hostile(b, window, n, size)
			}
		})
	}
}

func hostile(b *testing.B, window time.Duration, n, size int) {
	e := setup(b, func(o *engineOptions) { o.retryBase, o.retryCap, o.workers = 0, 0, 8 })
	fake := e.registerFake()
	raw := make([]byte, size*3/4+3)
	_, _ = rand.Read(raw)
	text := base64.StdEncoding.EncodeToString(raw)[:size]
	var attempt atomic.Int64
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 500, Describe: func() string {
		// The words change at the start, where no cut can fold them.
		return fmt.Sprintf("failure %d: ", attempt.Add(1)) + text
	}})
	before := pgtest.LiveBytes(b, e.pool, "catalog")
	var ids []string
	for i := range n {
		ids = append(ids, e.createInstance(fmt.Sprintf("victim-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil).ID)
	}
	time.Sleep(window)
	during := pgtest.LiveBytes(b, e.pool, "catalog")
	provisions := fake.Count(osbtest.VerbProvision)
	ctx := context.Background()
	for _, id := range ids {
		if _, err := e.store.DeleteInstance(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		e.waitGone("instance "+id, func() error { _, err := e.store.GetInstance(ctx, id); return err })
	}
	deleted := pgtest.LiveBytes(b, e.pool, "catalog")
	added := func(after map[string]int64, table string) float64 {
		var d int64
		for t, v := range after {
			if table == "" || t == table {
				d += v - before[t]
			}
		}
		return float64(d) / float64(n) / (1 << 10)
	}
	b.ReportMetric(float64(provisions)/float64(n), "provisions/instance")
	b.ReportMetric(added(during, ""), "live-KiB/instance")
	b.ReportMetric(added(during, "changes"), "feed-KiB/instance")
	b.ReportMetric(added(during, "instances"), "instances-KiB/instance")
	b.ReportMetric(added(during, "events"), "history-KiB/instance")
	b.ReportMetric(added(deleted, ""), "after-delete-KiB/instance")
	var feed int64
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.changes c JOIN unnest($1::uuid[]) i(id) ON c.object_id = i.id`, ids).Scan(&feed); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(feed)/float64(n), "feed-rows/instance")
}
