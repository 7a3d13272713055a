package apiserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/version"
)

// What Service Catalog's users rely on besides svcat (TestSvcat): its
// labels and their selectors, metadata changes while an object is being
// deleted, its finalizer, kubectl's categories and version, and what a
// delete's propagation policy does to an instance's bindings.

// sha224 is a label value as Service Catalog computed it
// (pkg/util.GenerateSHA: SHA-224, hex).
func sha224(s string) string {
	sum := sha256.Sum224([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestSpecLabels: classes, plans and instances carry Service Catalog's
// labels, which follow the spec through relists and plan changes, which
// clients cannot set, and by which label selectors find the objects as
// svcat looks for them, in lists and in watches.
func TestSpecLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()

	// Service Catalog's own digest of a name its goldens use, computed
	// elsewhere (sha224sum), against a mistake shared by the test and the
	// code.
	if got := v1beta1.SpecLabelValue("user-provided-service"); got != "730d36fa34c1b3308cbf85856900e29eac970fdb23febe2c193c4ea5" {
		t.Errorf("SpecLabelValue(user-provided-service) = %s", got)
	}

	classes, err := sc.ClusterServiceClasses().List(ctx, metav1.ListOptions{
		LabelSelector: v1beta1.LabelExternalName + "=" + sha224("fake-service")})
	if err != nil {
		t.Fatal(err)
	}
	if len(classes.Items) != 1 {
		t.Fatalf("classes by external name: %d", len(classes.Items))
	}
	class := classes.Items[0]
	if got, want := class.Labels, map[string]string{
		v1beta1.LabelExternalName:             sha224("fake-service"),
		v1beta1.LabelExternalID:               sha224(class.Spec.ExternalID),
		v1beta1.LabelClusterServiceBrokerName: sha224("fake"),
	}; !equalMaps(got, want) {
		t.Errorf("class labels %v, want %v", got, want)
	}
	// svcat's query for a plan of a class by name.
	plans, err := sc.ClusterServicePlans().List(ctx, metav1.ListOptions{LabelSelector: v1beta1.LabelClusterServiceClassRef + "=" + sha224(class.Name) +
		"," + v1beta1.LabelExternalName + "=" + sha224("sync")})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans.Items) != 1 || plans.Items[0].Spec.ExternalName != "sync" {
		t.Fatalf("plans of the class named sync: %+v", plans.Items)
	}
	plan := plans.Items[0]
	if got, want := plan.Labels, map[string]string{
		v1beta1.LabelExternalName:             sha224("sync"),
		v1beta1.LabelExternalID:               sha224(plan.Spec.ExternalID),
		v1beta1.LabelClusterServiceClassRef:   sha224(class.Name),
		v1beta1.LabelClusterServiceBrokerName: sha224("fake"),
	}; !equalMaps(got, want) {
		t.Errorf("plan labels %v, want %v", got, want)
	}
	// kubectl's selector syntax, set-based too.
	all, err := sc.ClusterServicePlans().List(ctx, metav1.ListOptions{LabelSelector: v1beta1.LabelClusterServiceClassRef + "=" + sha224(class.Name)})
	if err != nil {
		t.Fatal(err)
	}
	out := b.mustKubectl(nil, "get", "clusterserviceplans", "-o", "name", "-l",
		v1beta1.LabelClusterServiceClassRef+" in ("+sha224(class.Name)+"),"+v1beta1.LabelExternalName+" notin ("+sha224("sync")+")")
	if n := strings.Count(out, "clusterserviceplan"); n != len(all.Items)-1 || len(all.Items) < 2 || strings.Contains(out, plan.Name) {
		t.Errorf("kubectl get with a set-based selector (%d plans in the class):\n%s", len(all.Items), out)
	}

	// An instance: its references' labels, not the ones a client tries.
	in := newInstance("team", "db")
	in.Labels[v1beta1.LabelClusterServicePlanRef] = "chosen-by-the-client"
	created, err := sc.ServiceInstances("team").Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := created.Labels, map[string]string{
		"app":                               "db",
		v1beta1.LabelClusterServiceClassRef: sha224(class.Name),
		v1beta1.LabelClusterServicePlanRef:  sha224(plan.Name),
	}; !equalMaps(got, want) {
		t.Errorf("instance labels %v, want %v", got, want)
	}
	byPlan := metav1.ListOptions{LabelSelector: v1beta1.LabelClusterServicePlanRef + "=" + sha224(plan.Name)}
	if l, err := sc.ServiceInstances("").List(ctx, byPlan); err != nil || len(l.Items) != 1 {
		t.Fatalf("instances of the plan: %v, %v", l, err)
	}
	// A client's update of the label changes nothing of it.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"x"}}}`, v1beta1.LabelClusterServicePlanRef)
	patched, err := sc.ServiceInstances("team").Patch(ctx, "db", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.ServiceInstances("team").Watch(ctx, metav1.ListOptions{LabelSelector: byPlan.LabelSelector, ResourceVersion: patched.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if patched.Labels[v1beta1.LabelClusterServicePlanRef] != sha224(plan.Name) {
		t.Errorf("after a client set the plan label: %v", patched.Labels)
	}
	// A plan change moves the label: the watch on the old plan sees the
	// instance leave.
	patch = `{"spec":{"clusterServicePlanExternalName":"async"}}`
	if _, err := sc.ServiceInstances("team").Patch(ctx, "db", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	if ev.Type != watch.Deleted {
		t.Errorf("the watch on the old plan saw %s", ev.Type)
	}
	got, err := sc.ServiceInstances("team").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1beta1.LabelClusterServicePlanRef] != sha224(got.Spec.ClusterServicePlanRef.Name) || got.Spec.ClusterServicePlanRef.Name == plan.Name {
		t.Errorf("after the plan change: labels %v, plan %s", got.Labels, got.Spec.ClusterServicePlanRef.Name)
	}

	// A relist that renames the class relabels it and its plans; a
	// selector on the old name stops finding it.
	fake := brokerOf(t, b)
	cat := fake.Catalog()
	cat[0].Name = "renamed-service"
	fake.SetCatalog(cat)
	if _, err := b.store.Relist(ctx, b.broker.ID); err != nil {
		t.Fatal(err)
	}
	renamed, err := sc.ClusterServiceClasses().List(ctx, metav1.ListOptions{LabelSelector: v1beta1.LabelExternalName + "=" + sha224("renamed-service")})
	if err != nil {
		t.Fatal(err)
	}
	if len(renamed.Items) != 1 || renamed.Items[0].Name != class.Name {
		t.Errorf("classes by the new name: %+v", renamed.Items)
	}
	if old, err := sc.ClusterServiceClasses().List(ctx, metav1.ListOptions{LabelSelector: v1beta1.LabelExternalName + "=" + sha224("fake-service")}); err != nil || len(old.Items) != 0 {
		t.Errorf("classes by the old name: %v, %v", old, err)
	}
}

// brokerOf is the fake broker setup registered.
func brokerOf(t *testing.T, b *bundle) *osbtest.Broker {
	t.Helper()
	if b.fake == nil {
		t.Fatal("setup registered no fake broker")
	}
	return b.fake
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestMetadataWhileDeleting: as Kubernetes allows, an instance being
// deleted (here for good: no engine runs) takes new labels and
// annotations, and loses finalizers, but gains none; its spec cannot
// change. Its parameters come back from the catalog as PostgreSQL formats
// them, which kubectl's patches reformat: that is no spec change.
func TestMetadataWhileDeleting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ServiceInstances("team")
	in := newInstance("team", "db")
	in.Finalizers = []string{"example.com/keep"}
	in.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"b": [1, 2], "a": {"x": "y"}}`)}
	if _, err := c.Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.mustKubectl(nil, "delete", "serviceinstance", "db", "-n", "team", "--wait=false")

	b.mustKubectl(nil, "annotate", "serviceinstance", "db", "-n", "team", "note=stuck")
	b.mustKubectl(nil, "label", "serviceinstance", "db", "-n", "team", "state=stuck")
	if _, err := b.kubectl(nil, "patch", "serviceinstance", "db", "-n", "team", "--type=json",
		"-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}]`); err == nil || !strings.Contains(err.Error(), "finalizers") {
		t.Errorf("adding a finalizer to an instance being deleted: %v", err)
	}
	if _, err := b.kubectl(nil, "patch", "serviceinstance", "db", "-n", "team", "--type=merge",
		"-p", `{"spec":{"clusterServicePlanExternalName":"async"}}`); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("changing the spec of an instance being deleted: %v", err)
	}
	b.mustKubectl(nil, "patch", "serviceinstance", "db", "-n", "team", "--type=json",
		"-p", `[{"op":"remove","path":"/metadata/finalizers/0"}]`)
	got, err := c.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["note"] != "stuck" || got.Labels["state"] != "stuck" || got.DeletionTimestamp == nil ||
		!slices.Equal(got.Finalizers, []string{apiserver.Finalizer}) {
		t.Errorf("after the metadata changes: %+v", got.ObjectMeta)
	}
	// A full update (as svcat sends) with the parameters as read is no
	// spec change either.
	got.Annotations["note"] = "still stuck"
	if _, err := c.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update of the metadata with the spec as read: %v", err)
	}

	// The catalog keeps the same rule for its other front doors.
	_, err = b.store.UpdateInstanceMeta(ctx, string(got.UID), 0, func(m *catalog.Meta) error {
		m.Finalizers = append(m.Finalizers, "example.com/late")
		return nil
	})
	if _, ok := catalog.AsValidation(err); !ok || !strings.Contains(err.Error(), "finalizers") {
		t.Errorf("the catalog adding a finalizer to an instance being deleted: %v", err)
	}
}

// TestFinalizerRemovalAbandons: Bindery's finalizer is Service Catalog's;
// removing it, while the object is alive or being deleted, abandons the
// object (as svcat deprovision --abandon and unbind --abandon do): the
// engine will not call the broker for its deletion.
func TestFinalizerRemovalAbandons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	if apiserver.Finalizer != "kubernetes-incubator/service-catalog" {
		t.Errorf("Bindery's finalizer is %q, not Service Catalog's", apiserver.Finalizer)
	}
	in, err := sc.ServiceInstances("team").Create(ctx, newInstance("team", "db"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.Finalizers, []string{apiserver.Finalizer}) {
		t.Fatalf("a new instance's finalizers: %v", in.Finalizers)
	}
	// svcat's way: read, drop the finalizer, update.
	in.Finalizers = nil
	in, err = sc.ServiceInstances("team").Update(ctx, in, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Finalizers) != 0 || in.Annotations[catalog.AbandonAnnotation] != "true" || in.DeletionTimestamp != nil {
		t.Errorf("after removing the finalizer: %+v", in.ObjectMeta)
	}

	// A binding being deleted, its finalizer removed with kubectl.
	bd := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"},
		Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}
	if _, err := sc.ServiceBindings("team").Create(ctx, bd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.mustKubectl(nil, "delete", "servicebinding", "app", "-n", "team", "--wait=false")
	b.mustKubectl(nil, "patch", "servicebinding", "app", "-n", "team", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	got, err := b.store.GetBindingByName(ctx, "team", "app")
	if err != nil {
		t.Fatal(err)
	}
	if !catalog.Abandoned(&got.Meta) || got.DeletionTimestamp == nil {
		t.Errorf("the binding after its finalizer was removed: %+v", got.Meta)
	}
	// The catalog's abandon, as from every door: the history says who.
	events, err := b.store.Events(ctx, got.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e catalog.Event) bool {
		return e.Reason == catalog.ReasonAbandoned && strings.Contains(e.Message, "Abandoned by Kubernetes user ")
	}) {
		t.Errorf("the binding's history does not say which user abandoned it: %+v", events)
	}
	// A client that still sends the finalizer's former name adds nothing.
	in.Finalizers = []string{"servicecatalog.k8s.io/bindery"}
	in.Annotations = nil
	in, err = sc.ServiceInstances("team").Update(ctx, in, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Finalizers) != 1 || in.Finalizers[0] != apiserver.Finalizer {
		t.Errorf("finalizers after sending the former name (and no longer abandoning): %v", in.Finalizers)
	}
}

// TestCategoriesAndVersion: kubectl get all and kubectl get svcat list the
// kinds, as with Service Catalog; kubectl version reads the version
// Bindery was built as.
func TestCategoriesAndVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("team").Create(context.Background(), newInstance("team", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, category := range []string{"all", "svcat"} {
		out := b.mustKubectl(nil, "get", category, "-n", "team", "-o", "name")
		for _, want := range []string{"serviceinstance.servicecatalog.k8s.io/db", "clusterservicebroker.servicecatalog.k8s.io/fake", "clusterserviceclass.servicecatalog.k8s.io/"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get %s lacks %s:\n%s", category, want, out)
			}
		}
	}
	out := b.mustKubectl(nil, "version")
	if !strings.Contains(out, "Server Version: "+version.String()) {
		t.Errorf("kubectl version:\n%s", out)
	}
	info, err := b.client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != version.String() || info.Major != "0" || info.Minor != "0" {
		t.Errorf("server version %+v, want %s", info, version.String())
	}
}

// TestDeletePropagation: what a delete does to an instance's bindings.
// Orphan is refused while it has bindings, with what to do instead;
// Foreground deletes them first; Background (none) waits for them, as
// Service Catalog did.
func TestDeletePropagation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sc := b.client.ServicecatalogV1beta1()
	for _, name := range []string{"orphan", "foreground", "background"} {
		if _, err := sc.ServiceInstances("team").Create(ctx, newInstance("team", name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bd := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-app", Namespace: "team"},
			Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: name}}}
		if _, err := sc.ServiceBindings("team").Create(ctx, bd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.kubectl(nil, "delete", "serviceinstance", "orphan", "-n", "team", "--cascade=orphan")
	if err == nil || !strings.Contains(err.Error(), "orphan-app") || !strings.Contains(err.Error(), "--cascade=foreground") {
		t.Errorf("kubectl delete --cascade=orphan of an instance with a binding: %v", err)
	}
	err = sc.ServiceInstances("team").Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationOrphan)})
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || len(status.Status().Details.Causes) != 1 ||
		status.Status().Details.Causes[0].Field != "propagationPolicy" {
		t.Errorf("orphaning delete: %v", err)
	}
	if got, _ := sc.ServiceInstances("team").Get(ctx, "orphan", metav1.GetOptions{}); got == nil || got.DeletionTimestamp != nil {
		t.Errorf("the refused delete deleted: %+v", got)
	}
	// Without bindings there is nothing to orphan.
	b.mustKubectl(nil, "delete", "servicebinding", "orphan-app", "-n", "team", "--wait=false")
	b.mustKubectl(nil, "delete", "serviceinstance", "orphan", "-n", "team", "--cascade=orphan", "--wait=false")

	b.mustKubectl(nil, "delete", "serviceinstance", "foreground", "-n", "team", "--cascade=foreground", "--wait=false")
	b.mustKubectl(nil, "delete", "serviceinstance", "background", "-n", "team", "--wait=false")
	eventually.Succeeds(t, 10*time.Second, func(ctx context.Context) error {
		for name, cascade := range map[string]string{"orphan": "", "foreground": "true", "background": ""} {
			in, err := b.store.GetInstanceByName(ctx, "team", name)
			if err != nil {
				return err
			}
			if in.DeletionTimestamp == nil || in.Annotations[catalog.CascadeAnnotation] != cascade {
				return fmt.Errorf("instance %s: deletionTimestamp %v, annotations %v", name, in.DeletionTimestamp, in.Annotations)
			}
		}
		return nil
	})
}

func ptrTo[T any](v T) *T { return &v }
