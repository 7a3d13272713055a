package apiserver

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestAttrsSelectLikeMaps checks that the hub's compact attrs answer every
// selector as the maps they replace do: labels.Set and
// v1beta1.SelectableFields.
func TestAttrsSelectLikeMaps(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300) // a length that takes two bytes
	objects := map[string]runtime.Object{
		"instance": &v1beta1.ServiceInstance{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team-a", Labels: map[string]string{"team": "a", "empty": "", "app.kubernetes.io/name": long}},
			Spec: v1beta1.ServiceInstanceSpec{
				PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small"},
				ExternalID:    "e-1",
			},
		},
		"binding": &v1beta1.ServiceBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team-b"},
			Spec:       v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: long}, SecretName: "s"},
		},
		"cluster broker": &v1beta1.ClusterServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "bindery", Labels: map[string]string{"a": "b"}}},
		"broker":         &v1beta1.ServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: "team-a"}},
		"class":          &v1beta1.ServiceClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"}},
		"plan":           &v1beta1.ServicePlan{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-b"}},
	}
	labelSelectors := []string{"", "team=a", "team!=a", "team", "!team", "empty", "empty=", "!empty", "missing", "!missing",
		"team in (a,b)", "team notin (a)", "app.kubernetes.io/name=" + long[:63], "a=b", "a"}
	fieldSelectors := []string{"", "metadata.name=db", "metadata.name!=db", "metadata.namespace=team-a", "metadata.namespace=team-b",
		"spec.clusterServiceClassExternalName=postgresql", "spec.clusterServicePlanExternalName=large",
		"spec.clusterServiceClassExternalID=", "spec.clusterServiceClassExternalID!=", "spec.externalID=e-1",
		"spec.instanceRef.name=" + long, "spec.secretName=s,metadata.namespace=team-b", "spec.unknown=", "metadata.name=bindery"}
	for name, obj := range objects {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		a := attrsOf(obj, nil)
		if a.namespace() != m.GetNamespace() {
			t.Errorf("%s: namespace %q, want %q", name, a.namespace(), m.GetNamespace())
		}
		for _, s := range labelSelectors {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if got, want := sel.Matches(a.labels), sel.Matches(labels.Set(m.GetLabels())); got != want {
				t.Errorf("%s: label selector %q matches %v, want %v", name, s, got, want)
			}
		}
		set := v1beta1.SelectableFields(obj)
		for _, s := range fieldSelectors {
			sel, err := fields.ParseSelector(s)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if got, want := sel.Matches(a.fields), sel.Matches(set); got != want {
				t.Errorf("%s: field selector %q matches %v, want %v", name, s, got, want)
			}
		}
		for k, v := range set {
			if got := a.fields.Get(k); got != v {
				t.Errorf("%s: field %s is %q, want %q", name, k, got, v)
			}
		}
		for k, v := range m.GetLabels() {
			if got, ok := a.labels.Lookup(k); !ok || got != v {
				t.Errorf("%s: label %s is %q (%v), want %q", name, k, got, ok, v)
			}
		}
	}
}

// TestLabelSetsShared checks that objects with the same labels, given in
// any order, share one label set, and that the empty set is empty.
func TestLabelSetsShared(t *testing.T) {
	t.Parallel()
	a := labelSetOf(map[string]string{"app": "bench", "team": "t7", "tier": "db"})
	b := labelSetOf(map[string]string{"tier": "db", "team": "t7", "app": "bench"})
	if a != b {
		t.Errorf("the same labels make two sets: %q, %q", a.encoded(), b.encoded())
	}
	if c := labelSetOf(map[string]string{"app": "bench", "team": "t8", "tier": "db"}); c == a {
		t.Error("other labels make the same set")
	}
	if e := labelSetOf(nil); e.encoded() != "" || e.Has("app") || e != labelSetOf(map[string]string{}) {
		t.Errorf("the empty set: %q", e.encoded())
	}
}
