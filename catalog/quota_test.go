package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// quotaSetup is a store with a broker of the default catalogue and a paid
// plan ("gold") besides, registered for the cluster.
func quotaSetup(t *testing.T) (*catalog.Store, map[string]*catalog.ServicePlan) {
	t.Helper()
	services := osbtest.DefaultCatalog()
	gold := osbtest.Plan{ID: "gold-plan-id", Name: "gold", Description: "Costs money.", Free: new(false)}
	services[0].Plans = append(services[0].Plans, gold)
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	registerIn(t, s, "", "fake", fake.URL())
	plans, err := s.ListPlans(context.Background(), catalog.PlanFilter{}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*catalog.ServicePlan{}
	for _, p := range plans.Items {
		byName[p.Spec.ExternalName] = p
	}
	return s, byName
}

func instanceOf(ns, name, plan string) *catalog.Instance {
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: plan}}
	in.Name, in.Namespace = name, ns
	return in
}

func limit(n int) *int { return &n }

// refusedWith checks that err is the quota refusal that says want.
func refusedWith(t *testing.T, err error, want string) *catalog.QuotaError {
	t.Helper()
	q, ok := catalog.AsQuota(err)
	if !ok {
		t.Fatalf("got %v, want the quota refusal %q", err, want)
	}
	if q.Error() != want {
		t.Errorf("refusal %q, want %q", q.Error(), want)
	}
	return q
}

// TestQuotaInstances: a namespace's quota admits instances up to its
// limit and refuses the next with the sentence every door shows; other
// namespaces fall under the default quota; a lowered quota deletes
// nothing and admits nothing until there is room again.
func TestQuotaInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Instances: limit(3), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "", Instances: limit(1), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.CreateInstance(ctx, instanceOf("team-a", fmt.Sprintf("db-%d", i), osbtest.PlanSync)); err != nil {
			t.Fatalf("instance %d of 3: %v", i, err)
		}
	}
	_, err := s.CreateInstance(ctx, instanceOf("team-a", "db-3", osbtest.PlanSync))
	q := refusedWith(t, err, "namespace team-a may have 3 instances and has 3")
	if q.Resource != catalog.QuotaInstances || q.Limit != 3 || q.Used != 3 || q.Source != catalog.SourceNamespace {
		t.Errorf("refusal %+v", q)
	}
	// team-b has no quota of its own: the default's one instance.
	if _, err := s.CreateInstance(ctx, instanceOf("team-b", "db", osbtest.PlanSync)); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateInstance(ctx, instanceOf("team-b", "db-2", osbtest.PlanSync))
	refusedWith(t, err, "namespace team-b may have 1 instance and has 1 (the default quota)")

	// Lowered below what it has: nothing goes, nothing new comes.
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Instances: limit(1), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateInstance(ctx, instanceOf("team-a", "db-3", osbtest.PlanSync))
	refusedWith(t, err, "namespace team-a may have 1 instance and has 3")
	st, err := s.QuotaStatus(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if st.Instances.Used != 3 || *st.Instances.Limit != 1 || st.Instances.Source != catalog.SourceNamespace || st.Quota.Namespace != "team-a" {
		t.Errorf("status after lowering: %+v", st)
	}
	// A quota without a limit on instances: none applies.
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Bindings: limit(10), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "db-3", osbtest.PlanSync)); err != nil {
		t.Fatal(err)
	}
	// Its quota removed, the default holds for it.
	if err := s.DeleteQuota(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteQuota(ctx, "team-a"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("deleting a quota twice: %v", err)
	}
	_, err = s.CreateInstance(ctx, instanceOf("team-a", "db-4", osbtest.PlanSync))
	refusedWith(t, err, "namespace team-a may have 1 instance and has 4 (the default quota)")
}

// TestQuotaRace: 20 creations at once for the last 5 places end with
// exactly 5 more instances, and the 15 others refused by the quota.
func TestQuotaRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	for i := range 3 {
		if _, err := s.CreateInstance(ctx, instanceOf("race", fmt.Sprintf("before-%d", i), osbtest.PlanSync)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "race", Instances: limit(8), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			_, errs[i] = s.CreateInstance(ctx, instanceOf("race", fmt.Sprintf("racer-%d", i), osbtest.PlanSync))
		})
	}
	close(start)
	wg.Wait()
	created, refused := 0, 0
	for _, err := range errs {
		if err == nil {
			created++
		} else if _, ok := catalog.AsQuota(err); ok {
			refused++
		} else {
			t.Errorf("a racer failed otherwise: %v", err)
		}
	}
	st, err := s.QuotaStatus(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if created != 5 || refused != 15 || st.Instances.Used != 8 {
		t.Errorf("created %d, refused %d, the namespace has %d instances; want 5, 15 and 8", created, refused, st.Instances.Used)
	}
}

// TestQuotaBindingsRace: bindings alike, 20 at once for 5 places.
func TestQuotaBindingsRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "db", osbtest.PlanSync)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Bindings: limit(5), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 20 {
		wg.Go(func() {
			b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
			b.Name, b.Namespace = fmt.Sprintf("app-%d", i), "team-a"
			_, err := s.CreateBinding(ctx, b)
			if err == nil {
				mu.Lock()
				created++
				mu.Unlock()
			} else if _, ok := catalog.AsQuota(err); !ok {
				t.Errorf("binding %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if created != 5 {
		t.Errorf("%d bindings created, want 5", created)
	}
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	b.Name, b.Namespace = "one-more", "team-a"
	_, err := s.CreateBinding(ctx, b)
	refusedWith(t, err, "namespace team-a may have 5 bindings and has 5")
}

// TestQuotaPlansAndPaid: a limit on one plan's instances and paid plans
// refused, on creation, on a change of plan, and on an instance recorded
// before its plan was offered, which waits, unresolved, for room.
func TestQuotaPlansAndPaid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, plans := quotaSetup(t)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", PaidPlans: false,
		Plans: []catalog.PlanQuota{{Class: osbtest.DefaultService, Plan: osbtest.PlanAsync, Instances: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateInstance(ctx, instanceOf("team-a", "rich", "gold"))
	q := refusedWith(t, err, "namespace team-a may not use paid plans, and plan gold is not free")
	if q.Resource != catalog.QuotaPaid || q.PlanName != plans["gold"].Name {
		t.Errorf("refusal %+v", q)
	}
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "a1", osbtest.PlanAsync)); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateInstance(ctx, instanceOf("team-a", "a2", osbtest.PlanAsync))
	refusedWith(t, err, "namespace team-a may have 1 instance of plan async and has 1")
	// Moving an instance to the full plan, or to a paid one, is refused;
	// to the plan it has, it keeps its place.
	sync1, err := s.CreateInstance(ctx, instanceOf("team-a", "s1", osbtest.PlanSync))
	if err != nil {
		t.Fatal(err)
	}
	for plan, want := range map[string]string{
		osbtest.PlanAsync: "namespace team-a may have 1 instance of plan async and has 1",
		"gold":            "namespace team-a may not use paid plans, and plan gold is not free",
	} {
		_, err = s.UpdateInstance(ctx, sync1.ID, 0, func(in *catalog.Instance) error {
			in.Spec.ClusterServicePlanExternalName = plan
			return nil
		})
		refusedWith(t, err, want)
	}
	a1, err := s.GetInstanceByName(ctx, "team-a", "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateInstance(ctx, a1.ID, 0, func(in *catalog.Instance) error {
		in.Spec.Parameters = []byte(`{"a":1}`)
		return nil
	}); err != nil {
		t.Errorf("changing the parameters of an instance of the full plan: %v", err)
	}
	// The default quota allows paid plans: team-b provisions gold.
	if _, err := s.CreateInstance(ctx, instanceOf("team-b", "rich", "gold")); err != nil {
		t.Fatal(err)
	}
	st, err := s.QuotaStatus(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Plans) != 1 || st.Plans[0].Used != 1 || st.Plans[0].Instances != 1 || st.Plans[0].Plan != osbtest.PlanAsync ||
		st.Plans[0].Class != osbtest.DefaultService || st.Quota.PaidPlans {
		t.Errorf("status: %+v", st)
	}
}

// TestQuotaOnResolve: an instance recorded while its plan is not offered
// counts among the namespace's instances at once, and its plan's limits
// apply when it resolves: refused, it stays unresolved, waiting for room.
func TestQuotaOnResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team", PaidPlans: false}); err != nil {
		t.Fatal(err)
	}
	in, err := s.CreateInstance(ctx, newInstance("early", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo", ClusterServicePlanExternalName: "only"}))
	if err != nil {
		t.Fatal(err)
	}
	services := soloCatalog()
	services[len(services)-1].Plans[0].Free = new(false)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	registerIn(t, s, "", "fake", fake.URL())
	_, err = s.ResolveInstance(ctx, in.ID)
	refusedWith(t, err, "namespace team may not use paid plans, and plan only is not free")
	if got, err := s.GetInstance(ctx, in.ID); err != nil || got.Resolved() {
		t.Errorf("a refused instance resolved: %v", err)
	}
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team", PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ResolveInstance(ctx, in.ID); err != nil || !got.Resolved() {
		t.Errorf("resolving once paid plans are allowed: %v", err)
	}
}

// TestResourceQuotas: a ResourceQuota stricter than the quota refuses in
// its name; the strictest of several wins; replacing them all forgets
// those gone.
func TestResourceQuotas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	two, three := int64(2), int64(3)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "team-a", Instances: limit(10), Bindings: limit(1), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	for _, rq := range []catalog.ResourceQuota{
		{Namespace: "team-a", Name: "objects", Instances: &three},
		{Namespace: "team-a", Name: "tight", Instances: &two, Bindings: &three},
		{Namespace: "team-b", Name: "objects", Instances: &two},
		{Namespace: "team-a", Name: "pods"}, // limits nothing of ours
	} {
		if err := s.PutResourceQuota(ctx, rq); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := s.CreateInstance(ctx, instanceOf("team-a", fmt.Sprintf("db-%d", i), osbtest.PlanSync)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.CreateInstance(ctx, instanceOf("team-a", "db-2", osbtest.PlanSync))
	q := refusedWith(t, err, "namespace team-a may have 2 instances and has 2 (ResourceQuota tight)")
	if q.ResourceQuota() != "tight" {
		t.Errorf("refusal %+v", q)
	}
	st, err := s.QuotaStatus(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ResourceQuotas) != 2 || st.Instances.Source != "ResourceQuota/tight" || *st.Bindings.Limit != 1 || st.Bindings.Source != catalog.SourceNamespace {
		t.Errorf("status: %+v", st)
	}
	// The engine saw "tight" go: "objects" holds.
	if err := s.ReplaceResourceQuotas(ctx, []catalog.ResourceQuota{
		{Namespace: "team-a", Name: "objects", Instances: &three}, {Namespace: "team-b", Name: "objects", Instances: &two}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "db-2", osbtest.PlanSync)); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateInstance(ctx, instanceOf("team-a", "db-3", osbtest.PlanSync))
	refusedWith(t, err, "namespace team-a may have 3 instances and has 3 (ResourceQuota objects)")
	usage, err := s.QuotaUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 2 || usage[0].Namespace != "team-a" || usage[0].Instances.Used != 3 || *usage[0].Instances.Limit != 3 ||
		usage[1].Namespace != "team-b" || usage[1].Instances.Used != 0 || *usage[1].Instances.Limit != 2 {
		t.Errorf("usage: %+v", usage)
	}
}

// TestQuotaValidation: every problem of a quota at once, with its field.
func TestQuotaValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	_, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "Team A", Instances: limit(-1),
		Plans: []catalog.PlanQuota{{PlanID: "nope"}, {PlanID: "0b0e8f4c-8a5b-4a4e-9d53-9f1e4f0c0001", Instances: -2}}})
	v, ok := catalog.AsValidation(err)
	if !ok {
		t.Fatalf("got %v, want a validation error", err)
	}
	want := "namespace: The namespace \"Team A\" is not valid: use lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (for example team-a).; " +
		"instances: must be from 0 to 2147483647; plans[0].planID: must be a plan's id, or give class and plan (external names); plans[1].instances: must be from 0 to 2147483647"
	if v.Error() != want {
		t.Errorf("validation:\n%s\nwant\n%s", v.Error(), want)
	}
	_, err = s.SetQuota(ctx, &catalog.Quota{Namespace: "team", Plans: []catalog.PlanQuota{{PlanID: "0b0e8f4c-8a5b-4a4e-9d53-9f1e4f0c0001", Instances: 1}}})
	if v, ok := catalog.AsValidation(err); !ok || v.Error() != "plans[0].planID: no plan has this id" {
		t.Errorf("a plan that does not exist: %v", err)
	}
	_, err = s.SetQuota(ctx, &catalog.Quota{Namespace: "team", Plans: []catalog.PlanQuota{
		{Class: osbtest.DefaultService, Plan: "platinum", Instances: 1},
		{Class: osbtest.DefaultService, Plan: osbtest.PlanSync, Instances: 1},
		{Class: osbtest.DefaultService, Plan: osbtest.PlanSync, Instances: 2}}})
	if v, ok := catalog.AsValidation(err); !ok || v.Error() != `plans[0].plan: the cluster's service class "fake-service" offers no plan "platinum"; plans[2]: names a plan named before` {
		t.Errorf("plans by name: %v", err)
	}
	if _, err := s.QuotaStatus(ctx, "Team A"); err == nil {
		t.Error("the status of a namespace of a bad name")
	}
}

// TestPlanVisibility: a plan visible to team-a only is, to team-b, a plan
// no broker offers: left out of its lists, and an instance there naming
// it waits for it, unresolved, until the plan is made visible to team-b.
func TestPlanVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, plans := quotaSetup(t)
	gold := plans["gold"]
	got, err := s.SetPlanVisibility(ctx, gold.Name, []string{"team-c", "team-a", "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[catalog.VisibleInAnnotation] != "team-a,team-c" || got.ResourceVersion <= gold.ResourceVersion {
		t.Errorf("plan after: %+v", got.Meta)
	}
	for ns, want := range map[string]int{"team-a": 5, "team-b": 4} {
		l, err := s.ListPlans(ctx, catalog.PlanFilter{VisibleIn: []string{ns}}, catalog.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != want {
			t.Errorf("%s sees %d plans, want %d", ns, len(l.Items), want)
		}
	}
	if in, err := s.CreateInstance(ctx, instanceOf("team-a", "rich", "gold")); err != nil || !in.Resolved() {
		t.Fatalf("team-a provisioning gold: %v", err)
	}
	hidden, err := s.CreateInstance(ctx, instanceOf("team-b", "rich", "gold"))
	if err != nil || hidden.Resolved() {
		t.Fatalf("team-b naming gold: %v, resolved %v", err, hidden != nil && hidden.Resolved())
	}
	_, err = s.ResolveInstance(ctx, hidden.ID)
	if r, ok := catalog.AsReference(err); !ok || r.Reason != catalog.ReasonNonexistentServicePlan {
		t.Errorf("resolving team-b's: %v, want the plan not to exist", err)
	}
	// A team-b instance cannot move to it either.
	sync1, err := s.CreateInstance(ctx, instanceOf("team-b", "s1", osbtest.PlanSync))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateInstance(ctx, sync1.ID, 0, func(in *catalog.Instance) error {
		in.Spec.ClusterServicePlanExternalName = "gold"
		return nil
	}); err == nil {
		t.Error("team-b moved an instance to a plan hidden from it")
	}
	if _, err := s.SetPlanVisibility(ctx, gold.ID, nil); err != nil {
		t.Fatal(err)
	}
	if in, err := s.ResolveInstance(ctx, hidden.ID); err != nil || !in.Resolved() {
		t.Errorf("resolving once visible to every namespace: %v", err)
	}
	if _, err := s.SetPlanVisibility(ctx, gold.ID, []string{"Not A Namespace"}); err == nil {
		t.Error("a namespace of a bad name")
	}
}

// TestQuotaCounts: the count a quota reads is kept as instances come and
// go, those made before any limit applied included: removed instances
// make room, and 10 removals racing 20 creations for the room they make
// leave the namespace at its limit, the count read equal to the objects.
func TestQuotaCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := quotaSetup(t)
	var made []*catalog.Instance
	create := func(name string) error {
		in, err := s.CreateInstance(ctx, instanceOf("count", name, osbtest.PlanSync))
		if err == nil {
			made = append(made, in)
		}
		return err
	}
	remove := func(in *catalog.Instance) {
		if _, err := s.DeleteInstance(ctx, in.ID); err != nil {
			t.Error(err)
			return
		}
		if err := s.FinalizeInstance(ctx, in.ID, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Gone."}); err != nil {
			t.Error(err)
		}
	}
	for i := range 12 {
		if err := create(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	remove(made[0])
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "count", Instances: limit(12), PaidPlans: true}); err != nil {
		t.Fatal(err)
	}
	if err := create("db-0"); err != nil {
		t.Fatal(err)
	}
	refusedWith(t, create("db-1"), "namespace count may have 12 instances and has 12")
	remove(made[1])
	if err := create("db-1"); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
	refusedWith(t, create("db-2"), "namespace count may have 12 instances and has 12")

	var wg sync.WaitGroup
	for _, in := range made[2:12] {
		wg.Go(func() { remove(in) })
	}
	created := make([]error, 20)
	for i := range created {
		wg.Go(func() {
			_, created[i] = s.CreateInstance(ctx, instanceOf("count", fmt.Sprintf("racer-%d", i), osbtest.PlanSync))
		})
	}
	wg.Wait()
	st, err := s.QuotaStatus(ctx, "count")
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, err := range created {
		if err == nil {
			ok++
		}
	}
	if st.Instances.Used > 12 || st.Instances.Used != 12-10+int64(ok) {
		t.Errorf("%d racers created, %d instances, limit 12", ok, st.Instances.Used)
	}
	want := fmt.Sprintf("namespace count may have 12 instances and has %d", st.Instances.Used)
	_, err = s.CreateInstance(ctx, instanceOf("count", "last", osbtest.PlanSync))
	if st.Instances.Used == 12 {
		refusedWith(t, err, want)
	} else if err != nil {
		t.Errorf("room left, yet: %v", err)
	}
}

// TestCreationWaitsBeforeItsRevision: a creation in a namespace whose
// count lock a creation under a limit holds waits for it before it takes
// its revision (catalog.revision), not in the count's trigger after its
// insert took one, where writers and snapshot readers would queue behind
// it.
func TestCreationWaitsBeforeItsRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := newPoolStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	registerIn(t, s, "", "fake", fake.URL())
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "db", osbtest.PlanSync)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		space  int
		create func() error
	}{
		{"an instance", 1903521601, func() error {
			_, err := s.CreateInstance(ctx, instanceOf("team-a", "db2", osbtest.PlanSync))
			return err
		}},
		{"a binding", 1903521602, func() error {
			b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
			b.Name, b.Namespace = "app", "team-a"
			_, err := s.CreateBinding(ctx, b)
			return err
		}},
	} {
		holder, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext('team-a'))`, c.space); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.create() }()
		var holdsRevision bool
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			var waiting bool
			if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks w WHERE w.locktype = 'advisory' AND NOT w.granted AND w.classid = $1),
				EXISTS (SELECT 1 FROM pg_locks w JOIN pg_locks r ON r.pid = w.pid WHERE w.locktype = 'advisory' AND NOT w.granted AND w.classid = $1
					AND r.relation = 'catalog.revision'::regclass AND r.granted)`, c.space).Scan(&waiting, &holdsRevision); err != nil {
				t.Fatal(err)
			}
			if waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the creation never waited for the namespace's lock", c.name)
			}
		}
		_ = holder.Rollback(ctx)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if holdsRevision {
			t.Errorf("%s: the creation waited for the namespace's lock holding catalog.revision (its revision taken)", c.name)
		}
	}
}

// TestQuotaStatusHidesHiddenPlans: a namespace's quota status leaves out
// the limits on plans hidden from it (the default quota's, here): to the
// namespace, such a plan does not exist.
func TestQuotaStatusHidesHiddenPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, plans := quotaSetup(t)
	if _, err := s.SetQuota(ctx, &catalog.Quota{Namespace: "", PaidPlans: true, Plans: []catalog.PlanQuota{
		{Class: osbtest.DefaultService, Plan: osbtest.PlanAsync, Instances: 1},
		{Class: osbtest.DefaultService, Plan: "gold", Instances: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPlanVisibility(ctx, plans["gold"].ID, []string{"team-a"}); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string][]string{"team-a": {osbtest.PlanAsync, "gold"}, "team-b": {osbtest.PlanAsync}} {
		st, err := s.QuotaStatus(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		var shown, limited []string
		for _, p := range st.Plans {
			shown = append(shown, p.Plan)
		}
		for _, p := range st.Quota.Plans {
			limited = append(limited, p.Plan)
		}
		if !slices.Equal(shown, want) || !slices.Equal(limited, want) {
			t.Errorf("%s's quota status shows plans %q and the quota's %q, want %q", ns, shown, limited, want)
		}
	}
}
