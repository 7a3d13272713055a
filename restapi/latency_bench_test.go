package restapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkCreateInstanceLatency creates instances one at a time through
// the API, none limited by a quota, and reports the latency's median and
// 99th percentile and the CPU each creation costs: PostgreSQL's (the
// backends of the test's database) and this process's (the server and
// its client). BenchmarkCreateInstanceLatencyQuota is the same under
// quotas.
func BenchmarkCreateInstanceLatency(b *testing.B) {
	b.Run("one namespace", func(b *testing.B) {
		bb := setup(b)
		bb.registerBindery("bindery")
		createLatency(b, bb, func(int) string { return "bench" })
	})
	b.Run("namespaces of 50", func(b *testing.B) {
		bb := setup(b)
		bb.registerBindery("bindery")
		createLatency(b, bb, func(i int) string { return fmt.Sprintf("bench-%d", (i+50)/50) })
	})
}

// createLatency POSTs b.N instances one after the other, the i-th in
// namespace ns(i), and reports their latency and CPU.
func createLatency(b *testing.B, bb *bundle, ns func(int) string) {
	post := poster(b, bb)
	// Warm: connections, the store's catalogue cache, the token cache.
	for i := range 20 {
		post(fmt.Sprintf("lat-%d", -1-i), ns(-1-i))
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	self0, pg0 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
	for i := 0; b.Loop(); i++ {
		lat = append(lat, post(fmt.Sprintf("lat-%d", i), ns(i)))
	}
	b.StopTimer()
	self1, pg1 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
	var pg time.Duration
	for pid, t := range pg1 {
		pg += t - pg0[pid]
	}
	reportLatency(b, lat)
	b.ReportMetric(float64(pg.Microseconds())/float64(len(lat)), "pg-cpu-us/op")
	b.ReportMetric(float64((self1-self0).Microseconds())/float64(len(lat)), "process-cpu-us/op")
}

// poster returns a function that POSTs an instance of name in namespace
// ns, on one kept connection, and says how long the answer took.
func poster(b *testing.B, bb *bundle) func(name, ns string) time.Duration {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	return func(name, ns string) time.Duration {
		body := fmt.Sprintf(`{"name":%q,"namespace":%q,"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, name, ns)
		req, _ := http.NewRequest("POST", bb.url+"/instances", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bb.admin)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		took := time.Since(start)
		if res.StatusCode != http.StatusCreated {
			b.Fatalf("POST /instances: %d", res.StatusCode)
		}
		return took
	}
}
