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
	bb := setup(b)
	bb.registerBindery("bindery")
	createLatency(b, bb, func(i int) string { return "bench" })
}

// createLatency POSTs b.N instances one after the other, the i-th in
// namespace ns(i), and reports their latency and CPU.
func createLatency(b *testing.B, bb *bundle, ns func(int) string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	post := func(i int) time.Duration {
		body := fmt.Sprintf(`{"name":"lat-%d","namespace":%q,"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, i, ns(i))
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
	// Warm: connections, the store's catalogue cache, the token cache.
	for i := range 20 {
		post(-1 - i)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	self0, pg0 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
	for i := 0; b.Loop(); i++ {
		lat = append(lat, post(i))
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
