package restapi_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/osbtest"
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	per := (b.N + 15) / 16
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"name":"db-%d","namespace":"bench","spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}}`, i)
				req, _ := http.NewRequest("POST", bb.url+"/instances", strings.NewReader(body))
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
					b.Errorf("create: %d", res.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
