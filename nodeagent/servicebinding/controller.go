package servicebinding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
)

// Finalizer keeps a ServiceBinding until its projection is removed from
// the workloads.
const Finalizer = "servicebinding.bindery.dev/unproject"

// Reasons of the Ready condition.
const (
	ReasonProjected         = "Projected"
	ReasonServiceMissing    = "ServiceMissing"
	ReasonWorkloadMissing   = "WorkloadNotFound"
	ReasonWorkloadImmutable = "WorkloadImmutable"
	ReasonProjectionFailed  = "ProjectionFailed"
)

// Reconciler projects ServiceBindings into the workloads that exist: when a
// binding appears, changes (a new Secret: rotation) or goes. Workloads
// created later are projected at admission by the Webhook; both call
// Project. Pods and Jobs are left as they were created.
type Reconciler struct {
	client client.Client
	// apiReader reads past the cache, to retry a conflicting update.
	apiReader client.Reader
	mapper    meta.RESTMapper
	log       *slog.Logger

	ctrl    controller.Controller
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	// crdOf names the CRD that serves a watched kind, for the kinds that
	// a CRD serves; goneCRDs are CRDs deleted since they were seen, whose
	// kinds the RESTMapper may still map.
	crdOf    map[schema.GroupVersionKind]string
	goneCRDs map[string]bool
	mgr      ctrl.Manager
}

// SetupReconciler registers the controller with mgr.
func SetupReconciler(mgr ctrl.Manager, log *slog.Logger) (*Reconciler, error) {
	r := &Reconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper(), log: log, mgr: mgr,
		watched: map[schema.GroupVersionKind]bool{}, crdOf: map[schema.GroupVersionKind]string{}, goneCRDs: map[string]bool{}}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&sbv1.ServiceBinding{}).
		Watches(&sbv1.ClusterWorkloadResourceMapping{}, handler.EnqueueRequestsFromMapFunc(r.allBindings)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfService)).
		WatchesMetadata(&apiextensionsv1.CustomResourceDefinition{}, r.crdEvents()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptrTrue()}).
		Build(r)
	if err != nil {
		return nil, fmt.Errorf("build servicebinding controller: %w", err)
	}
	r.ctrl = c
	return r, nil
}

// Reconcile brings one ServiceBinding's workloads and status in line with
// its spec, level-triggered.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sb sbv1.ServiceBinding
	if err := r.client.Get(ctx, req.NamespacedName, &sb); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := r.log.With("servicebinding", req.String())
	if sb.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(&sb, Finalizer) {
			return reconcile.Result{}, nil
		}
		if err := r.unprojectAll(ctx, &sb); err != nil {
			return reconcile.Result{}, err
		}
		orig := sb.DeepCopy()
		controllerutil.RemoveFinalizer(&sb, Finalizer)
		if err := r.client.Patch(ctx, &sb, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		others := requests(r.listBindings(ctx, sb.Namespace), func(o *sbv1.ServiceBinding) bool { return o.UID != sb.UID })
		return reconcile.Result{}, r.labelNamespace(ctx, sb.Namespace, len(others) > 0)
	}
	orig := sb.DeepCopy()
	if controllerutil.AddFinalizer(&sb, Finalizer) {
		if err := r.client.Patch(ctx, &sb, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if err := r.labelNamespace(ctx, sb.Namespace, true); err != nil {
		return reconcile.Result{}, err
	}
	status := sb.Status.DeepCopy()
	status.ObservedGeneration = sb.Generation

	secret, svcErr := r.resolveService(ctx, &sb)
	if svcErr != nil {
		var permanent *problem
		if !errors.As(svcErr, &permanent) {
			return reconcile.Result{}, svcErr
		}
		// The Secret resolved before belongs to the service as it was: the
		// webhook projects the Secret the status names, so it must not
		// outlive the service that exposed it.
		status.Binding = nil
		setCondition(status, sb.Generation, sbv1.ConditionServiceAvailable, metav1.ConditionFalse, permanent.reason, permanent.msg)
		setCondition(status, sb.Generation, sbv1.ConditionReady, metav1.ConditionFalse, permanent.reason, permanent.msg)
		return reconcile.Result{}, r.writeStatus(ctx, &sb, status)
	}
	setCondition(status, sb.Generation, sbv1.ConditionServiceAvailable, metav1.ConditionTrue, "Available", "")
	status.Binding = &sbv1.ServiceBindingSecretReference{Name: secret}

	reason, msg, err := r.projectAll(ctx, log, &sb, secret)
	if err != nil {
		return reconcile.Result{}, err
	}
	if reason == "" {
		setCondition(status, sb.Generation, sbv1.ConditionReady, metav1.ConditionTrue, ReasonProjected, "")
	} else {
		setCondition(status, sb.Generation, sbv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	}
	return reconcile.Result{}, r.writeStatus(ctx, &sb, status)
}

// NamespaceLabel marks the namespaces that hold ServiceBindings; the
// webhook configuration's namespaceSelector matches it, so that workloads
// elsewhere never cost a webhook call.
const NamespaceLabel = "servicebinding.bindery.dev/bound"

// labelNamespace sets or removes NamespaceLabel on ns.
func (r *Reconciler) labelNamespace(ctx context.Context, ns string, bound bool) error {
	var n metav1.PartialObjectMetadata
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		return client.IgnoreNotFound(err)
	}
	if (n.Labels[NamespaceLabel] == "true") == bound {
		return nil
	}
	patch := client.MergeFrom(n.DeepCopy())
	if bound {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[NamespaceLabel] = "true"
	} else {
		delete(n.Labels, NamespaceLabel)
	}
	if err := r.client.Patch(ctx, &n, patch); err != nil {
		return fmt.Errorf("label namespace %s: %w", ns, err)
	}
	return nil
}

// problem is a condition the user must fix; it is written to the status
// rather than retried.
type problem struct{ reason, msg string }

func (p *problem) Error() string { return p.msg }

// resolveService returns the name of the Secret sb's service exposes,
// after making sure that the service's kind is watched.
func (r *Reconciler) resolveService(ctx context.Context, sb *sbv1.ServiceBinding) (string, error) {
	ref := sb.Spec.Service
	if !(ref.APIVersion == "v1" && ref.Kind == "Secret") {
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if err := r.watch(ctx, gvk, r.bindingsOfService, false); err != nil {
			if meta.IsNoMatchError(err) {
				return "", &problem{ReasonServiceMissing, fmt.Sprintf("the server does not serve %s %s", ref.APIVersion, ref.Kind)}
			}
			return "", err
		}
	}
	return serviceSecret(ctx, r.client, sb.Namespace, ref)
}

// noSecretAnnotation on a Service Catalog ServiceBinding (catalog's
// NoSecretAnnotation) says it has no Secret: its credentials reach Pods
// through the CSI driver only.
const noSecretAnnotation = "bindery.dev/no-secret"

// serviceSecret returns the name of the Secret that the service ref in
// namespace ns exposes: a Direct Secret Reference's own name once the
// Secret exists (only its metadata is read), else the Provisioned
// Service's status.binding.name. What the user must fix is a *problem.
func serviceSecret(ctx context.Context, c client.Reader, ns string, ref sbv1.ServiceBindingServiceReference) (string, error) {
	key := client.ObjectKey{Namespace: ns, Name: ref.Name}
	if ref.APIVersion == "v1" && ref.Kind == "Secret" {
		var s metav1.PartialObjectMetadata
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := c.Get(ctx, key, &s, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) {
				return "", &problem{ReasonServiceMissing, fmt.Sprintf("Secret %s not found", ref.Name)}
			}
			return "", fmt.Errorf("get secret %s: %w", ref.Name, err)
		}
		return ref.Name, nil
	}
	var svc unstructured.Unstructured
	svc.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	if err := c.Get(ctx, key, &svc, client.UnsafeDisableDeepCopy); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return "", &problem{ReasonServiceMissing, fmt.Sprintf("%s %s not found", ref.Kind, ref.Name)}
		case meta.IsNoMatchError(err):
			return "", &problem{ReasonServiceMissing, fmt.Sprintf("the server does not serve %s %s", ref.APIVersion, ref.Kind)}
		}
		return "", fmt.Errorf("get %s %s: %w", ref.Kind, ref.Name, err)
	}
	name, _, _ := unstructured.NestedString(svc.Object, "status", "binding", "name")
	if name == "" && svc.GetAnnotations()[noSecretAnnotation] == "true" {
		return "", &problem{ReasonServiceMissing, fmt.Sprintf("%s %s asks for no Secret (%s), so there is none to project: mount it with the CSI driver csi.bindery.dev", ref.Kind, ref.Name, noSecretAnnotation)}
	}
	if name == "" {
		return "", &problem{ReasonServiceMissing, fmt.Sprintf("%s %s has no status.binding.name yet", ref.Kind, ref.Name)}
	}
	return name, nil
}

// projectAll projects sb into every workload it selects and removes it from
// those that carry it but are no longer selected. A non-empty reason is a
// problem for the Ready condition.
func (r *Reconciler) projectAll(ctx context.Context, log *slog.Logger, sb *sbv1.ServiceBinding, secret string) (reason, msg string, err error) {
	gvk := schema.FromAPIVersionAndKind(sb.Spec.Workload.APIVersion, sb.Spec.Workload.Kind)
	if err := r.watch(ctx, gvk, r.bindingsOfWorkload, true); err != nil {
		if meta.IsNoMatchError(err) {
			return ReasonWorkloadMissing, fmt.Sprintf("the server does not serve %s %s", sb.Spec.Workload.APIVersion, sb.Spec.Workload.Kind), nil
		}
		return "", "", err
	}
	gvr, err := r.resource(gvk)
	if err != nil {
		return "", "", err
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.client.List(ctx, &list, client.InNamespace(sb.Namespace)); err != nil {
		return "", "", fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	m, err := lookupMapping(ctx, r.client, gvk, gvr)
	if err != nil {
		return ReasonProjectionFailed, err.Error(), nil
	}
	b := BindingFor(sb, secret)
	var problems []string
	matched := 0
	for i := range list.Items {
		w := &list.Items[i]
		selected := Selects(sb, gvk.GroupKind(), w)
		if !selected && !carries(w, m, sb.UID) {
			continue
		}
		if selected {
			matched++
		}
		ps, err := r.projectInto(ctx, log, w, m, gvk, b, selected)
		if err != nil {
			return "", "", err
		}
		problems = append(problems, ps...)
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		reason := ReasonProjectionFailed
		if strings.Contains(problems[0], "projected only when created") {
			reason = ReasonWorkloadImmutable
		}
		return reason, strings.Join(problems, "; "), nil
	}
	if matched == 0 && sb.Spec.Workload.Name != "" {
		return ReasonWorkloadMissing, fmt.Sprintf("%s %s not found", sb.Spec.Workload.Kind, sb.Spec.Workload.Name), nil
	}
	return "", "", nil
}

// projectInto projects b into workload w when the binding selects it, and
// removes it otherwise. It returns the problems for the Ready condition: a
// workload that cannot be changed, and containers that the projection had
// to leave without the binding's mount (a user's volume mounted at its
// path), which only the user can resolve.
func (r *Reconciler) projectInto(ctx context.Context, log *slog.Logger, w *unstructured.Unstructured, m Mapping, gvk schema.GroupVersionKind, b Binding, selected bool) ([]string, error) {
	var unbound []string
	changed, problem, err := r.apply(ctx, w, gvk, func(obj map[string]any) (bool, error) {
		unbound = nil
		if !selected {
			return unprojectWorkload(obj, m, b.UID)
		}
		changed, warnings, err := projectWorkload(obj, gvk.GroupKind(), m, b)
		for _, warning := range warnings {
			if warning.Unbound {
				unbound = append(unbound, fmt.Sprintf("%s %s: %s", gvk.Kind, w.GetName(), warning.Message))
			}
		}
		return changed, err
	})
	if err != nil {
		return nil, err
	}
	if changed {
		log.Info("projected", "workload", gvk.Kind+"/"+w.GetName(), "selected", selected, "secret", b.Secret)
	}
	if problem != "" {
		return append(unbound, problem), nil
	}
	return unbound, nil
}

// apply changes a copy of workload w's object with f, which reports
// whether it changed it, and writes it back when it did. A conflict (the
// cache was behind, or another writer came first) is retried at once on a
// fresh read from the API server, with jittered backoff, rather than
// through the workqueue's growing delays; other errors go back to the
// workqueue. A problem is a message for the Ready condition: an error of
// f (a template that cannot be read or written), or a Pod or Job to
// change.
func (r *Reconciler) apply(ctx context.Context, w *unstructured.Unstructured, gvk schema.GroupVersionKind, f func(obj map[string]any) (bool, error)) (changed bool, problem string, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed, problem = false, ""
		// A copy: a change cut short by an error leaves w as it was read.
		obj := runtime.DeepCopyJSON(w.Object)
		ch, err := f(obj)
		if err != nil {
			problem = fmt.Sprintf("%s %s: %v", gvk.Kind, w.GetName(), err)
			return nil
		}
		if !ch {
			return nil
		}
		if immutable(gvk.GroupKind()) {
			problem = fmt.Sprintf("%s %s was created without this projection; %ss are projected only when created: recreate it", gvk.Kind, w.GetName(), gvk.Kind)
			return nil
		}
		w.Object = obj
		err = r.client.Update(ctx, w)
		if apierrors.IsConflict(err) {
			if gerr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(w), w); gerr != nil {
				return gerr
			}
		}
		changed = err == nil
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("update %s %s: %w", gvk.Kind, w.GetName(), err)
	}
	return changed, problem, nil
}

// unprojectAll removes sb from every workload that carries it.
func (r *Reconciler) unprojectAll(ctx context.Context, sb *sbv1.ServiceBinding) error {
	gvk := schema.FromAPIVersionAndKind(sb.Spec.Workload.APIVersion, sb.Spec.Workload.Kind)
	gvr, _, err := r.served(ctx, gvk)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := lookupMapping(ctx, r.client, gvk, gvr)
	if err != nil {
		m, _ = MappingFor(gvk.GroupKind(), gvk.Version, nil)
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.client.List(ctx, &list, client.InNamespace(sb.Namespace)); err != nil {
		return fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	for i := range list.Items {
		w := &list.Items[i]
		if immutable(gvk.GroupKind()) || !carries(w, m, sb.UID) {
			continue
		}
		unproject := func(obj map[string]any) (bool, error) { return unprojectWorkload(obj, m, sb.UID) }
		if _, _, err := r.apply(ctx, w, gvk, unproject); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// carries reports whether binding uid is projected into workload w: its
// mapping is recorded in w's annotations, or (projected before mappings
// were recorded) its record is in the template's annotations where m
// puts them.
func carries(w *unstructured.Unstructured, m Mapping, uid types.UID) bool {
	if ann, _ := nestedStringMap(w.Object, workloadAnnotations); ann != nil {
		if _, ok := ann[mappingPrefix+string(uid)]; ok {
			return true
		}
	}
	ann, _ := nestedStringMap(w.Object, m.Annotations)
	_, ok := ann[recordPrefix+string(uid)]
	return ok
}

// served returns the resource of gvk and the name of the CRD that serves
// it (empty for built-in and aggregated kinds), or a no-match error for a
// kind whose CRD was deleted, which the RESTMapper may still map: reading
// it through the cache would start an informer that never syncs.
func (r *Reconciler) served(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, string, error) {
	gvr, err := r.resource(gvk)
	if err != nil {
		return gvr, "", err
	}
	crd := gvr.Resource + "." + gvr.Group
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.client.Get(ctx, client.ObjectKey{Name: crd}, &m); err != nil {
		crd = ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if crd == "" && r.goneCRDs[gvr.Resource+"."+gvr.Group] {
		return gvr, "", &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return gvr, crd, nil
}

func (r *Reconciler) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	rm, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return rm.Resource, nil
}

// watch starts, once per kind, a watch on the objects of gvk that wakes
// the ServiceBindings f names: the kinds of workloads and services are only
// known from the bindings. The objects land in the manager's cache, which
// the reconciler then reads. Workloads wake bindings only when their spec
// or labels change, not on every status update.
func (r *Reconciler) watch(ctx context.Context, gvk schema.GroupVersionKind, f handler.MapFunc, workload bool) error {
	_, crd, err := r.served(ctx, gvk)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] {
		return nil
	}
	if crd != "" {
		r.crdOf[gvk] = crd
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	var preds []predicate.Predicate
	if workload {
		preds = append(preds, predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))
	}
	if err := r.ctrl.Watch(source.Kind(r.mgr.GetCache(), client.Object(obj), handler.EnqueueRequestsFromMapFunc(f), preds...)); err != nil {
		return fmt.Errorf("watch %s: %w", gvk, err)
	}
	r.watched[gvk] = true
	return nil
}

// crdEvents follows the CRDs: when one is deleted, the watches of the
// kinds it served are stopped (their informers would otherwise retry
// "Failed to watch" for ever) and every binding is reconciled, so that
// those using the kinds say so; when one is created or changes, the
// bindings are reconciled again, and start the watches anew.
func (r *Reconciler) crdEvents() handler.Funcs {
	enqueueAll := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.allBindings(ctx, nil) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if r.crdBack(e.Object.GetName()) {
				enqueueAll(ctx, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if r.crdBack(e.ObjectNew.GetName()) {
				enqueueAll(ctx, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if r.crdGone(ctx, e.Object.GetName()) {
				enqueueAll(ctx, q)
			}
		},
	}
}

// crdGone stops the watches of the kinds the CRD served, and reports
// whether there were any.
func (r *Reconciler) crdGone(ctx context.Context, crd string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	stopped := false
	for gvk, name := range r.crdOf {
		if name != crd {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := r.mgr.GetCache().RemoveInformer(ctx, obj); err != nil {
			r.log.Warn("stop watching a kind whose CRD was deleted", "kind", gvk.String(), "err", err)
		}
		delete(r.watched, gvk)
		delete(r.crdOf, gvk)
		r.goneCRDs[crd] = true
		stopped = true
		r.log.Info("stopped watching: its CRD was deleted", "kind", gvk.String(), "crd", crd)
	}
	return stopped
}

// crdBack reports whether the CRD had been deleted while its kinds were
// watched, forgetting that it was.
func (r *Reconciler) crdBack(crd string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.goneCRDs[crd]
	delete(r.goneCRDs, crd)
	return was
}

// Watched lists the kinds of services and workloads watched now.
func (r *Reconciler) Watched() []schema.GroupVersionKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []schema.GroupVersionKind
	for gvk := range r.watched {
		out = append(out, gvk)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (r *Reconciler) listBindings(ctx context.Context, ns string) []sbv1.ServiceBinding {
	var list sbv1.ServiceBindingList
	opts := []client.ListOption{}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := r.client.List(ctx, &list, opts...); err != nil {
		r.log.Error("list servicebindings", "err", err)
		return nil
	}
	return list.Items
}

func requests(items []sbv1.ServiceBinding, keep func(*sbv1.ServiceBinding) bool) []reconcile.Request {
	var out []reconcile.Request
	for i := range items {
		if keep(&items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&items[i])})
		}
	}
	return out
}

func (r *Reconciler) allBindings(ctx context.Context, _ client.Object) []reconcile.Request {
	return requests(r.listBindings(ctx, ""), func(*sbv1.ServiceBinding) bool { return true })
}

func (r *Reconciler) bindingsOfService(ctx context.Context, o client.Object) []reconcile.Request {
	gvk := o.GetObjectKind().GroupVersionKind()
	return requests(r.listBindings(ctx, o.GetNamespace()), func(sb *sbv1.ServiceBinding) bool {
		gv, _ := schema.ParseGroupVersion(sb.Spec.Service.APIVersion)
		return sb.Spec.Service.Name == o.GetName() && sb.Spec.Service.Kind == gvk.Kind && gv.Group == gvk.Group ||
			(gvk.Kind == "" || gvk.Kind == "Secret") && sb.Spec.Service.Kind == "Secret" && sb.Spec.Service.Name == o.GetName()
	})
}

// bindingsOfWorkload wakes the bindings that select the workload or that
// are projected into it (and may have to leave it).
func (r *Reconciler) bindingsOfWorkload(ctx context.Context, o client.Object) []reconcile.Request {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	gvk := u.GroupVersionKind()
	m, _ := MappingFor(gvk.GroupKind(), gvk.Version, nil)
	return requests(r.listBindings(ctx, o.GetNamespace()), func(sb *sbv1.ServiceBinding) bool {
		return Selects(sb, gvk.GroupKind(), u) || carries(u, m, sb.UID)
	})
}

func setCondition(st *sbv1.ServiceBindingStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

func (r *Reconciler) writeStatus(ctx context.Context, sb *sbv1.ServiceBinding, st *sbv1.ServiceBindingStatus) error {
	if equalStatus(&sb.Status, st) {
		return nil
	}
	orig := sb.DeepCopy()
	sb = sb.DeepCopy()
	sb.Status = *st
	// A merge patch: the status is the controller's alone, so there is no
	// concurrent writer to lose, and no conflict to retry.
	if err := r.client.Status().Patch(ctx, sb, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("update status: %w", err))
	}
	return nil
}

func equalStatus(a, b *sbv1.ServiceBindingStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || (a.Binding == nil) != (b.Binding == nil) ||
		(a.Binding != nil && a.Binding.Name != b.Binding.Name) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, c := range b.Conditions {
		o := meta.FindStatusCondition(a.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}
