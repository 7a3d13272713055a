package restapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// BenchmarkCreateInstanceLatencyQuota is BenchmarkCreateInstanceLatency
// under quotas that leave room: a default quota of 100 instances, the
// instances spread over namespaces of 50 (each creation takes its
// namespace's lock and counts up to 50); and one namespace holding 5,000
// instances under a quota of 10,000 (each counts 5,000).
func BenchmarkCreateInstanceLatencyQuota(b *testing.B) {
	b.Run("default=100", func(b *testing.B) {
		bb := setup(b)
		bb.registerBindery("bindery")
		setQuota(b, bb, "", 100)
		createLatency(b, bb, func(i int) string { return fmt.Sprintf("bench-%d", (i+50)/50) })
	})
	b.Run("namespace=10000,used=5000", func(b *testing.B) {
		bb := setup(b)
		bb.registerBindery("bindery")
		createMany(b, bb, 5000, "/instances", instanceBody)
		setQuota(b, bb, "bench", 10000)
		createLatency(b, bb, func(int) string { return "bench" })
	})
}

func setQuota(b *testing.B, bb *bundle, ns string, instances int) {
	if _, err := bb.store.SetQuota(context.Background(), &catalog.Quota{Namespace: ns, Instances: &instances, PaidPlans: true}); err != nil {
		b.Fatal(err)
	}
}
