package servicebinding_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// BenchmarkWebhookLatency sends AdmissionReviews of a Deployment that one
// ServiceBinding selects, at 500 a second, to the projection webhook and,
// side by side, to a minimal controller-runtime webhook that answers an
// empty patch (the floor: HTTP, TLS and controller-runtime's decoding).
// The webhook reads ServiceBindings from an informer cache of a real
// kube-apiserver, as in production. It reports p50 and p99 per request.
func BenchmarkWebhookLatency(b *testing.B) {
	cluster := kubetest.Start(b)
	scheme, err := servicebinding.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cluster.Config(), client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	installCRDs(b, c)
	ctx := b.Context()
	sb := binding("default", "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	sb.Spec.Env = []sbv1.EnvMapping{{Name: "DB_HOST", Key: "host"}}
	if err := c.Create(ctx, sb); err != nil {
		b.Fatal(err)
	}
	sb.Status.Binding = &sbv1.ServiceBindingSecretReference{Name: "prod-db"}
	if err := c.Status().Update(ctx, sb); err != nil {
		b.Fatal(err)
	}
	informers, err := cache.New(cluster.Config(), cache.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	informers.WaitForCacheSync(ctx)
	reader := &cachedReader{cache: informers, direct: c}

	mux := http.NewServeMux()
	mux.Handle("/mutate", &admission.Webhook{Handler: servicebinding.NewWebhook(reader)})
	mux.Handle("/empty", &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.PatchResponseFromRaw(req.Object.Raw, req.Object.Raw)
	})})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	hc := srv.Client()

	d := deployment("default", "online-banking", nil, "app")
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	raw, _ := json.Marshal(d)
	review := func(i int) []byte {
		r := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
				Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
				Namespace: "default", Name: "online-banking", Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: raw},
			}}
		body, _ := json.Marshal(r)
		return body
	}
	for _, path := range []string{"/empty", "/mutate"} {
		b.Run(path[1:], func(b *testing.B) {
			tick := time.NewTicker(time.Second / 500)
			defer tick.Stop()
			var lat []time.Duration
			i := 0
			for b.Loop() {
				<-tick.C
				body := review(i)
				i++
				began := time.Now()
				resp, err := hc.Post(srv.URL+path, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				lat = append(lat, time.Since(began))
				if err != nil || out.Response == nil || !out.Response.Allowed || out.Response.UID != types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i-1)) {
					b.Fatalf("answer %+v: %v", out.Response, err)
				}
				if path == "/mutate" && len(out.Response.Patch) == 0 {
					b.Fatal("no patch from the projection webhook")
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// cachedReader reads typed objects from the informer cache and unstructured
// ones from the API server, as the manager's client does.
type cachedReader struct {
	cache  cache.Cache
	direct client.Client
}

func (r *cachedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.cache.Get(ctx, key, obj, opts...)
}

func (r *cachedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cache.List(ctx, list, opts...)
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
	lat = lat[1:]
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
