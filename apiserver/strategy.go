package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// strategy is the create, update and delete behaviour of one resource, in
// k8s.io/apiserver's terms (rest.RESTCreateStrategy, RESTUpdateStrategy,
// RESTDeleteStrategy), so that rest.BeforeCreate, BeforeUpdate and
// BeforeDelete give uid, timestamps, generateName, metadata validation and
// preconditions the behaviour of every Kubernetes API. The domain rules
// (plan exists, parameters match the schema) are the catalog's.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	namespaced bool
	// status is true for the status subresource: only status changes.
	status bool
	// secretRefs allows brokers' credentials in Secrets: there is a
	// cluster (and an engine reading them from it).
	secretRefs bool
}

func newStrategy(typer runtime.ObjectTyper, namespaced, status bool) *strategy {
	return &strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, namespaced: namespaced, status: status}
}

// NamespaceScoped says whether the resource lives in namespaces.
func (s *strategy) NamespaceScoped() bool { return s.namespaced }

// PrepareForCreate clears status (the engine owns it) and records the
// requesting user as the originating identity.
func (s *strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if k := kindOf(obj); k != nil && k.prepareCreate != nil {
		k.prepareCreate(ctx, obj)
	}
}

// Validate checks what the catalog does not: the catalog validates the
// rest when it records the object.
func (s *strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	if k := kindOf(obj); k != nil && k.brokerAuth != nil {
		return append(validateBrokerAuth(k.brokerAuth(obj), nil, false, s.secretRefs), brokerFinalizers(obj, nil)...)
	}
	return nil
}

// brokerFinalizers refuses finalizers a broker did not have: a broker is
// deleted at once, with its classes and plans, and a finalizer would be
// kept and shown but hold nothing. Those it has (from before this check)
// may stay or go.
func brokerFinalizers(obj, old runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	var had []string
	if old != nil {
		if o, err := meta.Accessor(old); err == nil {
			had = o.GetFinalizers()
		}
	}
	var errs field.ErrorList
	for i, f := range m.GetFinalizers() {
		if !slices.Contains(had, f) {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "finalizers").Index(i),
				"a broker is deleted at once, with its classes and plans: a finalizer cannot hold it"))
		}
	}
	return errs
}

// namespacedBrokerAuth is a ServiceBroker's authInfo in the
// ClusterServiceBroker's terms (a ServiceBroker's secretRef names no
// namespace: the Secret is in the broker's).
func namespacedBrokerAuth(obj runtime.Object) *v1beta1.ClusterServiceBrokerAuthInfo {
	in := obj.(*v1beta1.ServiceBroker).Spec.AuthInfo
	if in == nil {
		return nil
	}
	local := func(r *v1beta1.LocalObjectReference) *v1beta1.ObjectReference {
		if r == nil {
			return nil
		}
		return &v1beta1.ObjectReference{Name: r.Name}
	}
	a := &v1beta1.ClusterServiceBrokerAuthInfo{}
	if in.Basic != nil {
		a.Basic = &v1beta1.ClusterBasicAuthConfig{Username: in.Basic.Username, SecretRef: local(in.Basic.SecretRef)}
	}
	if in.Bearer != nil {
		a.Bearer = &v1beta1.ClusterBearerTokenAuthConfig{SecretRef: local(in.Bearer.SecretRef)}
	}
	return a
}

// validateBrokerAuth checks that credentials given through this API are in
// a Secret, and that there is a cluster to hold it (secretRefs): the
// catalog reads them there when it talks to the broker (the engine, which
// has the cluster). An authInfo left as it was (a broker registered through
// the REST API, its password sealed in the catalog) is fine.
func validateBrokerAuth(a, old *v1beta1.ClusterServiceBrokerAuthInfo, updating, secretRefs bool) field.ErrorList {
	if a == nil || updating && apiequality.Semantic.DeepEqual(a, old) {
		return nil
	}
	p := field.NewPath("spec", "authInfo")
	if !secretRefs {
		return field.ErrorList{field.Forbidden(p, "this API server runs standalone, without a cluster to read Secrets from: register brokers that need credentials through the catalog's REST API")}
	}
	var errs field.ErrorList
	if a.Basic != nil && a.Bearer != nil {
		errs = append(errs, field.Invalid(p, "basic and bearer", "give basic or bearer, not both"))
	}
	if a.Basic != nil && a.Basic.SecretRef == nil {
		errs = append(errs, field.Required(p.Child("basic", "secretRef"), "the Secret with the keys username and password"))
	}
	if a.Bearer != nil && a.Bearer.SecretRef == nil {
		errs = append(errs, field.Required(p.Child("bearer", "secretRef"), "the Secret with the key token"))
	}
	return errs
}

// WarningsOnCreate adds nothing: whether a class, plan or instance that an
// object names exists is known only inside the catalog's write, which
// adds its warning to the request's warning recorder itself
// (catalog/warnings.go); the handler chain sends it as a Warning header,
// as it does the strategies' warnings.
func (s *strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

// Canonicalize has nothing to normalise.
func (s *strategy) Canonicalize(runtime.Object) {}

// AllowCreateOnUpdate is false: objects are created with POST.
func (s *strategy) AllowCreateOnUpdate(context.Context) bool { return false }

// AllowUnconditionalUpdate lets an update without resourceVersion apply to
// the newest state.
func (s *strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

// PrepareForUpdate keeps what the request may not change: status on the
// main resource, everything but status on the status subresource. A spec
// change of an instance records the requesting user.
func (s *strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.status {
		prepareStatusUpdate(obj, old)
		return
	}
	if k := kindOf(obj); k != nil && k.prepareUpdate != nil {
		k.prepareUpdate(ctx, obj, old)
	}
}

// prepareInstanceUpdate keeps an instance's status and originating
// identity, unless the spec changes: then the identity is the requester's.
func prepareInstanceUpdate(ctx context.Context, obj, old runtime.Object) {
	o, prev := obj.(*v1beta1.ServiceInstance), old.(*v1beta1.ServiceInstance)
	o.Status = prev.Status
	o.Spec.UserInfo = prev.Spec.UserInfo
	if o.Spec.ExternalID == "" {
		o.Spec.ExternalID = prev.Spec.ExternalID // a replace that leaves it out keeps it
	}
	if !sameSpec(&o.Spec, &prev.Spec) {
		o.Spec.UserInfo = userInfo(ctx)
	}
}

// prepareStatusUpdate keeps the spec and the metadata a client may change
// of a kind with a writable status subresource.
func prepareStatusUpdate(obj, old runtime.Object) {
	k := kindOf(obj)
	if k == nil || k.keepSpec == nil {
		return
	}
	k.keepSpec(obj, old)
	om, prev := objectMetaOf(obj), objectMetaOf(old)
	om.Labels, om.Annotations, om.Finalizers = prev.Labels, prev.Annotations, prev.Finalizers
	om.OwnerReferences = prev.OwnerReferences
}

// ValidateUpdate checks the rules of an update the catalog does not: a
// binding's spec cannot change, nor that of an instance being deleted
// (Kubernetes' own rules for metadata, such as no new finalizers then,
// are rest.BeforeUpdate's).
func (s *strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	if s.status {
		return nil
	}
	k := kindOf(obj)
	switch {
	case k == nil:
	case k.validateUpdate != nil:
		return k.validateUpdate(obj, old)
	case k.brokerAuth != nil:
		return append(validateBrokerAuth(k.brokerAuth(obj), k.brokerAuth(old), true, s.secretRefs), brokerFinalizers(obj, old)...)
	}
	return nil
}

// validateInstanceUpdate forbids a spec change of an instance being
// deleted.
func validateInstanceUpdate(obj, old runtime.Object) field.ErrorList {
	o, prev := obj.(*v1beta1.ServiceInstance), old.(*v1beta1.ServiceInstance)
	if prev.DeletionTimestamp != nil && !sameSpec(&o.Spec, &prev.Spec) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"cannot change while the instance is being deleted: only labels, annotations and the removal of finalizers can")}
	}
	return nil
}

// validateBindingUpdate forbids any spec change of a binding.
func validateBindingUpdate(obj, old runtime.Object) field.ErrorList {
	if !sameSpec(&obj.(*v1beta1.ServiceBinding).Spec, &old.(*v1beta1.ServiceBinding).Spec) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"), "is immutable: create a new binding instead")}
	}
	return nil
}

// WarningsOnUpdate adds nothing, as WarningsOnCreate: the catalog's
// write warns itself.
func (s *strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// userInfo is the requesting user, as brokers receive it in the
// originating identity.
func userInfo(ctx context.Context) *v1beta1.UserInfo {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil
	}
	ui := &v1beta1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		ui.Extra = make(map[string]v1beta1.ExtraValue, len(extra))
		for k, v := range extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

// unavailableRetrySeconds is the Retry-After of an answer given while the
// database is unreachable.
const unavailableRetrySeconds = 5

// apiError turns a catalog error into a Kubernetes Status error: field
// errors become 422 Invalid with their paths, a taken name 409
// AlreadyExists on create, a stale resourceVersion 409 Conflict, an
// unreachable database 503 with Retry-After.
func apiError(err error, gr schema.GroupResource, gk schema.GroupKind, name string, creating bool) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	if v, ok := catalog.AsValidation(err); ok {
		return apierrors.NewInvalid(gk, name, fieldErrors(v))
	}
	if q, ok := catalog.AsQuota(err); ok {
		return quotaForbidden(gr, name, q)
	}
	var fc *catalog.FieldConflictError
	if errors.As(err, &fc) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
			Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, Causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueDuplicate, Field: fc.Field, Message: fc.Message}}},
			Message: fmt.Sprintf("%s %q: %s: %s", gk.Kind, name, fc.Field, fc.Message),
		}}
	}
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, catalog.ErrConflict):
		if creating && catalog.IsNameTaken(err) {
			return apierrors.NewAlreadyExists(gr, name)
		}
		return apierrors.NewConflict(gr, name, err)
	case errors.Is(err, catalog.ErrUnprocessable):
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
			Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name},
			Message: fmt.Sprintf("%s %q is invalid: %v", gk.Kind, name, err),
		}}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError(err.Error(), 1)
	case catalog.IsUnavailable(err):
		// As the REST API and /readyz: the database is down, not the
		// request wrong; clients retry after the delay (Retry-After).
		st := apierrors.NewServiceUnavailable("the database cannot be reached right now; try again in a few seconds")
		st.ErrStatus.Details = &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, RetryAfterSeconds: unavailableRetrySeconds}
		return st
	}
	return apierrors.NewInternalError(err)
}

// fieldErrors puts the catalog's field errors where the Kubernetes
// objects have them: name and namespace under metadata.
func fieldErrors(v *catalog.ValidationError) field.ErrorList {
	out := make(field.ErrorList, 0, len(v.Errors))
	for _, fe := range v.Errors {
		e := *fe
		switch {
		case e.Field == "name", e.Field == "namespace", strings.HasPrefix(e.Field, "labels"), strings.HasPrefix(e.Field, "annotations"), strings.HasPrefix(e.Field, "finalizers"):
			e.Field = "metadata." + e.Field
		}
		out = append(out, &e)
	}
	return out
}
