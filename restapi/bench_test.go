package restapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkRegisterBroker100x10 registers a broker whose catalogue has 100
// services of 10 plans each: POST /brokers answers once the catalogue is
// fetched and stored.
func BenchmarkRegisterBroker100x10(b *testing.B) {
	bb := setup(b)
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		fake := osbtest.New(b, osbtest.WithCatalog(osbtest.GenerateCatalog(100, 10)))
		b.StartTimer()
		start := time.Now()
		r := bb.do(bb.admin, "POST", "/brokers", map[string]any{"name": fmt.Sprintf("big-%d", i), "url": fake.URL()})
		total += time.Since(start)
		if r.status != http.StatusCreated || r.body["status"].(map[string]any)["servicePlanCount"] != float64(1000) {
			b.Fatalf("register: %d %.300s", r.status, r.raw)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/register")
}

// BenchmarkListPlans1000 lists a marketplace of 1,000 plans in one page.
func BenchmarkListPlans1000(b *testing.B) {
	bb := setup(b)
	fake := osbtest.New(b, osbtest.WithCatalog(osbtest.GenerateCatalog(100, 10)))
	bb.must(http.StatusCreated, bb.do(bb.admin, "POST", "/brokers", map[string]any{"name": "big", "url": fake.URL()}))
	if n := len(bb.do(bb.admin, "GET", "/serviceplans?limit=1000", nil).items()); n != 1000 {
		b.Fatalf("%d plans listed", n)
	}
	// A plain client: the response is read whole, as a client would, but
	// not validated against the OpenAPI document (that is the tests' job).
	client := &http.Client{}
	req, _ := http.NewRequest("GET", bb.url+"/serviceplans?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+bb.admin)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(start))
		if res.StatusCode != http.StatusOK || n < 1000*500 {
			b.Fatalf("list: %d, %d bytes", res.StatusCode, n)
		}
	}
	reportLatency(b, lat)
}

// BenchmarkCreateInstances creates instances through the API from 16
// clients at once.
func BenchmarkCreateInstances(b *testing.B) {
	bb := setup(b)
	bb.registerBindery("bindery")
	b.ResetTimer()
	start := time.Now()
	createMany(b, bb, b.N, "/instances", instanceBody)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}

// BenchmarkCreate100k creates 100,000 instances and then a binding of
// each through the API from 16 clients at once (`make bench-scale`), and
// reports the rate of each and the catalog's size on disk per object.
// CREATE_BENCH_N sets another count, for a quicker look:
//
//	CREATE_BENCH_N=10000 go test -run '^$' -bench Create100k -benchtime 1x ./restapi/
func BenchmarkCreate100k(b *testing.B) {
	n := 100000
	if s := os.Getenv("CREATE_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("CREATE_BENCH_N=%q: want a count of at least 100", s)
		}
	}
	for b.Loop() {
		bb := setup(b)
		bb.registerBindery("bindery")
		start := time.Now()
		self0, pg0 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
		createMany(b, bb, n, "/instances", instanceBody)
		instances := time.Since(start)
		createMany(b, bb, n, "/bindings", func(i int64) string {
			return fmt.Sprintf(`{"name":"app-%d","namespace":"bench","spec":{"instanceRef":{"name":"db-%d"}}}`, i, i)
		})
		all := time.Since(start)
		self1, pg1 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
		b.ReportMetric(float64(n)/instances.Seconds(), "instances/s")
		b.ReportMetric(float64(n)/(all-instances).Seconds(), "bindings/s")
		b.ReportMetric(float64(2*n)/all.Seconds(), "objects/s")
		// The CPU each object cost, which other work on the machine moves
		// less than the rates: PostgreSQL's (the backends of the test's
		// database), and this process's (the server and its 16 clients).
		var pg time.Duration
		for pid, t := range pg1 {
			pg += t - pg0[pid] // a backend that came meanwhile counts whole
		}
		b.ReportMetric(float64(pg.Microseconds())/1000/float64(2*n), "pg-cpu-ms/object")
		b.ReportMetric(float64((self1-self0).Microseconds())/1000/float64(2*n), "process-cpu-ms/object")
		var bytes int64
		if err := bb.pool.QueryRow(context.Background(), `SELECT sum(pg_total_relation_size(c.oid))
			FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'catalog' AND c.relkind IN ('r', 'm')`).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bytes)/float64(2*n), "catalog-bytes/object")
	}
}

func instanceBody(i int64) string {
	return fmt.Sprintf(`{"name":"db-%d","namespace":"bench","labels":{"team":"t%d"},"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, i, i%100)
}

// createMany POSTs n bodies (body(1) … body(n)) to path from 16 clients.
func createMany(b *testing.B, bb *bundle, n int, path string, body func(int64) string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				req, _ := http.NewRequest("POST", bb.url+path, strings.NewReader(body(i)))
				req.Header.Set("Authorization", "Bearer "+bb.admin)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusCreated {
					b.Errorf("POST %s: %d", path, res.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
