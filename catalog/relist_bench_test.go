package catalog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bindery-dev/bindery/catalog"
)

// BenchmarkHugeCatalogue registers a broker whose catalogue is 28 MB (under
// the 32 MiB cap: 1,000 services of 10 plans, each plan with metadata and
// three parameter schemas) and, while that first fetch is under way, asks
// for 6 relists at once. It reports the peak increase of this process's
// resident memory over its figure before (VmHWM, reset first), the fetches
// that reached the broker (the 6 relists join one fetch after the first),
// and the time until all 7 answered. The broker serves the document from a
// file, so its bytes are not in this process's heap.
//
//	go test -run '^$' -bench HugeCatalogue -benchtime 1x ./catalog/
func BenchmarkHugeCatalogue(b *testing.B) {
	path := filepath.Join(b.TempDir(), "catalog.json")
	size := writeCatalogue(b, path, 1000, 10, 28<<20)
	var fetches atomic.Int64
	started := make(chan struct{}, 64)
	url := serveFile(b, path, func() {
		fetches.Add(1)
		started <- struct{}{}
	})
	for range b.N {
		s := newStore(b, catalog.WithBrokerTimeout(5*time.Minute))
		fetches.Store(0)
		base := settledRSS(b)
		begin := time.Now()
		br := register(b, s, "huge", url, "")
		var wg sync.WaitGroup
		errs := make(chan error, 7)
		relist := func() {
			if _, err := s.Relist(context.Background(), br.ID); err != nil {
				errs <- err
			}
		}
		wg.Go(relist) // the registration's fetch
		<-started
		for range 6 {
			wg.Go(relist)
		}
		wg.Wait()
		elapsed := time.Since(begin)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		peak := peakRSS(b)
		got, err := s.GetBroker(context.Background(), br.ID)
		if err != nil {
			b.Fatal(err)
		}
		if got.Status.ServicePlanCount != 10000 {
			b.Fatalf("plans stored: %d", got.Status.ServicePlanCount)
		}
		b.ReportMetric(float64(size)/(1<<20), "catalogue-MiB")
		b.ReportMetric(float64(peak-base)/(1<<20), "peak-rss-increase-MiB")
		b.ReportMetric(float64(fetches.Load()), "fetches")
		b.ReportMetric(elapsed.Seconds(), "seconds")
		for len(started) > 0 {
			<-started
		}
	}
}

// writeCatalogue writes a valid catalogue of services × plans padded to
// about size bytes, and returns its size.
func writeCatalogue(tb testing.TB, path string, services, plans, size int) int64 {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	// What a plan holds besides the padding, measured once.
	pad := max(size/(services*plans)-1200, 0)
	filler := strings.Repeat("x", pad/4)
	fmt.Fprint(w, `{"services":[`)
	for i := range services {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		svc := map[string]any{
			"id": uuid.NewString(), "name": fmt.Sprintf("huge-service-%d", i), "description": fmt.Sprintf("Service %d of a huge catalogue.", i),
			"bindable": true, "tags": []string{"huge", strconv.Itoa(i % 10)},
			"metadata": map[string]any{"displayName": fmt.Sprintf("Huge %d", i), "longDescription": filler},
		}
		raw, _ := json.Marshal(svc)
		fmt.Fprint(w, string(raw[:len(raw)-1]), `,"plans":[`)
		for j := range plans {
			if j > 0 {
				fmt.Fprint(w, ",")
			}
			schema := map[string]any{"parameters": map[string]any{
				"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
				"properties": map[string]any{
					"size":   map[string]any{"type": "integer", "minimum": 1, "maximum": 100, "description": filler},
					"region": map[string]any{"type": "string", "enum": []string{"eu", "us", "ap"}},
				},
			}}
			raw, _ := json.Marshal(map[string]any{
				"id": uuid.NewString(), "name": fmt.Sprintf("plan-%d", j), "description": fmt.Sprintf("Plan %d of service %d.", j, i),
				"free": j == 0, "metadata": map[string]any{"bullets": []string{filler}, "displayName": fmt.Sprintf("Plan %d", j)},
				"maintenance_info": map[string]any{"version": "1.0.0"},
				"schemas": map[string]any{
					"service_instance": map[string]any{"create": schema, "update": schema},
					"service_binding":  map[string]any{"create": schema},
				},
			})
			_, _ = w.Write(raw)
		}
		fmt.Fprint(w, "]}")
	}
	fmt.Fprint(w, "]}")
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}

// serveFile serves path as GET /v2/catalog on a loopback port, calling
// fetched for each request, and returns the broker's URL.
func serveFile(tb testing.TB, path string, fetched func()) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/catalog" {
			http.NotFound(w, r)
			return
		}
		fetched()
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		st, _ := f.Stat()
		w.Header().Set("Content-Type", "application/json")
		http.ServeContent(w, r, "", st.ModTime(), f)
	})}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// settledRSS collects garbage, returns memory to the system, resets the
// process's peak resident size and returns the resident size.
func settledRSS(tb testing.TB) int64 {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset the peak resident size: %v", err)
	}
	return procStatus(tb, "VmRSS")
}

// peakRSS is the process's peak resident size since settledRSS.
func peakRSS(tb testing.TB) int64 { return procStatus(tb, "VmHWM") }

func procStatus(tb testing.TB, field string) int64 {
	tb.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
