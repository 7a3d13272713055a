package servicebinding_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// BenchmarkWebhookLatency sends AdmissionReviews at 500 a second to the
// webhook as `bindery serve webhook` runs it (RunWithConfig: its TLS
// server, the manager's cached client, the controller beside it) and, side
// by side, to a minimal controller-runtime webhook server that answers an
// empty patch (the floor: HTTP, TLS and controller-runtime's decoding).
// Two reviews are sent to the projection webhook: a Deployment that a
// ServiceBinding selects (projection), and a Pod that a ServiceBinding of a
// Service Catalog binding selects (projection and the egress annotation,
// read from that binding's status). The three take turns; each iteration
// sends one of each. It reports p50 and p99 of each.
func BenchmarkWebhookLatency(b *testing.B) {
	bundle := setup(b, admissionregistrationv1.Ignore)
	c, ns, ctx := bundle.c, bundle.ns, b.Context()
	createCatalogBindingCRD(b, c)
	create(b, c, secret(ns, "prod-db"), secret(ns, "db-creds"))
	scb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "servicecatalog.k8s.io/v1beta1", "kind": "ServiceBinding",
		"metadata": map[string]any{"namespace": ns, "name": "db"},
	}}
	create(b, c, scb)
	scb.Object["status"] = map[string]any{
		"binding":   map[string]any{"name": "db-creds"},
		"endpoints": []any{map[string]any{"host": "10.0.0.5", "ports": []any{"5432"}, "protocol": "tcp"}},
	}
	if err := c.Status().Update(ctx, scb); err != nil {
		b.Fatal(err)
	}
	sb := binding(ns, "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	sb.Spec.Env = []sbv1.EnvMapping{{Name: "DB_HOST", Key: "host"}}
	podSB := binding(ns, "web-db", sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "db"},
		sbv1.ServiceBindingWorkloadReference{APIVersion: "v1", Kind: "Pod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	create(b, c, sb, podSB)
	for _, s := range []*sbv1.ServiceBinding{sb, podSB} {
		eventually(b, "servicebinding "+s.Name+" resolved", func(ctx context.Context) error {
			var got sbv1.ServiceBinding
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
				return err
			}
			if got.Status.Binding == nil {
				return fmt.Errorf("no status.binding yet: %+v", got.Status)
			}
			return nil
		})
	}

	// The floor: controller-runtime's webhook server with the same
	// certificate, answering every review with an empty patch.
	floorPort := freePort(b)
	floor := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: floorPort, CertDir: bundle.certDir, CertName: "tls.crt", KeyName: "tls.key"})
	floor.Register("/empty", &webhook.Admission{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.PatchResponseFromRaw(req.Object.Raw, req.Object.Raw)
	})})
	floorCtx, stopFloor := context.WithCancel(ctx)
	defer stopFloor()
	go func() { _ = floor.Start(floorCtx) }()
	floorDone := make(chan error, 1)
	waitListening(b, "127.0.0.1:"+strconv.Itoa(floorPort), floorDone)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.caBundle)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()

	d := deployment(ns, "online-banking", nil, "app")
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	dRaw, _ := json.Marshal(d)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	podRaw, _ := json.Marshal(pod)
	kinds := map[string]struct {
		kind     metav1.GroupVersionKind
		resource metav1.GroupVersionResource
		raw      []byte
	}{
		"deployment": {metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, dRaw},
		"pod":        {metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, podRaw},
	}
	send := func(b *testing.B, url, kind string, i int) (time.Duration, *admissionv1.AdmissionResponse) {
		k := kinds[kind]
		uid := types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: uid, Kind: k.kind, Resource: k.resource,
				Namespace: ns, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: k.raw},
			}})
		began := time.Now()
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var out admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		took := time.Since(began)
		if err != nil || out.Response == nil || !out.Response.Allowed || out.Response.UID != uid {
			b.Fatalf("answer %+v: %v", out.Response, err)
		}
		return took, out.Response
	}
	floorURL := "https://127.0.0.1:" + strconv.Itoa(floorPort) + "/empty"
	// One review of each kind first: the projection's first read of a
	// kind of service starts the informer that later reads are served
	// from. It must come back projected.
	for _, kind := range []string{"deployment", "pod"} {
		_, r := send(b, bundle.webhookURL, kind, 0)
		if len(r.Patch) == 0 {
			b.Fatalf("no patch for the %s", kind)
		}
		if kind == "pod" && !bytes.Contains(r.Patch, []byte(servicebinding.EgressAnnotation)) {
			b.Fatalf("the Pod's patch has no egress annotation: %s", r.Patch)
		}
	}
	// The three kinds of review take turns, one every 2 ms (500 a second),
	// so that whatever else the machine does falls on all three alike.
	cases := []struct{ name, url, kind string }{
		{"empty", floorURL, "deployment"},
		{"deployment", bundle.webhookURL, "deployment"},
		{"pod", bundle.webhookURL, "pod"},
	}
	lat := make([][]time.Duration, len(cases))
	tick := time.NewTicker(time.Second / 500)
	defer tick.Stop()
	i := 0
	for b.Loop() {
		for j := range cases {
			tc := cases[(i+j)%len(cases)]
			<-tick.C
			took, r := send(b, tc.url, tc.kind, i*len(cases)+j+1)
			lat[(i+j)%len(cases)] = append(lat[(i+j)%len(cases)], took)
			if tc.name != "empty" && len(r.Patch) == 0 {
				b.Fatal("no patch from the projection webhook")
			}
		}
		i++
	}
	for j, tc := range cases {
		q := quantiles(lat[j])
		b.ReportMetric(q(0.5), tc.name+"-p50-ms")
		b.ReportMetric(q(0.99), tc.name+"-p99-ms")
	}
}

// quantiles returns the nearest-rank quantiles of lat in milliseconds.
func quantiles(lat []time.Duration) func(float64) float64 {
	lat = slices.Clone(lat)
	slices.Sort(lat)
	return func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
}

// reportLatency reports the median and 99th percentile of lat in
// milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	q := quantiles(lat)
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkProjectExisting measures ServiceBinding applied → existing
// Deployment's template projected, through the real control plane and the
// controller.
func BenchmarkProjectExisting(b *testing.B) {
	bundle := setup(b, "Ignore")
	c, ns := bundle.c, bundle.ns
	if err := c.Create(b.Context(), secret(ns, "prod-db")); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("app-%d", i)
		i++
		d := deployment(ns, name, nil, "app")
		if err := c.Create(b.Context(), d); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		sb := binding(ns, name, secretRef("prod-db"), deploymentRef(name))
		if err := c.Create(b.Context(), sb); err != nil {
			b.Fatal(err)
		}
		for {
			var got appsv1.Deployment
			if err := c.Get(b.Context(), client.ObjectKeyFromObject(d), &got); err != nil {
				b.Fatal(err)
			}
			if slices.ContainsFunc(got.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == servicebinding.VolumeName(sb.UID) }) {
				break
			}
			if time.Since(began) > 30*time.Second {
				b.Fatal("not projected in 30 s")
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(began))
	}
	// The first binding of a kind starts the controller's informer for
	// that kind; it is reported apart from the steady state.
	b.ReportMetric(float64(lat[0].Microseconds())/1000, "first-ms")
	reportLatency(b, lat[1:])
}

// BenchmarkWebhookHandle is the projection webhook's handler alone, in
// this process, reading through an informer cache of a real
// kube-apiserver: the time and allocations of one review of a Pod that a
// ServiceBinding of a Service Catalog binding selects (projection and the
// egress annotation), without HTTP.
func BenchmarkWebhookHandle(b *testing.B) {
	cluster, c := clusterWithCRDs(b)
	createCatalogBindingCRD(b, c)
	const ns = "default"
	scb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "servicecatalog.k8s.io/v1beta1", "kind": "ServiceBinding",
		"metadata": map[string]any{"namespace": ns, "name": "db"},
	}}
	create(b, c, scb)
	scb.Object["status"] = map[string]any{
		"binding":   map[string]any{"name": "db-creds"},
		"endpoints": []any{map[string]any{"host": "10.0.0.5", "ports": []any{"5432"}, "protocol": "tcp"}},
	}
	if err := c.Status().Update(b.Context(), scb); err != nil {
		b.Fatal(err)
	}
	sb := binding(ns, "web-db", sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "db"},
		sbv1.ServiceBindingWorkloadReference{APIVersion: "v1", Kind: "Pod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	create(b, c, sb)
	// As the controller writes it: the webhook trusts the status of the
	// binding's current generation only.
	sb.Status.ObservedGeneration = sb.Generation
	sb.Status.Binding = &sbv1.ServiceBindingSecretReference{Name: "db-creds"}
	if err := c.Status().Update(b.Context(), sb); err != nil {
		b.Fatal(err)
	}
	informers, err := cache.New(cluster.Config(), cache.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informers.Start(b.Context()) }()
	informers.WaitForCacheSync(b.Context())
	w := &admission.Webhook{Handler: servicebinding.NewWebhook(informers)}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}}
	// The first read of the Service Catalog binding starts its informer.
	if r := w.Handle(b.Context(), req); !bytes.Contains(r.Patch, []byte(servicebinding.EgressAnnotation)) {
		b.Fatalf("no egress annotation in %s (%v)", r.Patch, r.Warnings)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := w.Handle(b.Context(), req); len(r.Patch) == 0 {
			b.Fatal("no patch")
		}
	}
}
