package apiserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/catalog/resourcequota"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// TestAggregatedQuota drives quotas and plan visibility through a real
// kube-apiserver's aggregation layer, as the cluster's users meet them: a
// ResourceQuota of the namespace on count/serviceinstances,
// count/servicebindings and count/servicebrokers, which the engine's copier (here run alone, as
// the engine's ServiceAccount) brings into the catalog, refuses the
// creation past it in kube-apiserver's words, through the Kubernetes API
// and the catalog's other doors alike; 20 creations at once for the last 5
// places make exactly 5; Bindery's own quota refuses in the same words; a
// plan restricted to another namespace is not listed, found or
// provisioned for Carol (who edits team-a), while the cluster's admin sees
// it.
func TestAggregatedQuota(t *testing.T) {
	a := aggregate(t, false)
	ctx := t.Context()
	a.copyResourceQuotas()
	sc := a.clientsetAs(carol)

	// A ResourceQuota of team-a: 7 instances, 1 binding, 1 broker.
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "objects", Namespace: team}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		resourcequota.Instances: resource.MustParse("7"), resourcequota.Bindings: resource.MustParse("1"), resourcequota.Brokers: resource.MustParse("1")}}}
	if _, err := a.kube.CoreV1().ResourceQuotas(team).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitResourceQuota(func(st *catalog.QuotaStatus) bool { return st.Instances.Limit != nil && *st.Instances.Limit == 7 })
	for i := range 2 {
		a.kubectl(carol, []byte(quotaInstance(fmt.Sprintf("db-%d", i), "small")), "create", "-f", "-")
	}
	// 20 at once for the last 5 places.
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("racer-%d", i), Namespace: team},
				Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small"}}}
			_, errs[i] = sc.ServicecatalogV1beta1().ServiceInstances(team).Create(ctx, in, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: objects"):
			t.Errorf("a racer: %v", err)
		}
	}
	if created != 5 {
		t.Errorf("%d of 20 racers created an instance, want 5", created)
	}
	want := `serviceinstances.servicecatalog.k8s.io "db-9" is forbidden: exceeded quota: objects, requested: count/serviceinstances.servicecatalog.k8s.io=1, ` +
		`used: count/serviceinstances.servicecatalog.k8s.io=7, limited: count/serviceinstances.servicecatalog.k8s.io=7`
	if _, err := a.cluster.KubectlAs(t, carol, []byte(quotaInstance("db-9", "small")), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("one instance more: %v, want %q", err, want)
	}
	// The catalog's other doors (REST, the CLI, the web UI) meet the same
	// limit in the catalog.
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small"}}
	in.Name, in.Namespace = "db-9", team
	if _, err := a.store.CreateInstance(ctx, in); err == nil || err.Error() != "namespace team-a may have 7 instances and has 7 (ResourceQuota objects)" {
		t.Errorf("the catalog's creation past the ResourceQuota: %v", err)
	}
	a.kubectl(carol, []byte(quotaBinding("app-1")), "create", "-f", "-")
	if _, err := a.cluster.KubectlAs(t, carol, []byte(quotaBinding("app-2")), "create", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), "exceeded quota: objects, requested: count/servicebindings.servicecatalog.k8s.io=1, used: count/servicebindings.servicecatalog.k8s.io=1, limited: count/servicebindings.servicecatalog.k8s.io=1") {
		t.Errorf("one binding more: %v", err)
	}
	broker := func(name string) []byte {
		return []byte("apiVersion: servicecatalog.k8s.io/v1beta1\nkind: ServiceBroker\nmetadata:\n  name: " + name +
			"\n  namespace: " + team + "\nspec:\n  url: https://broker.example\n")
	}
	a.kubectl(carol, broker("own-1"), "create", "-f", "-")
	if _, err := a.cluster.KubectlAs(t, carol, broker("own-2"), "create", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), "exceeded quota: objects, requested: count/servicebrokers.servicecatalog.k8s.io=1, used: count/servicebrokers.servicecatalog.k8s.io=1, limited: count/servicebrokers.servicecatalog.k8s.io=1") {
		t.Errorf("one broker more: %v", err)
	}

	// Raised, then gone: room again; and Bindery's own quota, stricter,
	// in the same words.
	rq.Spec.Hard[resourcequota.Instances] = resource.MustParse("8")
	if _, err := a.kube.CoreV1().ResourceQuotas(team).Update(ctx, rq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitResourceQuota(func(st *catalog.QuotaStatus) bool { return *st.Instances.Limit == 8 })
	a.kubectl(carol, []byte(quotaInstance("db-9", "small")), "create", "-f", "-")
	if err := a.kube.CoreV1().ResourceQuotas(team).Delete(ctx, "objects", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitResourceQuota(func(st *catalog.QuotaStatus) bool { return len(st.ResourceQuotas) == 0 })
	eight := 8
	if _, err := a.store.SetQuota(ctx, &catalog.Quota{Namespace: team, Instances: &eight, PaidPlans: false}); err != nil {
		t.Fatal(err)
	}
	want = `exceeded quota: bindery, requested: count/serviceinstances.servicecatalog.k8s.io=1, used: count/serviceinstances.servicecatalog.k8s.io=8, limited: count/serviceinstances.servicecatalog.k8s.io=8`
	if _, err := a.cluster.KubectlAs(t, carol, []byte(quotaInstance("db-10", "small")), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("past Bindery's quota: %v, want %q", err, want)
	}
	if _, err := a.store.SetQuota(ctx, &catalog.Quota{Namespace: team, PaidPlans: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cluster.KubectlAs(t, carol, []byte(quotaInstance("rich", "large-async")), "create", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), `"rich" is forbidden: namespace team-a may not use paid plans, and plan large-async is not free`) {
		t.Errorf("a paid plan: %v", err)
	}

	a.checkPlanVisibility(sc)
}

// checkPlanVisibility restricts the cluster plan "standard" to team-a,
// then to team-b: Carol (edit in team-a) sees it only while team-a is
// among its namespaces; Victor (view in team-a: he provisions nowhere)
// never; the admin always. An instance Carol makes of it while it is
// hidden from team-a waits for it, unresolved.
func (a *aggregated) checkPlanVisibility(sc versioned.Interface) {
	t, ctx := a.t, context.Background()
	plans, err := a.store.ListPlans(ctx, catalog.PlanFilter{Name: "standard"}, catalog.ListOptions{})
	if err != nil || len(plans.Items) != 1 {
		t.Fatalf("the plan standard: %v", err)
	}
	name := plans.Items[0].Name
	sees := func(user string) bool {
		t.Helper()
		out := a.kubectl(user, nil, "get", "clusterserviceplans", "-o", "jsonpath={.items[*].spec.externalName}")
		return slices.Contains(strings.Fields(out), "standard")
	}
	for _, step := range []struct {
		namespaces         []string
		carol, victor, adm bool
	}{
		{[]string{team}, true, false, true},
		{[]string{"team-b"}, false, false, true},
	} {
		if _, err := a.store.SetPlanVisibility(ctx, name, step.namespaces); err != nil {
			t.Fatal(err)
		}
		if got := [3]bool{sees(carol), sees(victor), sees(kubetest.Admin)}; got != [3]bool{step.carol, step.victor, step.adm} {
			t.Errorf("visible to %v: carol, victor, admin see it: %v, want %v", step.namespaces, got, [3]bool{step.carol, step.victor, step.adm})
		}
	}
	if _, err := sc.ServicecatalogV1beta1().ClusterServicePlans().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("carol reading the hidden plan by name: %v, want NotFound", err)
	}
	a.kubectl(kubetest.Admin, nil, "get", "clusterserviceplan", name)
	a.kubectl(carol, []byte(quotaInstance("hidden", "standard")), "create", "-f", "-")
	ref := a.kubectl(carol, nil, "get", "serviceinstance", "hidden", "-n", team, "-o", "jsonpath={.spec.clusterServicePlanRef}")
	if ref != "" {
		t.Errorf("an instance of a plan hidden from its namespace resolved to %s", ref)
	}
	a.checkHiddenPlanWatch(sc, name)
}

// checkHiddenPlanWatch: a change of a plan hidden from Carol before and
// after it (restricted to team-b, then to team-b and team-c) sends her
// watch nothing, neither the plan nor the namespaces it is restricted to;
// made visible to team-a, it is ADDED; hidden again, it is DELETED with
// no more of it than its name.
func (a *aggregated) checkHiddenPlanWatch(sc versioned.Interface, name string) {
	t, ctx := a.t, a.t.Context()
	plans := sc.ServicecatalogV1beta1().ClusterServicePlans()
	l, err := plans.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := plans.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, namespaces := range [][]string{{"team-b", "team-c"}, {team}, {"team-b", "team-secret"}} {
		if _, err := a.store.SetPlanVisibility(ctx, name, namespaces); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []watch.EventType{watch.Added, watch.Deleted} {
		select {
		case ev := <-w.ResultChan():
			p, _ := ev.Object.(*v1beta1.ClusterServicePlan)
			switch {
			case ev.Type != want || p == nil || p.Name != name:
				t.Fatalf("carol's watch sent %s %+v, want %s of plan %s", ev.Type, ev.Object, want, name)
			case want == watch.Deleted && (len(p.Annotations) > 0 || p.Spec.ExternalName != ""):
				t.Errorf("carol's watch sent the plan she lost sight of as it is now: %+v", p)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("carol's watch sent no %s of plan %s", want, name)
		}
	}
}

// copyResourceQuotas runs the engine's ResourceQuota copier as the
// engine's ServiceAccount, until the test ends.
func (a *aggregated) copyResourceQuotas() {
	cfg, err := clientcmd.BuildConfigFromFlags("", a.serviceAccountKubeconfig("bindery-controller"))
	if err != nil {
		a.t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- resourcequota.Run(ctx, kube, a.store, slog.New(slog.NewTextHandler(testWriter{a.t}, nil)))
	}()
	a.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			a.t.Errorf("copier: %v", err)
		}
	})
}

// waitResourceQuota waits until team-a's quota status satisfies ok.
func (a *aggregated) waitResourceQuota(ok func(*catalog.QuotaStatus) bool) {
	a.t.Helper()
	eventually.Succeeds(a.t, 30*time.Second, func(ctx context.Context) error {
		st, err := a.store.QuotaStatus(ctx, team)
		if err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("team-a's quota status: %+v", st)
		}
		return nil
	})
}

// clientsetAs is the servicecatalog.k8s.io clientset of user, through
// kube-apiserver.
func (a *aggregated) clientsetAs(user string) versioned.Interface {
	sc, err := versioned.NewForConfig(a.cluster.ConfigFor(user))
	if err != nil {
		a.t.Fatal(err)
	}
	return sc
}

func quotaInstance(name, plan string) string {
	return fmt.Sprintf(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceInstance
metadata:
  name: %s
  namespace: team-a
spec:
  clusterServiceClassExternalName: postgresql
  clusterServicePlanExternalName: %s
`, name, plan)
}

func quotaBinding(name string) string {
	return fmt.Sprintf(`apiVersion: servicecatalog.k8s.io/v1beta1
kind: ServiceBinding
metadata:
  name: %s
  namespace: team-a
spec:
  instanceRef:
    name: db-0
`, name)
}
