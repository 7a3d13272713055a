package apiserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// BenchmarkUnpagedList100k lists 100,000 ServiceInstances and 100,000
// ServiceBindings unpaged from `bindery serve apiserver` run as its own
// process (standalone), in each form a client asks for: the objects
// (client-go's List without a limit), their Table (what `kubectl get -A
// --chunk-size=0` asks for, gzip accepted as kubectl does), their
// metadata, and through kubectl itself. Reported: the server's resident
// memory at rest once its watch hub is seeded (idle), its peak during the
// lists above that (target 64 MB), the slowest first byte (target 200 ms),
// each list's time, and the server's CPU per listed object.
// UNPAGED_BENCH_N sets another count:
//
//	UNPAGED_BENCH_N=20000 go test -run '^$' -bench UnpagedList100k -benchtime 1x ./apiserver/
func BenchmarkUnpagedList100k(b *testing.B) {
	n := 100000
	if s := os.Getenv("UNPAGED_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("UNPAGED_BENCH_N=%q: want a count of at least 100", s)
		}
	}
	store := apiserver.NewTestStore(b)
	ctx := context.Background()
	began := time.Now()
	createInstances(b, store, n, "postgresql", "small")
	createBindings(b, store, n)
	b.Logf("%d instances and %d bindings created in %s", n, n, time.Since(began).Round(time.Second))
	srv := startServerProcess(b, netip.MustParseAddr("127.0.0.1"), apiserver.PoolOf(store).Config().ConnString(), "", "")
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(srv.dataDir, "kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	waitSeeded(b, sc)
	// At rest: the Go runtime gives freed memory back in the background.
	time.Sleep(10 * time.Second)
	idle := memoryMB(b, srv.pid(), "VmRSS")
	resetPeakRSS(b, srv.pid())
	g := newHTTPGet(b, &bundle{kubeconfig: filepath.Join(srv.dataDir, "kubeconfig")})
	var firstByte time.Duration
	var listed int
	cpu0 := processCPU(b, srv.pid())
	for b.Loop() {
		for _, resource := range []string{"serviceinstances", "servicebindings"} {
			for form, accept := range map[string]string{"objects": "application/json", "table": acceptTable, "metadata": acceptPartial} {
				fb, total, size := timedGet(b, g, "/apis/servicecatalog.k8s.io/v1beta1/"+resource+"?limit=0", accept)
				firstByte = max(firstByte, fb)
				listed += n
				b.Logf("%s as %s: first byte %s, all %s, %d kB (gzip)", resource, form, fb.Round(time.Millisecond), total.Round(time.Millisecond), size>>10)
			}
			start := time.Now()
			out, err := kubetest.Kubectl(ctx, b.TempDir(), filepath.Join(srv.dataDir, "kubeconfig"), nil, "get", resource, "-A", "--chunk-size=0", "--no-headers")
			if err != nil || strings.Count(out, "\n") != n {
				b.Fatalf("kubectl get %s -A --chunk-size=0: %d lines, %v", resource, strings.Count(out, "\n"), err)
			}
			listed += n
			b.Logf("kubectl get %s -A --chunk-size=0: %s", resource, time.Since(start).Round(time.Millisecond))
		}
		// A client-go List without a limit, decoded.
		l, err := sc.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != n {
			b.Fatalf("List: %v", err)
		}
		listed += n
	}
	b.ReportMetric(idle, "server-idle-rss-MB")
	b.ReportMetric(memoryMB(b, srv.pid(), "VmHWM")-idle, "server-peak-above-idle-MB")
	b.ReportMetric(float64(firstByte.Microseconds())/1000, "first-byte-max-ms")
	b.ReportMetric(float64((processCPU(b, srv.pid())-cpu0).Microseconds())/float64(listed), "server-cpu-us/object")
}

// waitSeeded waits until the server's watches deliver a change, which
// they do once its hub has read every object.
func waitSeeded(b *testing.B, sc versioned.Interface) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := sc.ServicecatalogV1beta1().ServiceInstances("team-0")
	for {
		l, err := c.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil || len(l.Items) == 0 {
			b.Fatalf("list: %v", err)
		}
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			b.Fatal(err)
		}
		in := l.Items[0]
		in.Annotations = map[string]string{"seeded": strconv.FormatInt(time.Now().UnixNano(), 10)}
		if _, err := c.Update(ctx, &in, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			w.Stop()
			if ev.Type == watch.Modified {
				return
			}
		case <-ctx.Done():
			b.Fatal("the server's watches never delivered a change")
		}
	}
}

// timedGet reads a list and returns when its first byte came, when its
// last did, and its size on the wire.
func timedGet(b *testing.B, g httpGet, path, accept string) (first, all time.Duration, size int64) {
	b.Helper()
	req, _ := http.NewRequest("GET", g.host+path, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	res, err := g.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(res.Body, one); err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s, %v", path, res.Status, err)
	}
	first = time.Since(start)
	n, err := io.Copy(io.Discard, res.Body)
	if err != nil {
		b.Fatalf("GET %s: %v", path, err)
	}
	return first, time.Since(start), n + 1
}

// processCPU is the CPU time process pid has used, from /proc/PID/stat.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}
