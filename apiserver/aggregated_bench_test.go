package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// benchCRD is a CustomResourceDefinition of the same shape as
// ServiceInstance (spec and status kept whole, the same columns), stored by
// the same kube-apiserver in etcd: what Bindery's API is measured against.
const benchCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: serviceinstances.bench.bindery.dev
spec:
  group: bench.bindery.dev
  scope: Namespaced
  names: {plural: serviceinstances, singular: serviceinstance, kind: ServiceInstance, listKind: ServiceInstanceList}
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
      additionalPrinterColumns:
        - {name: Class, type: string, jsonPath: .spec.clusterServiceClassExternalName}
        - {name: Plan, type: string, jsonPath: .spec.clusterServicePlanExternalName}
        - {name: Status, type: string, jsonPath: ".status.conditions[?(@.type==\"Ready\")].reason"}
        - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`

// BenchmarkAggregatedGet10k times `kubectl get -A` over 10,000
// ServiceInstances through kube-apiserver's aggregation layer, and over
// 10,000 objects of a CRD of the same shape in the same kube-apiserver,
// alternating; the same with a label selector that matches 1 % of them;
// and discovery of servicecatalog.k8s.io through the aggregator. Reported:
// the median of each kubectl run, their ratio, discovery's p50/p99, and the
// peak RSS of this process (the aggregated API server with the test's own
// clients beside it) while kubectl lists.
func BenchmarkAggregatedGet10k(b *testing.B) { aggregatedGet(b, 10000) }

// BenchmarkAggregatedGet100k is BenchmarkAggregatedGet10k with 100,000
// objects of each (`make bench-scale`).
func BenchmarkAggregatedGet100k(b *testing.B) { aggregatedGet(b, 100000) }

func aggregatedGet(b *testing.B, n int) {
	a := aggregate(b, false)
	ctx := context.Background()
	for i := range 10 {
		a.kubectl(kubetest.Admin, nil, "create", "namespace", fmt.Sprintf("team-%d", i))
	}
	began := time.Now()
	createInstances(b, a.store, n, "postgresql", "small")
	b.Logf("%d instances created in the catalog in %s", n, time.Since(began).Round(time.Millisecond))

	// The CRD's objects copy Bindery's: same metadata sizes, spec and status.
	a.kubectl(kubetest.Admin, []byte(benchCRD), "apply", "-f", "-")
	a.kubectl(kubetest.Admin, nil, "wait", "--for=condition=Established", "crd/serviceinstances.bench.bindery.dev", "--timeout=30s")
	cfg := a.cluster.Config()
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	list, err := sc.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != n {
		b.Fatalf("list through the aggregator: %d items, %v", len(list.Items), err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	crd := dyn.Resource(schema.GroupVersionResource{Group: "bench.bindery.dev", Version: "v1beta1", Resource: "serviceinstances"})
	began = time.Now()
	inParallel(b, len(list.Items), func(i int) error {
		in := list.Items[i]
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&in)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bench.bindery.dev/v1beta1", "kind": "ServiceInstance",
			"metadata": map[string]any{"name": in.Name, "namespace": in.Namespace, "labels": in.Labels},
			"spec":     u["spec"], "status": u["status"],
		}}
		_, err = crd.Namespace(in.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	b.Logf("%d CRD objects created in %s", n, time.Since(began).Round(time.Millisecond))
	list = nil
	debug.FreeOSMemory()

	// kubectl's own CPU time (its process, waited for, is the only child
	// that ends), per full listing of each kind.
	kubectlCPU := map[string][]time.Duration{}
	get := func(resource string, selector ...string) time.Duration {
		want := n + 1
		if len(selector) > 0 {
			want = n/100 + 1
		}
		cpu0 := childrenCPU()
		start := time.Now()
		out := a.kubectl(kubetest.Admin, nil, append([]string{"get", resource, "-A"}, selector...)...)
		d := time.Since(start)
		if len(selector) == 0 {
			kubectlCPU[resource] = append(kubectlCPU[resource], childrenCPU()-cpu0)
		}
		if lines := strings.Count(out, "\n"); lines != want {
			b.Fatalf("kubectl get %s -A %v: %d lines, want %d", resource, selector, lines, want)
		}
		return d
	}
	// One of each first, so both caches (kubectl's discovery, the
	// servers' connections) are warm.
	get("serviceinstances.servicecatalog.k8s.io")
	get("serviceinstances.bench.bindery.dev")
	resetPeakRSS(b)
	var bindery, crds, binderySel, crdsSel []time.Duration
	for b.Loop() {
		bindery = append(bindery, get("serviceinstances.servicecatalog.k8s.io"))
		crds = append(crds, get("serviceinstances.bench.bindery.dev"))
		binderySel = append(binderySel, get("serviceinstances.servicecatalog.k8s.io", "-l", "team=t7"))
		crdsSel = append(crdsSel, get("serviceinstances.bench.bindery.dev", "-l", "team=t7"))
	}
	b.ReportMetric(peakRSSMB(b), "peak-rss-MB")
	mb, mc := median(bindery), median(crds)
	b.ReportMetric(float64(mb.Milliseconds()), "bindery-ms")
	b.ReportMetric(float64(mc.Milliseconds()), "crd-ms")
	b.ReportMetric(float64(mb)/float64(mc), "bindery/crd")
	b.ReportMetric(float64(median(kubectlCPU["serviceinstances.servicecatalog.k8s.io"]).Milliseconds()), "kubectl-cpu-ms-bindery")
	b.ReportMetric(float64(median(kubectlCPU["serviceinstances.bench.bindery.dev"]).Milliseconds()), "kubectl-cpu-ms-crd")
	mb, mc = median(binderySel), median(crdsSel)
	b.ReportMetric(float64(mb.Milliseconds()), "bindery-1%-ms")
	b.ReportMetric(float64(mc.Milliseconds()), "crd-1%-ms")

	// The filtered list alone, as a client sends it (no kubectl start-up):
	// a page of the default size, through the aggregator.
	var sel []time.Duration
	for range 50 {
		start := time.Now()
		l, err := sc.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{LabelSelector: "team=t7", Limit: 500})
		if err != nil || len(l.Items) != min(n/100, 500) {
			b.Fatalf("filtered list: %d items, %v", len(l.Items), err)
		}
		sel = append(sel, time.Since(start))
	}
	slices.Sort(sel)
	b.ReportMetric(float64(sel[len(sel)/2].Microseconds())/1000, "list-1%-p50-ms")
	b.ReportMetric(float64(sel[len(sel)*99/100].Microseconds())/1000, "list-1%-p99-ms")

	// Discovery of the group through the aggregator, as kubectl and
	// controllers do it.
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: rt}
	var disc []time.Duration
	for range 200 {
		start := time.Now()
		resp, err := client.Get(cfg.Host + "/apis/servicecatalog.k8s.io/v1beta1")
		if err != nil {
			b.Fatal(err)
		}
		var l metav1.APIResourceList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(l.APIResources) == 0 {
			b.Fatalf("discovery: %s, %v", resp.Status, err)
		}
		disc = append(disc, time.Since(start))
	}
	slices.Sort(disc)
	b.ReportMetric(float64(disc[len(disc)/2].Microseconds())/1000, "discovery-p50-ms")
	b.ReportMetric(float64(disc[len(disc)*99/100].Microseconds())/1000, "discovery-p99-ms")
	b.ReportMetric(float64(a.available.Milliseconds()), "apiservice-available-ms")
}

// childrenCPU is the CPU time of this process's children that have ended
// and been waited for.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS starts this process's peak resident set size afresh
// (proc(5): writing 5 to clear_refs resets VmHWM).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

// peakRSSMB is this process's peak resident set size since resetPeakRSS.
func peakRSSMB(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
