package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// TestPlanAccess: a cluster plan restricted to namespaces is hidden from
// a user unless RBAC lets them create instances in one of them, or in
// every namespace; a watch turns a change that hides a plan from its user
// into DELETED (of the plan's name alone), one that shows it into ADDED,
// and sends nothing of a plan hidden before and after, or whose state
// before is unknown.
func TestPlanAccess(t *testing.T) {
	t.Parallel()
	var asked []string
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a.GetUser().GetName()+"@"+a.GetNamespace())
		if a.GetVerb() != "create" || a.GetResource() != "serviceinstances" || a.GetAPIGroup() != v1beta1.GroupName {
			return authorizer.DecisionDeny, "", nil
		}
		switch u := a.GetUser().GetName(); {
		case u == "admin", u == "carol" && a.GetNamespace() == "team-a":
			return authorizer.DecisionAllow, "", nil
		case u == "broken":
			return authorizer.DecisionNoOpinion, "", errors.New("no answer")
		}
		return authorizer.DecisionDeny, "", nil
	})
	plan := func(visibleIn *string) *v1beta1.ClusterServicePlan {
		p := &v1beta1.ClusterServicePlan{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		if visibleIn != nil {
			p.Annotations = map[string]string{catalog.VisibleInAnnotation: *visibleIn}
		}
		return p
	}
	a, b, none := "team-a,team-c", "team-b", ""
	pa := &planAccess{authz: authz}
	for _, tc := range []struct {
		user                     string
		public, inA, inB, inNone bool // hidden?
	}{
		{"admin", false, false, false, false},
		{"carol", false, false, true, true},
		{"victor", false, true, true, true},
		{"broken", false, true, true, true},
	} {
		ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: tc.user})
		hide := pa.hidden(ctx)
		got := [4]bool{hide.object(plan(nil)), hide.object(plan(&a)), hide.object(plan(&b)), hide.object(plan(&none))}
		if want := [4]bool{tc.public, tc.inA, tc.inB, tc.inNone}; got != want {
			t.Errorf("%s: hidden %v, want %v", tc.user, got, want)
		}
	}
	// Carol's decisions are kept for the request: asked once each.
	asked = nil
	ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "carol"})
	hide := pa.hidden(ctx)
	for range 3 {
		hide.object(plan(&b))
	}
	if len(asked) != 2 || asked[0] != "carol@" || asked[1] != "carol@team-b" {
		t.Errorf("asked %v", asked)
	}

	pred := newPredicate("", nil)
	pred.hide = pa.hidden(ctx)
	unknown := "unknown"
	for _, tc := range []struct {
		typ           watch.EventType
		before, after *string // unknown: the state before is not known
		want          watch.EventType
		sent          bool
	}{
		{watch.Added, nil, &b, "", false},
		{watch.Modified, &a, &b, watch.Deleted, true},
		{watch.Modified, nil, &b, watch.Deleted, true},
		{watch.Modified, &b, &b, "", false},
		{watch.Modified, &none, &b, "", false},
		{watch.Modified, &unknown, &b, "", false},
		{watch.Deleted, &b, &b, "", false},
		{watch.Added, nil, &a, watch.Added, true},
		{watch.Modified, &b, &a, watch.Added, true},
		{watch.Modified, &a, &a, watch.Modified, true},
		{watch.Modified, &unknown, &a, watch.Modified, true},
		{watch.Modified, nil, nil, watch.Modified, true},
	} {
		ev := hubEvent{typ: tc.typ, obj: plan(tc.after)}
		if tc.before != &unknown {
			ev.prev = attrsOf(plan(tc.before), nil)
		}
		got, sent := pred.event(ev, ev.obj)
		if got.Type != tc.want || sent != tc.sent {
			t.Errorf("%s of a plan visible in %v, before in %v: %q %v, want %q %v", tc.typ, tc.after, tc.before, got.Type, sent, tc.want, tc.sent)
		}
		if p := got.Object.(*v1beta1.ClusterServicePlan); sent && got.Type == watch.Deleted && (p.Name != "p" || len(p.Annotations) > 0) {
			t.Errorf("a plan hidden by a change is sent as %+v, want its name alone", p)
		}
	}
	// Standalone (no authorizer): nothing hidden.
	if (&planAccess{}).hidden(ctx) != nil {
		t.Error("a server without an authorizer hides plans")
	}
}

// TestQuotaForbidden: the catalog's quota refusals as kube-apiserver's
// ResourceQuota admission words them.
func TestQuotaForbidden(t *testing.T) {
	t.Parallel()
	gr := v1beta1.Resource("serviceinstances")
	for _, tc := range []struct {
		q    catalog.QuotaError
		want string
	}{
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaInstances, Limit: 10, Used: 10, Source: catalog.SourceNamespace},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: exceeded quota: bindery, requested: count/serviceinstances.servicecatalog.k8s.io=1, used: count/serviceinstances.servicecatalog.k8s.io=10, limited: count/serviceinstances.servicecatalog.k8s.io=10`},
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaInstances, Limit: 3, Used: 4, Source: catalog.SourceDefault},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: exceeded quota: bindery-default, requested: count/serviceinstances.servicecatalog.k8s.io=1, used: count/serviceinstances.servicecatalog.k8s.io=4, limited: count/serviceinstances.servicecatalog.k8s.io=3`},
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaBindings, Limit: 1, Used: 1, Source: "ResourceQuota/objects"},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: exceeded quota: objects, requested: count/servicebindings.servicecatalog.k8s.io=1, used: count/servicebindings.servicecatalog.k8s.io=1, limited: count/servicebindings.servicecatalog.k8s.io=1`},
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaPlan, Limit: 2, Used: 2, Source: catalog.SourceNamespace, Plan: "large", PlanName: "large-id"},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: exceeded quota: bindery, requested: large-id.clusterserviceplan.servicecatalog.k8s.io/serviceinstances=1, used: large-id.clusterserviceplan.servicecatalog.k8s.io/serviceinstances=2, limited: large-id.clusterserviceplan.servicecatalog.k8s.io/serviceinstances=2`},
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaPaid, Source: catalog.SourceNamespace, Plan: "large", PlanName: "large-id"},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: namespace team-a may not use paid plans, and plan large is not free`},
		{catalog.QuotaError{Namespace: "team-a", Resource: catalog.QuotaBrokers, Limit: 16, Used: 16, Source: catalog.SourceServer},
			`serviceinstances.servicecatalog.k8s.io "db" is forbidden: exceeded quota: --max-brokers-per-namespace, requested: count/servicebrokers.servicecatalog.k8s.io=1, used: count/servicebrokers.servicecatalog.k8s.io=16, limited: count/servicebrokers.servicecatalog.k8s.io=16`},
	} {
		err := apiError(&tc.q, gr, v1beta1.Kind("ServiceInstance"), "db", true)
		if err.Error() != tc.want {
			t.Errorf("got  %s\nwant %s", err, tc.want)
		}
	}
}

// TestHiddenPlansUnlisted: a cluster plan hidden from the user is in no
// list of theirs, paged or not (an unpaged list is read in chunks by
// another path than a page of 500 or less).
func TestHiddenPlansUnlisted(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	ctx := context.Background()
	plans, err := store.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil || len(plans.Items) < 2 {
		t.Fatalf("plans: %d, %v", len(plans.Items), err)
	}
	hidden := plans.Items[0].Name
	if _, err := store.SetPlanVisibility(ctx, hidden, []string{"team-b"}); err != nil {
		t.Fatal(err)
	}
	st := *storageOf(storages["clusterserviceplans"])
	st.access = &planAccess{authz: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "", nil
	})}
	uctx := genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: "victor"})
	for _, limit := range []int64{100, 0, 1000} {
		var names []string
		err := st.readList(uctx, &metainternalversion.ListOptions{Limit: limit}, nil, func(_ int64, _ string, objs []runtime.Object) error {
			for _, o := range objs {
				names = append(names, o.(*v1beta1.ClusterServicePlan).Name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != len(plans.Items)-1 || slices.Contains(names, hidden) {
			t.Errorf("limit %d: %v, want the %d plans but %s, hidden from the user", limit, names, len(plans.Items)-1, hidden)
		}
	}
}

// TestPlanAnnotationNarrowed: a plan restricted to namespaces is read by a
// user who is not cluster-wide with its annotation naming only their
// namespaces (where they may create instances), by name, in lists and in
// watches; a cluster-wide user reads it whole.
func TestPlanAnnotationNarrowed(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	ctx := context.Background()
	plans, err := store.ListPlans(ctx, catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil || len(plans.Items) == 0 {
		t.Fatalf("plans: %d, %v", len(plans.Items), err)
	}
	name := plans.Items[0].Name
	if _, err := store.SetPlanVisibility(ctx, name, []string{"team-a", "team-c"}); err != nil {
		t.Fatal(err)
	}
	st := *storageOf(storages["clusterserviceplans"])
	st.access = &planAccess{authz: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "root" || a.GetNamespace() == "team-a" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "", nil
	})}
	annotation := func(o runtime.Object) string {
		if shared, ok := o.(*sharedObject); ok {
			o = shared.obj
		}
		return o.(*v1beta1.ClusterServicePlan).Annotations[catalog.VisibleInAnnotation]
	}
	for who, want := range map[string]string{"alice": "team-a", "root": "team-a,team-c"} {
		uctx := genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: who})
		got, err := st.Get(uctx, name, &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reads := map[string]string{"get": annotation(got)}
		for _, limit := range []int64{100, 0} {
			err := st.readList(uctx, &metainternalversion.ListOptions{Limit: limit}, nil, func(_ int64, _ string, objs []runtime.Object) error {
				for _, o := range objs {
					if o.(*v1beta1.ClusterServicePlan).Name == name {
						reads[fmt.Sprintf("list of %d", limit)] = annotation(o)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		w, err := st.Watch(uctx, &metainternalversion.ListOptions{ResourceVersion: "0", FieldSelector: fields.OneTermEqualSelector("metadata.name", name)})
		if err != nil {
			t.Fatal(err)
		}
		reads["initial event"] = annotation((<-w.ResultChan()).Object)
		if _, err := store.SetPlanVisibility(ctx, name, []string{"team-a", "team-c", "team-" + who}); err != nil {
			t.Fatal(err)
		}
		reads["change"] = strings.TrimSuffix(annotation((<-w.ResultChan()).Object), ",team-"+who)
		w.Stop()
		if _, err := store.SetPlanVisibility(ctx, name, []string{"team-a", "team-c"}); err != nil {
			t.Fatal(err)
		}
		for read, got := range reads {
			if got != want {
				t.Errorf("%s, %s: the plan is visible in %q, want %q", who, read, got, want)
			}
		}
	}
}
