package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestPartialJSONAsMarshal: the metadata written by hand is json.Marshal's,
// byte for byte, and what it does not write falls back to json.Marshal.
func TestPartialJSONAsMarshal(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 27, 20, 1, 2, 345678000, time.FixedZone("x", 3600)))
	gone := metav1.NewTime(created.Add(time.Hour))
	grace := int64(30)
	cases := map[string]metav1.ObjectMeta{
		"empty":         {},
		"usual":         {Name: "db-1", Namespace: "team-1", UID: "0b0e9f0a-8f1e-4c11-9e0b-7b7f6f5b7b7b", ResourceVersion: "42", Generation: 3, CreationTimestamp: created, Labels: map[string]string{"team": "t1", "app": "bench", "": "empty key"}, Finalizers: []string{"kubernetes-incubator/service-catalog"}},
		"annotations":   {Name: "db-2", CreationTimestamp: created, Annotations: map[string]string{"b": "2", "a": "1"}, Labels: map[string]string{}, Finalizers: []string{"a", "b", "c"}},
		"html":          {Name: "db-3", Labels: map[string]string{"x": "<b>&"}},
		"quote":         {Name: "db-4", Annotations: map[string]string{"note": `say "hi"\n`}},
		"unicode":       {Name: "db-5", Annotations: map[string]string{"note": "café ☕ \u2028"}},
		"control":       {Name: "db-6", Annotations: map[string]string{"note": "a\tb\x01"}},
		"deleting":      {Name: "db-7", DeletionTimestamp: &gone, DeletionGracePeriodSeconds: &grace},
		"generated":     {GenerateName: "db-", Namespace: "team-1"},
		"owned":         {Name: "db-8", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}},
		"managed":       {Name: "db-9", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		"negative gen":  {Name: "db-10", Generation: -1},
		"finalizer esc": {Name: "db-11", Finalizers: []string{"example.com/<x>"}},
	}
	gvk := metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")
	for name, om := range cases {
		if got, want := partialAndMarshal(t, &v1beta1.ServiceInstance{ObjectMeta: om}, gvk); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	// The fast path is taken for the usual metadata.
	usual := cases["usual"]
	if _, ok := appendPartial(nil, &usual, gvk); !ok {
		t.Error("the usual metadata is not written by hand")
	}
}

// BenchmarkAppendPartial writes the metadata of a Table's row for an
// instance as the catalog keeps it: two labels of its own and Service

// FuzzPartialJSON: for any names, labels, annotations and finalizers, the
// metadata written by hand is json.Marshal's, byte for byte.
func FuzzPartialJSON(f *testing.F) {
	for _, seed := range [][4]string{
		{"db-1", "team", "t1", "kubernetes-incubator/service-catalog"},
		{"db-2", "", "<b>&", `say "hi"\n`},
		{"db-3", "k\u00e9y", "café ☕ \u2028", "a\tb\x01"},
		{"db-4", "x", "\xff\xfe", "\x7f"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	gvk := metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")
	f.Fuzz(func(t *testing.T, name, key, value, finalizer string) {
		in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: value, UID: "0b0e9f0a-8f1e-4c11-9e0b-7b7f6f5b7b7b", ResourceVersion: "42", Generation: 3,
			Labels: map[string]string{key: value, "app": name}, Annotations: map[string]string{value: key},
			Finalizers: []string{finalizer, name},
		}}
		if got, want := partialAndMarshal(t, in, gvk); got != want {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// partialAndMarshal is in's metadata as partialJSON writes it and as
// json.Marshal writes it.
func partialAndMarshal(t *testing.T, in *v1beta1.ServiceInstance, gvk schema.GroupVersionKind) (got, want string) {
	t.Helper()
	b, err := partialJSON(in, gvk)
	if err != nil {
		t.Fatal(err)
	}
	p := meta.AsPartialObjectMetadata(&in.ObjectMeta)
	p.SetGroupVersionKind(gvk)
	m, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), string(m)
}

// Catalog's two, a finalizer.
func BenchmarkAppendPartial(b *testing.B) {
	hash := "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
	om := metav1.ObjectMeta{
		Name: "instance-00042", Namespace: "team-2", UID: "0b0e9f0a-8f1e-4c11-9e0b-7b7f6f5b7b7b", ResourceVersion: "123456",
		Generation: 1, CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 27, 20, 1, 2, 0, time.UTC)),
		Labels: map[string]string{"app": "bench", "team": "t42",
			v1beta1.LabelClusterServiceClassRef: hash, v1beta1.LabelClusterServicePlanRef: hash},
		Finalizers: []string{"kubernetes-incubator/service-catalog"},
	}
	gvk := metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var ok bool
		if buf, ok = appendPartial(buf[:0], &om, gvk); !ok {
			b.Fatal("not written by hand")
		}
	}
}
