package catalog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

func sha224(s string) string {
	sum := sha256.Sum224([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestSpecLabels: classes, plans and instances carry Service Catalog's
// labels, derived from their spec both where they are stored (for label
// selectors in SQL) and on the objects writes return and the change feed
// carries, over any value given them; a relist and a plan change move
// them.
func TestSpecLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fake, b := listedFake(t)
	serviceID, syncID := fake.IDs(osbtest.DefaultService, osbtest.PlanSync)
	class, err := s.GetClass(ctx, serviceID)
	if err != nil {
		t.Fatal(err)
	}
	wantClass := map[string]string{
		v1beta1.LabelExternalID:               sha224(serviceID),
		v1beta1.LabelExternalName:             sha224(osbtest.DefaultService),
		v1beta1.LabelClusterServiceBrokerName: sha224("fake"),
	}
	if !maps.Equal(class.Labels, wantClass) {
		t.Errorf("class labels %v, want %v", class.Labels, wantClass)
	}
	plan, err := s.GetPlan(ctx, syncID)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{
		v1beta1.LabelExternalID:               sha224(syncID),
		v1beta1.LabelExternalName:             sha224(osbtest.PlanSync),
		v1beta1.LabelClusterServiceBrokerName: sha224("fake"),
		v1beta1.LabelClusterServiceClassRef:   sha224(class.Name),
	}; !maps.Equal(plan.Labels, want) {
		t.Errorf("plan labels %v, want %v", plan.Labels, want)
	}

	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "ns"
	in.Labels = map[string]string{"app": "db", v1beta1.LabelClusterServicePlanRef: "given"}
	created, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "db", v1beta1.LabelClusterServiceClassRef: sha224(class.Name), v1beta1.LabelClusterServicePlanRef: sha224(plan.Name)}
	stored, err := s.GetInstance(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(created.Labels, want) || !maps.Equal(stored.Labels, want) {
		t.Errorf("instance labels: returned %v, stored %v, want %v", created.Labels, stored.Labels, want)
	}
	byPlan := func(plan string) int {
		t.Helper()
		sel, err := labels.Parse(v1beta1.LabelClusterServicePlanRef + "=" + sha224(plan))
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.ListInstances(ctx, catalog.ListOptions{Labels: sel})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if n := byPlan(plan.Name); n != 1 {
		t.Errorf("%d instances selected by their plan's label", n)
	}

	// A plan change moves the label, where stored and in the feed.
	_, asyncID := fake.IDs(osbtest.DefaultService, osbtest.PlanAsync)
	async, err := s.GetPlan(ctx, asyncID)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := s.UpdateInstance(ctx, created.ID, 0, func(in *catalog.Instance) error {
		in.Spec.ClusterServicePlanExternalName = osbtest.PlanAsync
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Labels[v1beta1.LabelClusterServicePlanRef] != sha224(async.Name) || byPlan(plan.Name) != 0 || byPlan(async.Name) != 1 {
		t.Errorf("after the plan change: labels %v, %d and %d instances by the old and new plan", updated.Labels, byPlan(plan.Name), byPlan(async.Name))
	}
	changes, err := s.Feed().Since(ctx, rev, []string{catalog.KindInstance}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Object.Labels[v1beta1.LabelClusterServicePlanRef] != sha224(async.Name) {
		t.Errorf("the feed's change of the instance: %+v", changes)
	}
	// A metadata update that changes nothing writes nothing.
	same, err := s.UpdateInstanceMeta(ctx, created.ID, 0, func(m *catalog.Meta) error {
		m.Labels = map[string]string{"app": "db"}
		return nil
	})
	if err != nil || same.ResourceVersion != updated.ResourceVersion {
		t.Errorf("a metadata update without changes: %v, resourceVersion %d after %d", err, same.ResourceVersion, updated.ResourceVersion)
	}

	// A relist that renames the class relabels it, stored and in the feed.
	cat := fake.Catalog()
	cat[0].Name = "renamed"
	fake.SetCatalog(cat)
	if rev, err = s.Revision(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if class, err = s.GetClass(ctx, serviceID); err != nil {
		t.Fatal(err)
	}
	if got := class.Labels[v1beta1.LabelExternalName]; got != sha224("renamed") {
		t.Errorf("the renamed class's label: %s", got)
	}
	changes, err = s.Feed().Since(ctx, rev, []string{catalog.KindServiceClass}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 {
		t.Fatalf("%d changes of classes in the relist", len(changes))
	}
	var doc struct {
		Labels map[string]string `json:"labels"`
	}
	raw, err := changes[0].Object.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Labels[v1beta1.LabelExternalName] != sha224("renamed") {
		t.Errorf("the feed's class: %s (%v)", raw, err)
	}
}
