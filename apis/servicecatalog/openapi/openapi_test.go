package openapi_test

import (
	"encoding/json"
	"math/rand"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/randfill"

	"github.com/bindery-dev/bindery/apis/servicecatalog/openapi"
	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

var kinds = []interface {
	runtime.Object
	OpenAPIModelName() string
}{
	&v1beta1.ClusterServiceBroker{}, &v1beta1.ClusterServiceClass{}, &v1beta1.ClusterServicePlan{},
	&v1beta1.ServiceInstance{}, &v1beta1.ServiceBinding{},
}

// definitions returns the schemas as the API server holds them: refs to
// #/definitions/NAME, and the GVK extension on each kind.
func definitions(t *testing.T) map[string]*spec.Schema {
	t.Helper()
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	})
	schemas := make(map[string]*spec.Schema, len(defs))
	for name, d := range defs {
		s := d.Schema
		schemas[name] = &s
	}
	for _, obj := range kinds {
		s, ok := schemas[obj.OpenAPIModelName()]
		if !ok {
			t.Fatalf("no definition %s", obj.OpenAPIModelName())
		}
		s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{
			"group": v1beta1.GroupName, "version": "v1beta1", "kind": kindOf(obj),
		}})
	}
	return schemas
}

func kindOf(obj runtime.Object) string {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil {
		panic(err)
	}
	return gvks[0].Kind
}

// TestReferencesResolve checks that every $ref names a definition, and that
// each definition lists its dependencies, which the API server's OpenAPI
// builder follows.
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	ref := regexp.MustCompile(`"\$ref":"#/definitions/([^"]+)"`)
	deps := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) })
	for name, d := range deps {
		b, err := json.Marshal(d.Schema)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, dep := range d.Dependencies {
			listed[dep] = true
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			if _, ok := deps[m[1]]; !ok {
				t.Errorf("%s refers to %s, which is not defined", name, m[1])
			}
			if !listed[m[1]] {
				t.Errorf("%s refers to %s without listing it as a dependency", name, m[1])
			}
		}
	}
}

// TestTypeConverter builds the type converter that server-side apply uses
// and converts fuzzed objects of every kind with it.
func TestTypeConverter(t *testing.T) {
	t.Parallel()
	tc, err := managedfields.NewTypeConverter(definitions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	scheme := newScheme(t)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, fuzzerFuncs), rand.NewSource(time.Now().UnixNano()), serializer.NewCodecFactory(scheme))
	for _, kind := range kinds {
		for range 50 {
			obj := kind.DeepCopyObject()
			f.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(v1beta1.SchemeGroupVersion.WithKind(kindOf(kind)))
			if _, err := tc.ObjectToTyped(obj); err != nil {
				t.Fatalf("%T: %v", obj, err)
			}
		}
	}
}

// fuzzerFuncs keep condition types unique, as the catalog does: conditions
// are a map keyed by type for server-side apply.
func fuzzerFuncs(serializer.CodecFactory) []any {
	return []any{
		func(s *v1beta1.ServiceInstanceStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Conditions = uniqueTypes(s.Conditions, func(c v1beta1.ServiceInstanceCondition) string { return string(c.Type) })
		},
		func(s *v1beta1.ServiceBindingStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Conditions = uniqueTypes(s.Conditions, func(c v1beta1.ServiceBindingCondition) string { return string(c.Type) })
		},
		func(s *v1beta1.ClusterServiceBrokerStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Conditions = uniqueTypes(s.Conditions, func(c v1beta1.ServiceBrokerCondition) string { return string(c.Type) })
		},
	}
}

func uniqueTypes[C any](in []C, key func(C) string) []C {
	seen := map[string]bool{}
	var out []C
	for _, c := range in {
		if !seen[key(c)] {
			seen[key(c)] = true
			out = append(out, c)
		}
	}
	return out
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToSchemeAsInternal(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestServerSideApply runs apimachinery's field manager, as the API server
// does, over a ServiceInstance: two managers, a conflict, a forced apply and
// a field given up by its manager.
func TestServerSideApply(t *testing.T) {
	t.Parallel()
	tc, err := managedfields.NewTypeConverter(definitions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	scheme := newScheme(t)
	gvk := v1beta1.SchemeGroupVersion.WithKind("ServiceInstance")
	fm, err := managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, gvk, v1beta1.InternalGroupVersion, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(live runtime.Object, manager string, force bool, doc string) (runtime.Object, error) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(doc)); err != nil {
			t.Fatal(err)
		}
		return fm.Apply(live, u, manager, force)
	}

	var live runtime.Object = &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team"}}
	live, err = apply(live, "alice", false, `{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance",
		"metadata":{"name":"db","namespace":"team","labels":{"app":"shop"}},
		"spec":{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small",
			"parameters":{"size":{"gb":10}},"parametersFrom":[{"secretKeyRef":{"name":"s","key":"k"}}]}}`)
	if err != nil {
		t.Fatalf("first apply: %v", err)
	}
	in := live.(*v1beta1.ServiceInstance)
	if in.Spec.ClusterServicePlanExternalName != "small" || string(in.Spec.Parameters.Raw) != `{"size":{"gb":10}}` || len(in.ManagedFields) != 1 {
		t.Fatalf("after first apply: %+v", in)
	}

	bob := `{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance",
		"metadata":{"name":"db","namespace":"team"},"spec":{"clusterServicePlanExternalName":"large"}}`
	if _, err := apply(live, "bob", false, bob); !apierrors.IsConflict(err) {
		t.Fatalf("bob's apply over alice's plan: want a conflict, got %v", err)
	}
	if live, err = apply(live, "bob", true, bob); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if in := live.(*v1beta1.ServiceInstance); in.Spec.ClusterServicePlanExternalName != "large" || len(in.ManagedFields) != 2 {
		t.Fatalf("after forced apply: %+v", in)
	}

	// Alice stops setting parameters and the label: they go, the plan
	// (now bob's) stays.
	live, err = apply(live, "alice", false, `{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance",
		"metadata":{"name":"db","namespace":"team"},
		"spec":{"clusterServiceClassExternalName":"postgresql","parametersFrom":[{"secretKeyRef":{"name":"s","key":"k"}}]}}`)
	if err != nil {
		t.Fatalf("third apply: %v", err)
	}
	in = live.(*v1beta1.ServiceInstance)
	t.Logf("managedFields: %s", mustJSON(in.ManagedFields))
	if in.Spec.Parameters != nil || in.Labels["app"] != "" || in.Spec.ClusterServicePlanExternalName != "large" {
		t.Fatalf("after alice gave up fields: %+v", in)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
