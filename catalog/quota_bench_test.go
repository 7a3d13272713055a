package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkAdmitInstance is the quota check alone, as the creating
// transaction runs it (catalog.admit_instance), in a namespace of 5,000
// instances: under no quota, and under a quota with room. It reports
// PostgreSQL's CPU per check (the machine's load moves it less than the
// latency).
func BenchmarkAdmitInstance(b *testing.B) {
	ctx := context.Background()
	s, pool := newPoolStore(b)
	fake := osbtest.New(b, osbtest.WithBasicAuth("u", "p"))
	registerIn(b, s, "", "fake", fake.URL())
	for _, ns := range []string{"free", "limited"} {
		for i := range 5000 {
			if _, err := s.CreateInstance(ctx, instanceOf(ns, fmt.Sprintf("db-%d", i), osbtest.PlanSync)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "limited", Instances: limit(1_000_000), PaidPlans: true}); err != nil {
		b.Fatal(err)
	}
	// The first creation under the quota counts the namespace once.
	if _, err := s.CreateInstance(ctx, instanceOf("limited", "first", osbtest.PlanSync)); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{"free", "limited"} {
		b.Run(ns, func(b *testing.B) { admitLoop(b, pool, ns) })
	}
}

func admitLoop(b *testing.B, pool *pgxpool.Pool, ns string) {
	ctx := context.Background()
	pg0 := pgtest.BackendsCPU(b, pool)
	for b.Loop() {
		// Its own transaction: the lock it may take goes with it.
		if _, err := pool.Exec(ctx, `SELECT catalog.admit_instance($1, NULL, false, true, NULL)`, ns); err != nil {
			b.Fatal(err)
		}
	}
	var pg time.Duration
	for pid, t := range pgtest.BackendsCPU(b, pool) {
		pg += t - pg0[pid]
	}
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N), "pg-cpu-us/op")
}
