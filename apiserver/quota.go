package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// Quotas: the catalog refuses a creation a quota has no room for
// (catalog.QuotaError); the API answers as kube-apiserver's ResourceQuota
// admission does, 403 Forbidden "exceeded quota: NAME, requested: …,
// used: …, limited: …", so that clients and controllers that look for it
// (a GitOps tool retrying its sync) see what they know. NAME is the
// ResourceQuota's, or "bindery" for the namespace's own quota and
// "bindery-default" for the default quota (`bindery quota get -n NS`), or
// the flag that bounds a namespace's brokers.

// Names of Bindery's quotas in the Kubernetes API's refusals.
const (
	namespaceQuotaName = "bindery"
	defaultQuotaName   = "bindery-default"
)

// quotaForbidden is the refusal of a creation of name in gr that q
// refused.
func quotaForbidden(gr schema.GroupResource, name string, q *catalog.QuotaError) error {
	if q.Resource == catalog.QuotaPaid {
		return apierrors.NewForbidden(gr, name, errors.New(q.Error()))
	}
	quota := q.ResourceQuota()
	switch {
	case quota != "":
	case q.Source == catalog.SourceServer:
		// No object of the cluster holds it: the flag says where it is.
		quota = "--" + catalog.MaxBrokersFlag
	case q.Source == catalog.SourceDefault:
		quota = defaultQuotaName
	default:
		quota = namespaceQuotaName
	}
	// A namespace's instances of a plan are counted as a storage class's
	// claims are ("gold.storageclass.storage.k8s.io/persistentvolumeclaims").
	resource := "count/" + gr.String()
	switch q.Resource {
	case catalog.QuotaPlan:
		kind := "clusterserviceplan"
		if q.PlanNamespace != "" {
			kind = "serviceplan"
		}
		resource = fmt.Sprintf("%s.%s.%s/serviceinstances", q.PlanName, kind, v1beta1.GroupName)
	case catalog.QuotaInstances:
		resource = "count/serviceinstances." + v1beta1.GroupName
	case catalog.QuotaBindings:
		resource = "count/servicebindings." + v1beta1.GroupName
	case catalog.QuotaBrokers:
		resource = "count/servicebrokers." + v1beta1.GroupName
	}
	return apierrors.NewForbidden(gr, name, fmt.Errorf("exceeded quota: %s, requested: %s=1, used: %s=%d, limited: %s=%d",
		quota, resource, resource, q.Used, resource, q.Limit))
}

// Plan visibility: a cluster plan the catalog restricts to namespaces
// (catalog.VisibleInAnnotation) is listed, watched and read by name only by
// the users who may create ServiceInstances in one of them, or in every
// namespace (cluster-wide), as SubjectAccessReview (RBAC) says. A user's
// namespaces are not otherwise known to an API server; "may provision
// there" is what makes a namespace theirs for the marketplace. Everyone
// else is answered as if the plan did not exist. Standalone, every client
// is an administrator and sees every plan.

// planAccess decides which cluster plans the users of requests see.
type planAccess struct {
	authz authorizer.Authorizer
}

// planHider says, for the user of a request, whether a cluster plan
// restricted to namespaces is hidden from them; nil when nothing is. It
// judges the restriction alone, so a plan's state before a change (attrs)
// is judged as the plan is.
type planHider func(namespaces []string) bool

// object tells whether obj is a cluster plan hidden from the user.
func (h planHider) object(obj runtime.Object) bool {
	if h == nil {
		return false
	}
	namespaces, restricted := restrictedTo(obj)
	return restricted && h(namespaces)
}

// before tells whether an object, as it was before a change, was a
// cluster plan hidden from the user.
func (h planHider) before(a *attrs) bool {
	if h == nil {
		return false
	}
	namespaces, restricted := a.restriction()
	return restricted && h(namespaces)
}

// planNarrower gives a cluster plan restricted to namespaces as a user
// who is not cluster-wide reads it: its annotation names only the
// namespaces that are the user's (where they may create instances), as
// the catalog's REST API does for its tokens. Which other namespaces may
// use the plan is not theirs to know. It says whether a namespace is the
// user's (catalog.NarrowedVisibility): every one, for a cluster-wide
// user. Nil standalone (every client an administrator).
type planNarrower func(ns string) bool

// object is obj as the user reads it: a copy when it is a plan whose
// annotation names namespaces not theirs, else obj itself.
func (n planNarrower) object(obj runtime.Object) runtime.Object {
	p, ok := obj.(*v1beta1.ClusterServicePlan)
	if n == nil || !ok {
		return obj
	}
	annotations, cut := catalog.NarrowedVisibility(p.Annotations, n)
	if !cut {
		return obj
	}
	c := p.DeepCopy()
	c.Annotations = annotations
	return c
}

// hidden returns the planHider of the request of ctx: nil when nothing is
// hidden from its user.
func (pa *planAccess) hidden(ctx context.Context) planHider {
	hide, _ := pa.view(ctx)
	return hide
}

// view returns the planHider and planNarrower of the request of ctx: nil
// when nothing is hidden from its user, or narrowed. Decisions are kept
// for the request's life (the authorizer keeps them longer).
func (pa *planAccess) view(ctx context.Context) (planHider, planNarrower) {
	if pa == nil || pa.authz == nil {
		return nil, nil
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return func([]string) bool { return true }, func(string) bool { return false }
	}
	// A watch asks for as long as it lasts: what RBAC said is asked
	// again after accessTTL.
	may, since := map[string]bool{}, time.Now()
	allowed := func(ns string) bool {
		if time.Since(since) > accessTTL {
			may, since = map[string]bool{}, time.Now()
		}
		if v, ok := may[ns]; ok {
			return v
		}
		d, _, err := pa.authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "create", Namespace: ns,
			APIGroup: v1beta1.GroupName, APIVersion: v1beta1.SchemeGroupVersion.Version, Resource: "serviceinstances", ResourceRequest: true})
		may[ns] = err == nil && d == authorizer.DecisionAllow
		return may[ns]
	}
	hide := func(namespaces []string) bool {
		if allowed("") {
			return false
		}
		for _, ns := range namespaces {
			if allowed(ns) {
				return false
			}
		}
		return true
	}
	theirs := func(ns string) bool { return allowed("") || allowed(ns) }
	return hide, theirs
}

// accessTTL is how long a request (a watch) keeps what RBAC said of a
// namespace: as long as the delegating authorizer's cache.
const accessTTL = 10 * time.Second

// restrictedTo is the namespaces a cluster plan is restricted to, if it
// is.
func restrictedTo(obj runtime.Object) ([]string, bool) {
	p, ok := obj.(*v1beta1.ClusterServicePlan)
	if !ok {
		return nil, false
	}
	return catalog.VisibleNamespaces(&catalog.Meta{Annotations: p.Annotations})
}
