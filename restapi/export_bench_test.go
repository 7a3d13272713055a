package restapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkExport100k exports 100,000 instances (GET /export/instances)
// from the REST API, served in this process, to a client that reads as
// fast as it can, and compares with reading them as pages of 1,000.
// Reported: the process's Go heap at rest (idle), its peak during the
// exports above that (sampled every millisecond) and its resident peak
// above its resident figure at rest (VmHWM, which includes the client's
// reading), the slowest first byte, the export's objects per second and
// the process's and PostgreSQL's CPU per exported object, and the pages' objects per
// second. EXPORT_BENCH_N sets another count:
//
//	EXPORT_BENCH_N=20000 go test -run '^$' -bench Export100k -benchtime 1x ./restapi/
func BenchmarkExport100k(b *testing.B) {
	n := 100000
	if s := os.Getenv("EXPORT_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("EXPORT_BENCH_N=%q: want a count of at least 100", s)
		}
	}
	bb := setup(b)
	began := time.Now()
	createManyInstances(b, bb.store, n)
	b.Logf("%d instances created in %s", n, time.Since(began).Round(time.Second))
	bb.must(http.StatusOK, bb.do(bb.admin, "GET", "/instances?limit=1", nil))
	// A plain client: read as a client would, but not validated against
	// the OpenAPI document (that is the tests' job).
	client := &http.Client{}
	get := func(path string) *http.Response {
		req, _ := http.NewRequest("GET", bb.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+bb.admin)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s", path, res.Status)
		}
		return res
	}

	// At rest: what the set-up left is collected and given back.
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(time.Second)
	idleHeap, idleRSS := heapBytes(), rssMB(b, "VmRSS")
	resetPeak(b)
	peak := sampleHeap()
	var firstByte, all time.Duration
	cpu0, pg0 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, bb.pool)
	exports := 0
	for b.Loop() {
		start := time.Now()
		res := get("/export/instances")
		r := bufio.NewReaderSize(res.Body, 64<<10)
		if _, err := r.ReadByte(); err != nil {
			b.Fatal(err)
		}
		firstByte = max(firstByte, time.Since(start))
		lines := 1
		for {
			line, err := r.ReadSlice('\n')
			if err == io.EOF && len(line) == 0 {
				break
			}
			if err != nil && err != bufio.ErrBufferFull {
				b.Fatal(err)
			}
			if err == nil {
				lines++
			}
		}
		res.Body.Close()
		all += time.Since(start)
		if lines-1 != n {
			b.Fatalf("%d instances exported, want %d", lines-1, n)
		}
		exports++
	}
	cpu, pg1 := pgtest.SelfCPU()-cpu0, pgtest.BackendsCPU(b, bb.pool)
	var pg time.Duration
	for pid, t := range pg1 {
		pg += t - pg0[pid] // a backend that came meanwhile counts whole
	}
	peakHeap := peak()
	b.ReportMetric(float64(idleHeap)/(1<<20), "idle-heap-MB")
	b.ReportMetric(float64(peakHeap-idleHeap)/(1<<20), "peak-heap-above-idle-MB")
	b.ReportMetric(rssMB(b, "VmHWM")-idleRSS, "peak-rss-above-idle-MB")
	b.ReportMetric(float64(firstByte.Microseconds())/1000, "first-byte-max-ms")
	b.ReportMetric(float64(n*exports)/all.Seconds(), "objects/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n*exports), "process-cpu-us/object")
	b.ReportMetric(float64(pg.Microseconds())/float64(n*exports), "pg-cpu-us/object")

	// The same objects read as pages of 1,000, each its own query.
	start := time.Now()
	listed, cont := 0, ""
	for {
		res := get("/instances?limit=1000&continue=" + url.QueryEscape(cont))
		raw, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		listed += strings.Count(string(raw), `"generation":`)
		cont = ""
		if i := strings.LastIndex(string(raw), `"continue":"`); i >= 0 {
			cont, _, _ = strings.Cut(string(raw[i+len(`"continue":"`):]), `"`)
		}
		if cont == "" {
			break
		}
	}
	if listed != n {
		b.Fatalf("%d instances listed in pages, want %d", listed, n)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "pages-objects/s")
}

// createManyInstances records n instances in the catalog directly, from
// 16 writers, in 10 namespaces, each with labels, annotations and
// parameters.
func createManyInstances(b *testing.B, store *catalog.Store, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small",
					Parameters: []byte(`{"size":"10Gi","backups":true}`)}}
				in.Name, in.Namespace = fmt.Sprintf("db-%06d", i), fmt.Sprintf("team-%d", i%10)
				in.Labels = map[string]string{"app": "bench", "team": fmt.Sprintf("t%d", i%100)}
				in.Annotations = map[string]string{"owner": fmt.Sprintf("person-%d@example.com", i%1000)}
				if _, err := store.CreateInstance(ctx, in); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// heapBytes is the memory of the Go heap's objects, live and not yet
// swept.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap samples heapBytes every millisecond until the function it
// returns is called, which returns the largest sample.
func sampleHeap() func() uint64 {
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, heapBytes())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak
	}
}

// resetPeak resets this process's VmHWM to its resident size now.
func resetPeak(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

// rssMB reads field (VmRSS, VmHWM) of this process's /proc status, in MB.
func rssMB(b *testing.B, field string) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
