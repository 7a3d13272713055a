package servicebinding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

// EgressAnnotation is the Pod annotation that lists, as a JSON array of OSB
// endpoint objects, what the Bindery bindings projected into the Pod let it
// reach; bindery-cni reads it when the Pod's network is set up.
const EgressAnnotation = "bindery.dev/egress"

// Endpoint is an OSB 2.17 binding endpoint.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// catalogGroup is the group of Bindery's (Service Catalog's) bindings,
// whose status carries the OSB endpoints.
const catalogGroup = "servicecatalog.k8s.io"

// Webhook projects, at admission, the ServiceBindings that select the
// workload being created or updated. It reads through r, the manager's
// cache, and writes nothing anywhere: sideEffects None, so a dry run gets
// the very answer a real request would.
type Webhook struct {
	r client.Reader
}

// NewWebhook returns the admission handler.
func NewWebhook(r client.Reader) *Webhook { return &Webhook{r: r} }

var _ admission.Handler = (*Webhook)(nil)

// Handle answers one AdmissionReview. A workload no binding selects is
// allowed unchanged; a binding that cannot be projected is a warning that
// names it, never a denial, so that a broken binding does not stop a
// rollout. Only an object that cannot be read is denied, and an update of a
// Pod that changes its EgressAnnotation.
func (w *Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	switch req.Operation {
	case admissionv1.Create:
	case admissionv1.Update:
		if gk == podKind {
			return guardEgress(req)
		}
		// A Job's template cannot change after creation: projecting on
		// update would only earn the request a refusal.
		if immutable(gk) {
			return admission.Allowed("")
		}
	default:
		return admission.Allowed("")
	}
	var obj unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &obj.Object); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode %s: %w", req.Kind.Kind, err))
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(req.Namespace)
	}
	patch, warnings, err := w.project(ctx, &obj, schema.GroupVersionKind(req.Kind), schema.GroupVersionResource(req.Resource))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err).WithWarnings(warnings...)
	}
	resp := admission.Allowed("").WithWarnings(warnings...)
	if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// project projects the bindings that select obj into it and returns the
// JSON patch of what changed, or nil when nothing did.
func (w *Webhook) project(ctx context.Context, obj *unstructured.Unstructured, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) ([]byte, []string, error) {
	var list sbv1.ServiceBindingList
	// The bindings are only read: no copy of the cache's objects is made
	// (this runs on every admission in a bound namespace).
	if err := w.r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list servicebindings: %w", err)
	}
	isPod := gvk.Group == "" && gvk.Kind == "Pod"
	var selecting []*sbv1.ServiceBinding
	for i := range list.Items {
		if sb := &list.Items[i]; sb.DeletionTimestamp == nil && Selects(sb, gvk.GroupKind(), obj) {
			selecting = append(selecting, sb)
		}
	}
	if len(selecting) == 0 && !isPod {
		return nil, nil, nil
	}
	m, err := lookupMapping(ctx, w.r, gvk, gvr)
	if err != nil {
		return nil, nil, err
	}
	bindings, warnings := w.resolve(ctx, selecting)
	e := &workloadEdit{obj: obj.Object, paths: append(fieldPaths(m), workloadAnnotations)}
	if err := e.unprojectEarlier(bindings, m); err != nil {
		return nil, warnings, fmt.Errorf("read %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	tpl, err := Template(obj.Object, m)
	if err != nil {
		return nil, warnings, fmt.Errorf("read %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	before := tpl.DeepCopy()
	for _, b := range bindings {
		for _, warning := range Project(tpl, b.Binding) {
			warnings = append(warnings, fmt.Sprintf("servicebinding %s: %s", b.name, warning.Message))
		}
	}
	if isPod {
		ws, err := w.egress(ctx, obj.GetNamespace(), tpl, list.Items)
		warnings = append(warnings, ws...)
		if err != nil {
			return nil, warnings, err
		}
	}
	if !equalTemplates(before, tpl) {
		if err := e.touch(); err != nil {
			return nil, warnings, err
		}
		if err := WriteTemplate(obj.Object, m, tpl); err != nil {
			return nil, warnings, fmt.Errorf("write %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	if !immutable(gvk.GroupKind()) {
		if err := e.recordMappings(bindings, m); err != nil {
			return nil, warnings, err
		}
	}
	patch, err := e.patch()
	return patch, warnings, err
}

// resolved is a binding to project: its ServiceBinding's name, and what
// it projects.
type resolved struct {
	name string
	Binding
}

// resolve returns the bindings to project of those selecting, sorted by
// name: those whose Secret is known. Each of the others is a warning.
func (w *Webhook) resolve(ctx context.Context, selecting []*sbv1.ServiceBinding) ([]resolved, []string) {
	slices.SortFunc(selecting, func(a, b *sbv1.ServiceBinding) int { return strings.Compare(a.Name, b.Name) })
	var bindings []resolved
	var warnings []string
	for _, sb := range selecting {
		secret, err := w.secretOf(ctx, sb)
		if err != nil {
			// As a webhook that does not answer: the object is admitted,
			// without this binding (the controller projects it later).
			warnings = append(warnings, fmt.Sprintf("servicebinding %s: its service could not be read (%v); not projected", sb.Name, err))
			continue
		}
		if secret == "" {
			warnings = append(warnings, fmt.Sprintf("servicebinding %s: service %s %s exposes no Secret yet; not projected",
				sb.Name, sb.Spec.Service.Kind, sb.Spec.Service.Name))
			continue
		}
		bindings = append(bindings, resolved{sb.Name, BindingFor(sb, secret)})
	}
	return bindings, warnings
}

// workloadEdit is a workload's object changed at admission. The fields at
// paths are kept as they were before the first change (touch), for the
// JSON patch of what changed.
type workloadEdit struct {
	obj    map[string]any
	paths  [][]string
	before []fieldBefore
}

// touch records the fields before a change; only the first call does.
func (e *workloadEdit) touch() error {
	if e.before != nil {
		return nil
	}
	var err error
	e.before, err = snapshotFields(e.obj, e.paths)
	return err
}

// patch returns the JSON patch of the changes, nil when there were none.
func (e *workloadEdit) patch() ([]byte, error) {
	if e.before == nil {
		return nil, nil
	}
	return patchFields(e.obj, e.before)
}

// unprojectEarlier removes the projections of bindings made with another
// mapping than m, with theirs, so that they are made again with m.
func (e *workloadEdit) unprojectEarlier(bindings []resolved, m Mapping) error {
	earlier := map[types.UID]Mapping{}
	for _, b := range bindings {
		if old, ok := recordedMapping(e.obj, b.UID); ok && !sameMapping(old, m) {
			earlier[b.UID] = old
			e.paths = append(e.paths, fieldPaths(old)...)
		}
	}
	if len(earlier) == 0 {
		return nil
	}
	if err := e.touch(); err != nil {
		return err
	}
	for uid, old := range earlier {
		if _, err := unprojectWith(e.obj, old, uid); err != nil {
			return err
		}
	}
	return nil
}

// recordMappings records m as the mapping of bindings where it is not yet.
func (e *workloadEdit) recordMappings(bindings []resolved, m Mapping) error {
	for _, b := range bindings {
		if old, ok := recordedMapping(e.obj, b.UID); ok && sameMapping(old, m) {
			continue
		}
		if err := e.touch(); err != nil {
			return err
		}
		if _, err := recordMapping(e.obj, b.UID, m); err != nil {
			return err
		}
	}
	return nil
}

// secretOf returns the name of the Secret to project for sb: the one its
// status names, when that status is of the binding's current generation;
// else (the controller has not resolved the binding yet, as for a
// workload applied together with its ServiceBinding, or not since its
// spec changed) the one its service exposes now, read from the cache; ""
// when there is none yet. A status of an earlier generation may name the
// Secret of a service the binding no longer refers to.
func (w *Webhook) secretOf(ctx context.Context, sb *sbv1.ServiceBinding) (string, error) {
	if sb.Status.Binding != nil && sb.Status.Binding.Name != "" && sb.Status.ObservedGeneration == sb.Generation {
		return sb.Status.Binding.Name, nil
	}
	name, err := serviceSecret(ctx, w.r, sb.Namespace, sb.Spec.Service)
	var p *problem
	if errors.As(err, &p) {
		return "", nil
	}
	return name, err
}

// egress sets EgressAnnotation on a Pod to the endpoints of the Bindery
// bindings projected into it, whatever the Pod's creator wrote there: the
// annotation grants network access, so only the webhook decides it. A
// binding counts when the Pod carries its projection: the record
// annotation, which the Pod's creator may write too, and the volume of the
// Secret the binding exposes, which the creator could mount anyway. A
// binding whose endpoints cannot be read grants nothing, with a warning:
// the Pod is not refused for it (the webhook fails open on admission,
// closed on the network).
func (w *Webhook) egress(ctx context.Context, ns string, tpl *corev1.PodTemplateSpec, bindings []sbv1.ServiceBinding) ([]string, error) {
	byUID := map[types.UID]*sbv1.ServiceBinding{}
	for i := range bindings {
		byUID[bindings[i].UID] = &bindings[i]
	}
	endpoints := []Endpoint{}
	var warnings []string
	for _, uid := range Projected(tpl) {
		sb, ok := byUID[uid]
		if !ok || !strings.HasPrefix(sb.Spec.Service.APIVersion, catalogGroup+"/") {
			continue
		}
		if secret, err := w.secretOf(ctx, sb); err != nil || secret == "" || !hasProjection(tpl, uid, secret) {
			continue
		}
		eps, err := ServiceEndpoints(ctx, w.r, ns, sb.Spec.Service)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("servicebinding %s: its service's endpoints could not be read (%v); no network access granted for it", sb.Name, err))
			continue
		}
		for _, e := range eps {
			if !slices.ContainsFunc(endpoints, func(x Endpoint) bool { return endpointEqual(x, e) }) {
				endpoints = append(endpoints, e)
			}
		}
	}
	if len(endpoints) == 0 {
		if _, ok := tpl.Annotations[EgressAnnotation]; ok {
			warnings = append(warnings, fmt.Sprintf("annotation %s removed: no Bindery binding is projected into this Pod", EgressAnnotation))
		}
		delete(tpl.Annotations, EgressAnnotation)
		return warnings, nil
	}
	data, err := json.Marshal(endpoints)
	if err != nil {
		return warnings, fmt.Errorf("encode endpoints: %w", err)
	}
	setAnnotation(tpl, EgressAnnotation, string(data))
	return warnings, nil
}

// hasProjection says whether tpl has the volume of binding uid's projection, of
// the Secret secret.
func hasProjection(tpl *corev1.PodTemplateSpec, uid types.UID, secret string) bool {
	for _, v := range tpl.Spec.Volumes {
		if v.Name != VolumeName(uid) || v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil && s.Secret.Name == secret {
				return true
			}
		}
	}
	return false
}

var podKind = schema.GroupKind{Kind: "Pod"}

// guardEgress refuses a change of a Pod's EgressAnnotation: the webhook
// writes it when the Pod is created, from the bindings projected into it,
// and a sandbox the kubelet makes again for the Pod (after a crash or a
// reboot) is given the grants the annotation holds then.
func guardEgress(req admission.Request) admission.Response {
	var obj, old struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode Pod: %w", err))
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the Pod's previous version: %w", err))
	}
	v, ok := obj.Metadata.Annotations[EgressAnnotation]
	ov, ook := old.Metadata.Annotations[EgressAnnotation]
	if ok != ook || v != ov {
		return admission.Denied(fmt.Sprintf("metadata.annotations[%s]: set by Bindery when the Pod is created, from the bindings projected into it; it cannot be changed", EgressAnnotation))
	}
	return admission.Allowed("")
}

func endpointEqual(a, b Endpoint) bool {
	return a.Host == b.Host && a.Protocol == b.Protocol && slices.Equal(a.Ports, b.Ports)
}

// ServiceEndpoints reads the OSB endpoints from a Service Catalog
// ServiceBinding's status (status.endpoints); none when it has none. The
// binding is read without a copy of the cache's object, and the endpoints
// are converted from it directly.
func ServiceEndpoints(ctx context.Context, r client.Reader, ns string, ref sbv1.ServiceBindingServiceReference) ([]Endpoint, error) {
	var svc unstructured.Unstructured
	svc.SetAPIVersion(ref.APIVersion)
	svc.SetKind(ref.Kind)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &svc, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s: %w", ref.Kind, ref.Name, err)
	}
	raw, found, err := unstructured.NestedFieldNoCopy(svc.Object, "status", "endpoints")
	if err != nil || !found || raw == nil {
		return nil, err
	}
	eps, err := endpointsFrom(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s: status.endpoints%w", ref.Kind, ref.Name, err)
	}
	return eps, nil
}

// endpointsFrom converts status.endpoints as an unstructured object holds
// it. Errors start with the path below status.endpoints.
func endpointsFrom(raw any) ([]Endpoint, error) {
	items, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf(": %T, want an array", raw)
	}
	eps := make([]Endpoint, 0, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("[%d]: %T, want an object", i, item)
		}
		var e Endpoint
		if e.Host, ok = m["host"].(string); !ok {
			return nil, fmt.Errorf("[%d].host: %T, want a string", i, m["host"])
		}
		if p, present := m["protocol"]; present && p != nil {
			if e.Protocol, ok = p.(string); !ok {
				return nil, fmt.Errorf("[%d].protocol: %T, want a string", i, p)
			}
		}
		ports, ok := m["ports"].([]any)
		if !ok && m["ports"] != nil {
			return nil, fmt.Errorf("[%d].ports: %T, want an array", i, m["ports"])
		}
		for j, p := range ports {
			s, ok := p.(string)
			if !ok {
				return nil, fmt.Errorf("[%d].ports[%d]: %T, want a string", i, j, p)
			}
			e.Ports = append(e.Ports, s)
		}
		eps = append(eps, e)
	}
	return eps, nil
}

// Selects reports whether sb's workload reference selects obj of kind gk:
// same group and kind, and the name or the label selector matching. The
// version is not compared: the API server converts between versions.
func Selects(sb *sbv1.ServiceBinding, gk schema.GroupKind, obj metav1.Object) bool {
	ref := sb.Spec.Workload
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != gk.Group || ref.Kind != gk.Kind {
		return false
	}
	if ref.Name != "" {
		return ref.Name == obj.GetName()
	}
	if ref.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(obj.GetLabels()))
}

// immutable reports whether a kind's Pod template cannot change once
// created: such workloads are projected at admission only.
func immutable(gk schema.GroupKind) bool {
	return gk == podKind || (gk.Group == "batch" && gk.Kind == "Job")
}
