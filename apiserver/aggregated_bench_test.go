package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
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

// benchBindingCRD is a CustomResourceDefinition of the same shape as
// ServiceBinding, beside benchCRD.
const benchBindingCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicebindings.bench.bindery.dev
spec:
  group: bench.bindery.dev
  scope: Namespaced
  names: {plural: servicebindings, singular: servicebinding, kind: ServiceBinding, listKind: ServiceBindingList}
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
        - {name: Service-Instance, type: string, jsonPath: .spec.instanceRef.name}
        - {name: Secret-Name, type: string, jsonPath: .spec.secretName}
        - {name: Status, type: string, jsonPath: ".status.conditions[?(@.type==\"Ready\")].reason"}
        - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`

// BenchmarkAggregatedGet10k times `kubectl get -A` over 10,000
// ServiceInstances through kube-apiserver's aggregation layer, and over
// 10,000 objects of a CRD of the same shape in the same kube-apiserver,
// alternating; the same with a label selector that matches 1 % of them;
// and discovery of servicecatalog.k8s.io through the aggregator. The
// catalog holds as many ServiceBindings, and a second CRD as many objects
// of their shape; each kind is listed once by kubectl too. The API server
// runs as its own process (`bindery serve apiserver`), restarted once the
// catalog is full, as a replica would be.
//
// Reported: the median of each kubectl run, their ratio, discovery's
// p50/p99; the server's RSS while the objects were created (peak: every
// change through its watch hub), once restarted (now and peak: the hub's
// seed), since then while serving chunked lists (kubectl's, 500 a page,
// and the CRDs' copies) and watches (peak), at rest after them, and
// through one unchunked list of each kind (peak); kube-apiserver's RSS
// before the CRDs' objects exist and after, and its peak while kubectl
// lists. Where kubectl's time goes: the p50 of a page of 500 rows as a
// Table from the server directly, through the aggregator and from the CRD
// (read in turns), and the ratio of the last two; and, of one kubectl run
// of each at -v=6, the time its requests took and the time its
// client-side rate limiter made them wait. With
// BINDERY_BENCH_PROFILE naming a directory, the server's heap profiles once
// started and at rest, and its CPU profile during a kubectl get, are
// written there.
func BenchmarkAggregatedGet10k(b *testing.B) { aggregatedGet(b, 10000) }

// BenchmarkAggregatedGet100k is BenchmarkAggregatedGet10k with 100,000
// objects of each (`make bench-scale`).
func BenchmarkAggregatedGet100k(b *testing.B) { aggregatedGet(b, 100000) }

func aggregatedGet(b *testing.B, n int) {
	a := aggregateProcess(b)
	ctx := context.Background()
	for i := range 10 {
		a.kubectl(kubetest.Admin, nil, "create", "namespace", fmt.Sprintf("team-%d", i))
	}
	began := time.Now()
	createInstances(b, a.store, n, "postgresql", "small")
	createBindings(b, a.store, n)
	b.Logf("%d instances and %d bindings created in the catalog in %s", n, n, time.Since(began).Round(time.Millisecond))
	// Figures taken before b.Loop are reported after it: its start
	// deletes the metrics reported so far.
	before := map[string]float64{"server-peak-rss-creating-MB": memoryMB(b, a.server.pid(), "VmHWM")}
	a.server.restart()
	cfg := a.cluster.Config()
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	waitWatching(b, sc)
	before["server-rss-started-MB"] = memoryMB(b, a.server.pid(), "VmRSS")
	before["server-peak-rss-started-MB"] = memoryMB(b, a.server.pid(), "VmHWM")
	if profileDir() != "" {
		saveProfile(b, httpClientFor(b, a.server.caData), "https://"+a.server.addr.String(), a.cluster.Token(kubetest.Admin), "/debug/pprof/heap?gc=1", "heap-started.pprof")
		b.Logf("server memory once started: %s", rssParts(b, a.server.pid()))
	}

	// The CRDs' objects copy Bindery's: same metadata sizes, spec and
	// status.
	a.kubectl(kubetest.Admin, []byte(benchCRD+"---\n"+benchBindingCRD), "apply", "-f", "-")
	a.kubectl(kubetest.Admin, nil, "wait", "--for=condition=Established", "crd/serviceinstances.bench.bindery.dev", "crd/servicebindings.bench.bindery.dev", "--timeout=30s")
	kubeAPI := a.cluster.PID("kube-apiserver")
	before["kube-apiserver-rss-before-crds-MB"] = memoryMB(b, kubeAPI, "VmRSS")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	began = time.Now()
	// Read in chunks, as informers and kubectl do: the unchunked list
	// comes last, measured apart.
	var instances []v1beta1.ServiceInstance
	for cont := ""; ; {
		l, err := sc.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			b.Fatalf("list through the aggregator: %v", err)
		}
		if instances, cont = append(instances, l.Items...), l.Continue; cont == "" {
			break
		}
	}
	copyToCRD(b, dyn, "serviceinstances", "ServiceInstance", n, func(i int) metav1.Object { return &instances[i] })
	instances = nil
	var bindings []v1beta1.ServiceBinding
	for cont := ""; ; {
		l, err := sc.ServicecatalogV1beta1().ServiceBindings("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			b.Fatalf("list through the aggregator: %v", err)
		}
		if bindings, cont = append(bindings, l.Items...), l.Continue; cont == "" {
			break
		}
	}
	copyToCRD(b, dyn, "servicebindings", "ServiceBinding", n, func(i int) metav1.Object { return &bindings[i] })
	bindings = nil
	b.Logf("%d objects of each CRD created in %s", n, time.Since(began).Round(time.Millisecond))
	debug.FreeOSMemory()
	before["kube-apiserver-rss-with-crds-MB"] = memoryMB(b, kubeAPI, "VmRSS")

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
	resetPeakRSS(b, kubeAPI)
	get("serviceinstances.servicecatalog.k8s.io")
	get("serviceinstances.bench.bindery.dev")
	get("servicebindings.servicecatalog.k8s.io")
	get("servicebindings.bench.bindery.dev")
	var bindery, crds, binderySel, crdsSel []time.Duration
	for b.Loop() {
		bindery = append(bindery, get("serviceinstances.servicecatalog.k8s.io"))
		crds = append(crds, get("serviceinstances.bench.bindery.dev"))
		binderySel = append(binderySel, get("serviceinstances.servicecatalog.k8s.io", "-l", "team=t7"))
		crdsSel = append(crdsSel, get("serviceinstances.bench.bindery.dev", "-l", "team=t7"))
	}
	for unit, v := range before {
		b.ReportMetric(v, unit)
	}
	b.ReportMetric(memoryMB(b, a.server.pid(), "VmHWM"), "server-peak-rss-MB")
	b.ReportMetric(memoryMB(b, kubeAPI, "VmHWM"), "kube-apiserver-peak-rss-MB")
	mb, mc := median(bindery), median(crds)
	b.ReportMetric(float64(mb.Milliseconds()), "bindery-ms")
	b.ReportMetric(float64(mc.Milliseconds()), "crd-ms")
	b.ReportMetric(float64(mb)/float64(mc), "bindery/crd")
	b.ReportMetric(float64(median(kubectlCPU["serviceinstances.servicecatalog.k8s.io"]).Milliseconds()), "kubectl-cpu-ms-bindery")
	b.ReportMetric(float64(median(kubectlCPU["serviceinstances.bench.bindery.dev"]).Milliseconds()), "kubectl-cpu-ms-crd")
	mb, mc = median(binderySel), median(crdsSel)
	b.ReportMetric(float64(mb.Milliseconds()), "bindery-1%-ms")
	b.ReportMetric(float64(mc.Milliseconds()), "crd-1%-ms")

	// Where kubectl's time goes: a page of 500 rows as a Table from the
	// server itself, through the aggregator, and from the CRD, read in
	// turns (readInTurns); and one kubectl run of each at -v=6, its
	// requests' time and its client-side rate limiter's waits.
	token := a.cluster.Token(kubetest.Admin)
	direct, serverURL := httpClientFor(b, a.server.caData), "https://"+a.server.addr.String()
	front := httpClientFor(b, a.cluster.CAData)
	server := &pager{client: direct, base: serverURL, path: "/apis/servicecatalog.k8s.io/v1beta1/serviceinstances", token: token}
	aggregated := &pager{client: front, base: a.cluster.URL, path: server.path, token: token}
	crd := &pager{client: front, base: a.cluster.URL, path: "/apis/bench.bindery.dev/v1beta1/serviceinstances", token: token}
	readInTurns(b, 3, server, aggregated, crd)
	b.ReportMetric(p50(server.times), "server-page-p50-ms")
	b.ReportMetric(p50(aggregated.times), "aggregated-page-p50-ms")
	b.ReportMetric(p50(crd.times), "crd-page-p50-ms")
	b.ReportMetric(p50(aggregated.times)/p50(crd.times), "aggregated/crd-page")
	for name, resource := range map[string]string{"bindery": "serviceinstances.servicecatalog.k8s.io", "crd": "serviceinstances.bench.bindery.dev"} {
		tr := traceKubectl(b, a.cluster, resource)
		b.Logf("kubectl get %s -A -v=6: %s, %d requests taking %s, throttled %s", resource,
			tr.wall.Round(time.Millisecond), tr.n, tr.requests.Round(time.Millisecond), tr.throttled.Round(time.Millisecond))
		b.ReportMetric(float64(tr.requests.Milliseconds()), "kubectl-requests-ms-"+name)
		b.ReportMetric(float64(tr.throttled.Milliseconds()), "kubectl-throttled-ms-"+name)
	}
	if profileDir() != "" {
		done := make(chan struct{})
		go func() {
			defer close(done)
			saveProfile(b, direct, serverURL, token, "/debug/pprof/profile?seconds=20", "cpu-kubectl-get.pprof")
		}()
		get("serviceinstances.servicecatalog.k8s.io")
		<-done
	}

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

	// At rest: the lists are over and the server serves nothing; the Go
	// runtime returns freed memory to the system in the background.
	time.Sleep(10 * time.Second)
	b.ReportMetric(memoryMB(b, a.server.pid(), "VmRSS"), "server-rss-at-rest-MB")
	if profileDir() != "" {
		saveProfile(b, httpClientFor(b, a.server.caData), "https://"+a.server.addr.String(), a.cluster.Token(kubetest.Admin), "/debug/pprof/heap?gc=1", "heap-at-rest.pprof")
		b.Logf("server memory at rest: %s", rssParts(b, a.server.pid()))
	}

	// One unchunked list of each kind, which the server answers whole.
	resetPeakRSS(b, a.server.pid())
	if l, err := sc.ServicecatalogV1beta1().ServiceInstances("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != n {
		b.Fatalf("unchunked list: %v", err)
	}
	if l, err := sc.ServicecatalogV1beta1().ServiceBindings("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != n {
		b.Fatalf("unchunked list: %v", err)
	}
	b.ReportMetric(memoryMB(b, a.server.pid(), "VmHWM"), "server-peak-rss-unchunked-list-MB")
}

// waitWatching waits until the restarted server's watches deliver a
// change, which they do once its hub has read every object: an annotation
// on instance-00000, which the CRD's copy leaves out.
func waitWatching(b *testing.B, sc versioned.Interface) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	instances := sc.ServicecatalogV1beta1().ServiceInstances("team-0")
	var l *v1beta1.ServiceInstanceList
	eventually.Succeeds(b, 60*time.Second, func(ctx context.Context) error {
		var err error
		l, err = instances.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=instance-00000"})
		return err
	})
	w, err := instances.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=instance-00000", ResourceVersion: l.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.bindery.dev/restarted":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := instances.Patch(ctx, "instance-00000", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		b.Fatal(err)
	}
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type != watch.Modified {
			b.Fatalf("watch after the restart: %v %v", ev.Type, ok)
		}
	case <-ctx.Done():
		b.Fatal("the restarted server's watch delivered nothing within 5 minutes")
	}
}

// copyToCRD creates n objects of the bench CRD resource (kind) with the
// name, namespace, labels, spec and status of object(i), from 16 clients.
func copyToCRD(b *testing.B, dyn dynamic.Interface, resource, kind string, n int, object func(i int) metav1.Object) {
	b.Helper()
	ctx := context.Background()
	crd := dyn.Resource(schema.GroupVersionResource{Group: "bench.bindery.dev", Version: "v1beta1", Resource: resource})
	inParallel(b, n, func(i int) error {
		o := object(i)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bench.bindery.dev/v1beta1", "kind": kind,
			"metadata": map[string]any{"name": o.GetName(), "namespace": o.GetNamespace(), "labels": o.GetLabels()},
			"spec":     u["spec"], "status": u["status"],
		}}
		_, err = crd.Namespace(o.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

// childrenCPU is the CPU time of this process's children that have ended
// and been waited for.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
