package servicebinding_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// TestWebhookBeforeController: a workload applied together with its
// ServiceBinding can reach the webhook before the controller has written
// the binding's status. The webhook then resolves the service itself (a
// Direct Secret Reference that exists, a Provisioned Service's
// status.binding.name), so the workload is right from its first revision;
// a service with no Secret yet is a warning, not a projection. The same
// holds for a binding whose status is of an earlier generation (its spec
// changed since): that status.binding may name the Secret of a service
// the binding no longer refers to, which the webhook used to project.
func TestWebhookBeforeController(t *testing.T) {
	t.Parallel()
	_, c := clusterWithCRDs(t)
	createCatalogBindingCRD(t, c)
	const ns = "default"
	create(t, c, secret(ns, "direct"))
	scb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "servicecatalog.k8s.io/v1beta1", "kind": "ServiceBinding",
		"metadata": map[string]any{"namespace": ns, "name": "provisioned"},
	}}
	pending := scb.DeepCopy()
	pending.SetName("pending")
	create(t, c, scb, pending)
	scb.Object["status"] = map[string]any{"binding": map[string]any{"name": "provisioned-creds"}}
	if err := c.Status().Update(t.Context(), scb); err != nil {
		t.Fatal(err)
	}
	catalogRef := func(name string) sbv1.ServiceBindingServiceReference {
		return sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: name}
	}
	// No controller runs: the ServiceBindings have no status.
	for _, sb := range []*sbv1.ServiceBinding{
		binding(ns, "direct", secretRef("direct"), deploymentRef("a")),
		binding(ns, "missing", secretRef("missing"), deploymentRef("b")),
		binding(ns, "provisioned", catalogRef("provisioned"), deploymentRef("c")),
		binding(ns, "pending", catalogRef("pending"), deploymentRef("d")),
	} {
		create(t, c, sb)
	}
	// Bindings the controller resolved, to a Secret other than their
	// service's now: at an earlier generation (stale) or at this one.
	for _, sb := range []struct {
		*sbv1.ServiceBinding
		observed int64 // generations before the current one
	}{
		{binding(ns, "stale", secretRef("direct"), deploymentRef("e")), 1},
		{binding(ns, "stale-missing", secretRef("missing"), deploymentRef("f")), 1},
		{binding(ns, "current", secretRef("direct"), deploymentRef("g")), 0},
	} {
		create(t, c, sb.ServiceBinding)
		sb.Status = sbv1.ServiceBindingStatus{ObservedGeneration: sb.Generation - sb.observed,
			Binding: &sbv1.ServiceBindingSecretReference{Name: "resolved-creds"}}
		if err := c.Status().Update(t.Context(), sb.ServiceBinding); err != nil {
			t.Fatal(err)
		}
	}
	w := &admission.Webhook{Handler: servicebinding.NewWebhook(c)}
	for _, tc := range []struct {
		deployment, wantSecret, wantWarning string
	}{
		{"a", "direct", ""},
		{"b", "", "servicebinding missing: service Secret missing exposes no Secret yet"},
		{"c", "provisioned-creds", ""},
		{"d", "", "servicebinding pending: service ServiceBinding pending exposes no Secret yet"},
		{"e", "direct", ""},
		{"f", "", "servicebinding stale-missing: service Secret missing exposes no Secret yet"},
		{"g", "resolved-creds", ""},
	} {
		t.Run(tc.deployment, func(t *testing.T) {
			d := deployment(ns, tc.deployment, nil, "app")
			d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
			raw, _ := json.Marshal(d)
			resp := w.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID:  "1",
				Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
				Namespace: ns, Name: tc.deployment, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if tc.wantWarning != "" {
				if len(resp.Patch) != 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.wantWarning) {
					t.Errorf("patch %s, warnings %q; want none and %q", resp.Patch, resp.Warnings, tc.wantWarning)
				}
				return
			}
			var ops []struct {
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(resp.Patch, &ops); err != nil {
				t.Fatalf("patch %s: %v", resp.Patch, err)
			}
			var volumes []corev1.Volume
			for _, p := range ops {
				if p.Path == "/spec/template/spec/volumes" {
					_ = json.Unmarshal(p.Value, &volumes)
				}
			}
			if len(volumes) != 1 || volumes[0].Projected == nil || volumes[0].Projected.Sources[0].Secret.Name != tc.wantSecret {
				t.Errorf("projected volumes %+v (patch %s, warnings %q), want Secret %s", volumes, resp.Patch, resp.Warnings, tc.wantSecret)
			}
		})
	}
}

// TestWebhookMappingChange: a workload admitted again (an update) after
// its ClusterWorkloadResourceMapping changed has the binding removed with
// the mapping it was projected with and projected with the new one, as
// the controller does for workloads that are not updated.
func TestWebhookMappingChange(t *testing.T) {
	t.Parallel()
	_, c := clusterWithCRDs(t)
	const ns = "default"
	sb := binding(ns, "db", secretRef("direct"), deploymentRef("web"))
	create(t, c, secret(ns, "direct"), sb)
	w := &admission.Webhook{Handler: servicebinding.NewWebhook(c)}
	admit := func(op admissionv1.Operation, obj []byte) []byte {
		t.Helper()
		req := admissionv1.AdmissionRequest{UID: "1", Operation: op, Namespace: ns, Name: "web",
			Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Object: runtime.RawExtension{Raw: obj}}
		if op == admissionv1.Update {
			req.OldObject = runtime.RawExtension{Raw: obj}
		}
		resp := w.Handle(t.Context(), admission.Request{AdmissionRequest: req})
		if !resp.Allowed || len(resp.Patch) == 0 {
			t.Fatalf("%s: allowed %v, patch %s, warnings %q", op, resp.Allowed, resp.Patch, resp.Warnings)
		}
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Apply(obj)
		if err != nil {
			t.Fatalf("apply %s: %v", resp.Patch, err)
		}
		return out
	}
	bound := func(obj []byte) []string {
		var d appsv1.Deployment
		if err := json.Unmarshal(obj, &d); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ctr := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			if slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == servicebinding.VolumeName(sb.UID) }) {
				out = append(out, ctr.Name)
			}
		}
		return out
	}

	d := deployment(ns, "web", nil, "app")
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	raw, _ := json.Marshal(d)
	created := admit(admissionv1.Create, raw)
	if got := bound(created); !slices.Equal(got, []string{"init", "app"}) {
		t.Fatalf("created with the default mapping: bound %v, want [init app]", got)
	}
	create(t, c, &sbv1.ClusterWorkloadResourceMapping{ObjectMeta: metav1.ObjectMeta{Name: "deployments.apps"},
		Spec: sbv1.ClusterWorkloadResourceMappingSpec{Versions: []sbv1.ClusterWorkloadResourceMappingTemplate{{Version: "*",
			Containers: []sbv1.ClusterWorkloadResourceMappingContainer{{Path: ".spec.template.spec.initContainers[*]", Name: ".name"}}}}}})
	if got := bound(admit(admissionv1.Update, created)); !slices.Equal(got, []string{"init"}) {
		t.Errorf("updated after the mapping changed: bound %v, want [init]", got)
	}
}
