package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
)

// createInstances writes n instances of class and plan through
// catalog.Store, 16 at a time, spread over 10 namespaces.
func createInstances(tb testing.TB, store *catalog.Store, n int, class, plan string) {
	tb.Helper()
	ctx := context.Background()
	inParallel(tb, n, func(i int) error {
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: class, ClusterServicePlanExternalName: plan}}
		in.Name, in.Namespace = fmt.Sprintf("instance-%05d", i), fmt.Sprintf("team-%d", i%10)
		in.Labels = map[string]string{"app": "bench", "team": fmt.Sprintf("t%d", i%100)}
		_, err := store.CreateInstance(ctx, in)
		return err
	})
}

// createBindings creates n bindings in the catalog directly, one for each
// instance createInstances made, with the same labels.
func createBindings(tb testing.TB, store *catalog.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	inParallel(tb, n, func(i int) error {
		bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: fmt.Sprintf("instance-%05d", i)}, SecretName: fmt.Sprintf("binding-%05d", i)}}
		bd.Name, bd.Namespace = fmt.Sprintf("binding-%05d", i), fmt.Sprintf("team-%d", i%10)
		bd.Labels = map[string]string{"app": "bench", "team": fmt.Sprintf("t%d", i%100)}
		_, err := store.CreateBinding(ctx, bd)
		return err
	})
}

// inParallel calls f for 0..n-1 from 16 goroutines and fails tb with the
// first error, after which no new call starts.
func inParallel(tb testing.TB, n int, f func(i int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	var failed error
feed:
	for i := range n {
		select {
		case next <- i:
		case failed = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if failed == nil {
		select {
		case failed = <-errs:
		default:
		}
	}
	if failed != nil {
		tb.Fatal(failed)
	}
}

// BenchmarkKubectlGetInstances10k times `kubectl get serviceinstances -A`
// (table output) over 10,000 instances, and the typed client's full list.
func BenchmarkKubectlGetInstances10k(b *testing.B) {
	bb := setup(b)
	createInstances(b, bb.store, 10000, "fake-service", "sync")
	ctx := context.Background()
	var client time.Duration
	b.ResetTimer()
	for range b.N {
		out := bb.mustKubectl(nil, "get", "serviceinstances", "-A")
		if n := strings.Count(out, "\n"); n != 10001 {
			b.Fatalf("%d lines", n)
		}
		start := time.Now()
		l, err := bb.client.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 10000 {
			b.Fatalf("list: %v", err)
		}
		client += time.Since(start)
	}
	b.ReportMetric(float64(client.Milliseconds())/float64(b.N), "client-list-ms/op")
}

// BenchmarkSpecLabelSelector10k times lists of 10,000 instances by
// Service Catalog's plan label, as svcat and Service Catalog's webhooks
// select: one selecting all of them, one none. The labels are derived
// from each instance's spec as it is listed.
func BenchmarkSpecLabelSelector10k(b *testing.B) {
	bb := setup(b)
	createInstances(b, bb.store, 10000, "fake-service", "sync")
	ctx := context.Background()
	c := bb.client.ServicecatalogV1beta1()
	plans, err := c.ClusterServicePlans().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	selector := func(plan string) string {
		for _, p := range plans.Items {
			if p.Spec.ExternalName == plan {
				return v1beta1.LabelClusterServicePlanRef + "=" + v1beta1.SpecLabelValue(p.Name)
			}
		}
		b.Fatalf("no plan %s", plan)
		return ""
	}
	var all, none time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		l, err := c.ServiceInstances("").List(ctx, metav1.ListOptions{LabelSelector: selector("sync")})
		if err != nil || len(l.Items) != 10000 {
			b.Fatalf("list by the sync plan's label: %v", err)
		}
		all += time.Since(start)
		start = time.Now()
		l, err = c.ServiceInstances("").List(ctx, metav1.ListOptions{LabelSelector: selector("async")})
		if err != nil || len(l.Items) != 0 {
			b.Fatalf("list by the async plan's label: %v", err)
		}
		none += time.Since(start)
	}
	b.ReportMetric(float64(all.Milliseconds())/float64(b.N), "all-match-ms/op")
	b.ReportMetric(float64(none.Milliseconds())/float64(b.N), "none-match-ms/op")
}

// BenchmarkWatch100 opens 100 watches of serviceinstances and measures,
// per event and watcher, the time from just before the write through
// catalog.Store (so an upper bound of commit-to-event) to its arrival.
// A write follows the last one by 5 ms.
func BenchmarkWatch100(b *testing.B) { benchWatch(b, 100, false, 5*time.Millisecond) }

// BenchmarkWatch1000 is BenchmarkWatch100 with 1,000 watchers, half of
// them with a label selector that matches every other object; it also
// reports the heap each watcher adds (server and client side together:
// both are in this process). Its writes, each some 10 ms and 5 ms apart,
// make some 60,000 events a second, which saturate two cores running the
// server and the 1,000 clients: its latency is partly queueing.
func BenchmarkWatch1000(b *testing.B) { benchWatch(b, 1000, true, 5*time.Millisecond) }

// BenchmarkWatch1000Steady is BenchmarkWatch1000 with the writes 50 ms
// apart (some 20 a second, 15,000 events a second): the latency of a
// change to 1,000 watchers when the machine keeps up.
func BenchmarkWatch1000Steady(b *testing.B) { benchWatch(b, 1000, true, 50*time.Millisecond) }

// benchWatch opens the watchers, then writes b.N instances, each gap after
// the last write returned.
func benchWatch(b *testing.B, watchers int, selective bool, gap time.Duration) {
	bb := setup(b)
	ctx := context.Background()
	c := bb.client.ServicecatalogV1beta1().ServiceInstances("")
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	heapBefore := heapInUse()
	var mu sync.Mutex
	arrived := map[string][]time.Time{}
	var wg sync.WaitGroup
	// The watchers read the stream as a client in another process would,
	// but decode only each event's type and name: the clients share this
	// process with the server, and full decoding would measure them.
	rc := bb.client.ServicecatalogV1beta1().RESTClient()
	streams := make([]io.ReadCloser, watchers)
	filtered := 0
	for i := range streams {
		req := rc.Get().Resource("serviceinstances").Param("watch", "true").Param("resourceVersion", list.ResourceVersion)
		if selective && i%2 == 1 {
			req = req.Param("labelSelector", "parity=odd")
			filtered++
		}
		if streams[i], err = req.Stream(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			dec := json.NewDecoder(streams[i])
			for {
				var ev struct {
					Type   watch.EventType
					Object struct{ Metadata struct{ Name string } }
				}
				if dec.Decode(&ev) != nil {
					return
				}
				if ev.Type != watch.Added {
					continue
				}
				now := time.Now()
				mu.Lock()
				arrived[ev.Object.Metadata.Name] = append(arrived[ev.Object.Metadata.Name], now)
				mu.Unlock()
			}
		})
	}
	perWatcher := float64(heapInUse()-heapBefore) / float64(watchers) / 1024
	sent := map[string]time.Time{}
	want := 0
	b.ResetTimer()
	for i := range b.N {
		in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
		in.Name, in.Namespace = fmt.Sprintf("w-%d", i), "team"
		want += watchers - filtered
		if i%2 == 1 {
			in.Labels = map[string]string{"parity": "odd"}
			want += filtered
		}
		sent[in.Name] = time.Now()
		if _, err := bb.store.CreateInstance(ctx, in); err != nil {
			b.Fatal(err)
		}
		time.Sleep(gap) // a steady stream, not one burst
	}
	eventually.Succeeds(b, time.Minute, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range arrived {
			n += len(a)
		}
		if n != want {
			return fmt.Errorf("%d of %d events arrived", n, want)
		}
		return nil
	})
	b.StopTimer()
	for _, st := range streams {
		st.Close()
	}
	wg.Wait()
	var lat []time.Duration
	for name, at := range arrived {
		for _, a := range at {
			lat = append(lat, a.Sub(sent[name]))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(perWatcher, "heap-kB/watcher")
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkTablePage reads a page of 500 ServiceInstances as `kubectl get`
// asks for it (a Table, JSON), from the server in this process directly,
// the body read and dropped: the server's time and allocations per page.
func BenchmarkTablePage(b *testing.B) {
	bb := setup(b)
	createInstances(b, bb.store, 2000, "fake-service", "sync")
	rc := bb.client.ServicecatalogV1beta1().RESTClient()
	ctx := context.Background()
	read := func(cont string) string {
		req := rc.Get().Resource("serviceinstances").Param("limit", "500").SetHeader("Accept", tableAccept)
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.DoRaw(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var t struct{ Metadata struct{ Continue string } }
		if err := json.Unmarshal(body, &t); err != nil {
			b.Fatal(err)
		}
		return t.Metadata.Continue
	}
	second := read("") // a page after a continue token, as most are
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		read(second)
	}
}
