package restapi_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkCreateInstanceLatencyQuota is BenchmarkCreateInstanceLatency
// under quotas that leave room: a default quota of 100 instances, the
// instances spread over namespaces of 50 (each creation takes its
// namespace's lock and counts up to 50); and one namespace holding 500,
// then 5,000, instances under a quota of 10,000 more (each creation counts
// them all, those the benchmark made included).
func BenchmarkCreateInstanceLatencyQuota(b *testing.B) {
	b.Run("default=100", func(b *testing.B) {
		bb := setup(b)
		bb.registerBindery("bindery")
		setQuota(b, bb, "", 100)
		createLatency(b, bb, func(i int) string { return fmt.Sprintf("bench-%d", (i+50)/50) })
	})
	for _, used := range []int{500, 5000} {
		b.Run(fmt.Sprintf("namespace=%d,used=%d", used+10000, used), func(b *testing.B) {
			bb := setup(b)
			bb.registerBindery("bindery")
			createMany(b, bb, used, "/instances", instanceBody)
			setQuota(b, bb, "bench", used+10000)
			createLatency(b, bb, func(int) string { return "bench" })
		})
	}
}

func setQuota(b *testing.B, bb *bundle, ns string, instances int) {
	if _, err := bb.store.SetQuota(context.Background(), &catalog.Quota{Namespace: ns, Instances: &instances, PaidPlans: true}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQuotaCheck measures what the quota check adds to a REST
// creation, free of the machine's load drifting between runs: each
// iteration creates one instance in a namespace no quota limits and one
// in a namespace under a quota with room, both holding the same number of
// instances (used), on one server, and reports the median latency of
// each, their difference (added-p50-us), and PostgreSQL's CPU per
// creation in each (the machine's load moves it less than the latency).
func BenchmarkQuotaCheck(b *testing.B) {
	for _, used := range []int{50, 5000} {
		b.Run(fmt.Sprintf("used=%d", used), func(b *testing.B) {
			bb := setup(b)
			bb.registerBindery("bindery")
			for _, ns := range []string{"free", "limited"} {
				createMany(b, bb, used, "/instances", func(i int64) string {
					return fmt.Sprintf(`{"name":"db-%d","namespace":%q,"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, i, ns)
				})
			}
			setQuota(b, bb, "limited", used+1_000_000)
			post := poster(b, bb)
			for i := range 20 {
				post(fmt.Sprintf("warm-%d", i), "free")
				post(fmt.Sprintf("warm-%d", i), "limited")
			}
			var free, limited []time.Duration
			var cpu [2]time.Duration // PostgreSQL's, free and limited
			timed := func(name string, q int) time.Duration {
				pg0 := pgtest.BackendsCPU(b, bb.pool)
				took := post(name, [2]string{"free", "limited"}[q])
				for pid, t := range pgtest.BackendsCPU(b, bb.pool) {
					cpu[q] += t - pg0[pid]
				}
				return took
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				name := fmt.Sprintf("lat-%d", i)
				// Alternate which goes first, so that neither always
				// follows the other's commit.
				if i%2 == 0 {
					free = append(free, timed(name, 0))
					limited = append(limited, timed(name, 1))
				} else {
					limited = append(limited, timed(name, 1))
					free = append(free, timed(name, 0))
				}
			}
			b.StopTimer()
			f, l := median(free), median(limited)
			b.ReportMetric(float64(f.Microseconds())/1000, "free-p50-ms")
			b.ReportMetric(float64(l.Microseconds())/1000, "quota-p50-ms")
			b.ReportMetric(float64((l - f).Microseconds()), "added-p50-us")
			n := float64(len(free))
			b.ReportMetric(float64(cpu[0].Microseconds())/n, "free-pg-cpu-us/op")
			b.ReportMetric(float64(cpu[1].Microseconds())/n, "quota-pg-cpu-us/op")
		})
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
