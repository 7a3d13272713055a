package v1beta1_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/randfill"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// install builds the scheme the API server uses: v1beta1 on the wire and the
// same types as the internal version.
func install(scheme *runtime.Scheme) {
	if err := v1beta1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1beta1.AddToSchemeAsInternal(scheme); err != nil {
		panic(err)
	}
}

// fuzzerFuncs make fuzzed objects what the server would hold: defaulted
// (decoding applies defaults, so a fuzzed object must already have them), and
// with parameters and schemas as JSON objects whose keys are sorted (going
// through Unstructured sorts them; the content stays the same).
func fuzzerFuncs(serializer.CodecFactory) []any {
	return []any{
		func(s *v1beta1.ClusterServiceBrokerSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			v1beta1.SetDefaults_ClusterServiceBrokerSpec(s)
		},
		func(s *v1beta1.ServiceBrokerSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			v1beta1.SetDefaults_ServiceBrokerSpec(s)
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			r.Raw = randomJSON(c)
		},
	}
}

// TestRoundTrip is apimachinery's own round trip (internal -> v1beta1 ->
// JSON -> v1beta1 -> internal, deep copies included) for every kind, which
// also proves that the one-type internal version works with the codecs.
func TestRoundTrip(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, install, fuzzerFuncs)
}

// TestRoundTripUnstructured goes through JSON and CBOR to Unstructured and
// back, as dynamic clients and the API server's field manager do.
func TestRoundTripUnstructured(t *testing.T) {
	scheme := runtime.NewScheme()
	install(scheme)
	// meta/v1's options and WatchEvent, registered in the group by
	// metav1.AddToGroupVersion, are apimachinery's to test.
	skip := sets.New[schema.GroupVersionKind]()
	for gvk := range scheme.AllKnownTypes() {
		if !scheme.Recognizes(v1beta1.InternalGroupVersion.WithKind(gvk.Kind)) {
			skip.Insert(gvk)
		}
	}
	roundtrip.RoundtripToUnstructured(t, scheme, fuzzerFuncs, skip, nil)
}

// TestJSONRoundTrip decodes the JSON of fuzzed objects of every kind and
// encodes them again: the bytes must not change.
func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, fuzzerFuncs), rand.NewSource(seed), codecs)

	for kind, typ := range scheme.KnownTypes(v1beta1.SchemeGroupVersion) {
		if typ.PkgPath() != reflect.TypeFor[v1beta1.ClusterServiceBroker]().PkgPath() {
			continue // WatchEvent, ListOptions and the rest of meta/v1
		}
		t.Run(kind, func(t *testing.T) {
			for range 50 {
				obj := reflect.New(typ).Interface().(runtime.Object)
				f.Fill(obj)
				obj.GetObjectKind().SetGroupVersionKind(v1beta1.SchemeGroupVersion.WithKind(kind))
				first := mustJSON(t, obj)
				back := reflect.New(typ).Interface().(runtime.Object)
				if err := strictUnmarshal(first, back); err != nil {
					t.Fatalf("decode: %v\n%s", err, first)
				}
				if second := mustJSON(t, back); !bytes.Equal(first, second) {
					t.Fatalf("JSON changed on the way through Go:\n%s\n%s", first, second)
				}
				if !apiequality.Semantic.DeepEqual(obj, back) {
					t.Fatalf("object changed on the way through JSON: %#v\n%#v", obj, back)
				}
			}
		})
	}
}

// TestDefaults covers the relist defaults of a broker.
func TestDefaults(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	install(scheme)
	for _, tc := range []struct {
		name string
		in   v1beta1.ClusterServiceBrokerSpec
		want v1beta1.ClusterServiceBrokerSpec
	}{
		{"empty", v1beta1.ClusterServiceBrokerSpec{},
			v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{RelistBehavior: "Duration", RelistDuration: &metav1.Duration{Duration: 15 * time.Minute}}}},
		{"duration kept", v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{RelistDuration: &metav1.Duration{Duration: time.Hour}}},
			v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{RelistBehavior: "Duration", RelistDuration: &metav1.Duration{Duration: time.Hour}}}},
		{"manual", v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{RelistBehavior: "Manual"}},
			v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{RelistBehavior: "Manual"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &v1beta1.ClusterServiceBroker{Spec: tc.in}
			scheme.Default(b)
			if !reflect.DeepEqual(b.Spec, tc.want) {
				t.Errorf("got %+v, want %+v", b.Spec, tc.want)
			}
			list := &v1beta1.ClusterServiceBrokerList{Items: []v1beta1.ClusterServiceBroker{{Spec: tc.in}}}
			scheme.Default(list)
			if !reflect.DeepEqual(list.Items[0].Spec, tc.want) {
				t.Errorf("list: got %+v, want %+v", list.Items[0].Spec, tc.want)
			}
			// A ServiceBroker's spec has the same defaults.
			var in, want v1beta1.ServiceBrokerSpec
			if err := convert(&tc.in, &in); err != nil {
				t.Fatal(err)
			}
			if err := convert(&tc.want, &want); err != nil {
				t.Fatal(err)
			}
			nb := &v1beta1.ServiceBroker{Spec: in}
			scheme.Default(nb)
			if !reflect.DeepEqual(nb.Spec, want) {
				t.Errorf("ServiceBroker: got %+v, want %+v", nb.Spec, want)
			}
		})
	}
}

// TestFieldSelectors checks that the scheme accepts exactly the fields that
// SelectableFields returns.
func TestFieldSelectors(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	install(scheme)
	objs := map[string]runtime.Object{
		"ClusterServiceBroker": &v1beta1.ClusterServiceBroker{},
		"ClusterServiceClass":  &v1beta1.ClusterServiceClass{},
		"ClusterServicePlan":   &v1beta1.ClusterServicePlan{},
		"ServiceInstance":      &v1beta1.ServiceInstance{},
		"ServiceBinding":       &v1beta1.ServiceBinding{},
		"ServiceBroker":        &v1beta1.ServiceBroker{},
		"ServiceClass":         &v1beta1.ServiceClass{},
		"ServicePlan":          &v1beta1.ServicePlan{},
	}
	for kind, obj := range objs {
		gvk := v1beta1.SchemeGroupVersion.WithKind(kind)
		set := v1beta1.SelectableFields(obj)
		if _, ok := set["metadata.name"]; !ok {
			t.Errorf("%s: no metadata.name", kind)
		}
		for label := range set {
			if l, v, err := scheme.ConvertFieldLabel(gvk, label, "x"); err != nil || l != label || v != "x" {
				t.Errorf("%s: %s refused: %q %q %v", kind, label, l, v, err)
			}
		}
		if _, _, err := scheme.ConvertFieldLabel(gvk, "spec.nope", "x"); err == nil {
			t.Errorf("%s: spec.nope accepted", kind)
		}
	}
	in := &v1beta1.ServiceInstance{Spec: v1beta1.ServiceInstanceSpec{
		PlanReference:         v1beta1.PlanReference{ClusterServiceClassExternalName: "postgresql"},
		ClusterServicePlanRef: &v1beta1.ClusterObjectReference{Name: "abc"},
	}}
	in.Name, in.Namespace = "db", "team"
	got := v1beta1.SelectableFields(in)
	for k, want := range map[string]string{
		"metadata.name": "db", "metadata.namespace": "team",
		"spec.clusterServiceClassExternalName": "postgresql",
		"spec.clusterServicePlanRef.name":      "abc",
		"spec.clusterServiceClassRef.name":     "",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

// TestCatalogCompatibility: the catalog's model and these types must give the
// same JSON for spec and status, so that the API server maps one onto the
// other field by field. Each case fills one side (completely, or sparsely to
// test the omission of empty values), encodes it, decodes that JSON into the
// other side rejecting unknown fields, and encodes again: the bytes must be
// equal. Both directions together prove that the two sides have the same
// fields with the same names, JSON types, order and omission rules.
func TestCatalogCompatibility(t *testing.T) {
	t.Parallel()
	for kind, pair := range kindPairs() {
		for _, part := range []string{"Spec", "Status"} {
			ct, _ := pair.catalog.FieldByName(part)
			at, _ := pair.api.FieldByName(part)
			t.Run(kind+"."+part, func(t *testing.T) {
				t.Parallel()
				start := time.Now().UnixNano()
				for i := range 40 {
					seed, full := start+int64(i), i%2 == 0
					f := filler(seed, full)
					// catalog -> JSON -> v1beta1 -> JSON
					c := reflect.New(ct.Type).Interface()
					f.Fill(c)
					fixCatalog(kind, c)
					want := apiJSON(mustJSON(t, c), c)
					a := reflect.New(at.Type).Interface()
					if err := strictUnmarshal(want, a); err != nil {
						t.Fatalf("seed %d full %v: catalog JSON does not decode into %T: %v\n%s", seed, full, a, err, want)
					}
					if got := mustJSON(t, a); !bytes.Equal(got, want) {
						t.Fatalf("seed %d full %v: catalog -> v1beta1 changed the JSON:\ncatalog: %s\nv1beta1: %s", seed, full, want, got)
					}

					// v1beta1 -> JSON -> catalog -> JSON
					a = reflect.New(at.Type).Interface()
					f.Fill(a)
					fixAPI(a)
					aj := mustJSON(t, a)
					c = reflect.New(ct.Type).Interface()
					if err := strictUnmarshal(catalogJSON(aj, a), c); err != nil {
						t.Fatalf("seed %d full %v: v1beta1 JSON does not decode into %T: %v\n%s", seed, full, c, err, aj)
					}
					if got := apiJSON(mustJSON(t, c), c); !bytes.Equal(got, aj) {
						t.Fatalf("seed %d full %v: v1beta1 -> catalog changed the JSON:\nv1beta1: %s\ncatalog: %s", seed, full, aj, got)
					}
				}
			})
		}
	}
}

// kindPairs pairs each catalog kind with its v1beta1 type.
func kindPairs() map[string]struct{ catalog, api reflect.Type } {
	return map[string]struct{ catalog, api reflect.Type }{
		catalog.KindBroker:       {reflect.TypeFor[catalog.Broker](), reflect.TypeFor[v1beta1.ClusterServiceBroker]()},
		catalog.KindServiceClass: {reflect.TypeFor[catalog.ServiceClass](), reflect.TypeFor[v1beta1.ClusterServiceClass]()},
		catalog.KindServicePlan:  {reflect.TypeFor[catalog.ServicePlan](), reflect.TypeFor[v1beta1.ClusterServicePlan]()},
		catalog.KindInstance:     {reflect.TypeFor[catalog.Instance](), reflect.TypeFor[v1beta1.ServiceInstance]()},
		catalog.KindBinding:      {reflect.TypeFor[catalog.Binding](), reflect.TypeFor[v1beta1.ServiceBinding]()},

		catalog.KindNamespacedBroker:       {reflect.TypeFor[catalog.Broker](), reflect.TypeFor[v1beta1.ServiceBroker]()},
		catalog.KindNamespacedServiceClass: {reflect.TypeFor[catalog.ServiceClass](), reflect.TypeFor[v1beta1.ServiceClass]()},
		catalog.KindNamespacedServicePlan:  {reflect.TypeFor[catalog.ServicePlan](), reflect.TypeFor[v1beta1.ServicePlan]()},
	}
}

// TestKindsMatch makes sure that kindPairs is complete: the kinds pair up,
// and besides object metadata each side has exactly a spec and a status.
func TestKindsMatch(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	install(scheme)
	for kind, pair := range kindPairs() {
		if got := scheme.KnownTypes(v1beta1.SchemeGroupVersion)[kind]; got != pair.api {
			t.Errorf("%s: scheme has %v, want %v", kind, got, pair.api)
		}
		var cf, af []string
		for f := range pair.catalog.Fields() {
			if f.IsExported() && f.Name != "Meta" {
				cf = append(cf, f.Name+" "+f.Tag.Get("json"))
			}
		}
		for f := range pair.api.Fields() {
			if f.Name != "TypeMeta" && f.Name != "ObjectMeta" {
				af = append(af, f.Name+" "+strings.Split(f.Tag.Get("json"), ",")[0])
			}
		}
		if !sets.New(cf...).Equal(sets.New(af...)) {
			t.Errorf("%s: catalog has %v, v1beta1 has %v", kind, cf, af)
		}
	}
}

// filler fills values for TestCatalogCompatibility. Full: every field set,
// no nil pointers, empty lists or maps, bools true. Sparse: about half of
// everything left empty or zero, to catch a field that one side omits when
// empty and the other does not. Times are whole seconds in UTC (metav1.Time's
// precision; a zero condition time is the one known difference, see
// TestMinimalObjects), JSON fields hold a JSON object, durations are set.
func filler(seed int64, full bool) *randfill.Filler {
	empty := func(c randfill.Continue) bool { return !full && c.Bool() }
	f := randfill.NewWithSeed(seed).NilChance(0).NumElements(1, 3)
	if !full {
		f = f.NilChance(0.5).NumElements(0, 2)
	}
	return f.Funcs(
		func(b *bool, c randfill.Continue) { *b = !empty(c) },
		func(s *string, c randfill.Continue) {
			if *s = ""; !empty(c) {
				*s = "s" + c.String(8)
			}
		},
		func(n *int64, c randfill.Continue) {
			if *n = 0; !empty(c) {
				*n = c.Int63()
			}
		},
		func(n *int, c randfill.Continue) {
			if *n = 0; !empty(c) {
				*n = int(c.Int31())
			}
		},
		func(tm *time.Time, c randfill.Continue) {
			*tm = time.Unix(1+c.Int63n(4e9), 0).UTC()
		},
		func(tm *metav1.Time, c randfill.Continue) {
			tm.Time = time.Unix(1+c.Int63n(4e9), 0).UTC()
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63n(int64(100 * time.Hour)))
		},
		func(r *json.RawMessage, c randfill.Continue) {
			if *r = nil; !empty(c) {
				*r = randomJSON(c)
			}
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			r.Raw = randomJSON(c)
		},
		func(b *[]byte, c randfill.Continue) {
			if *b = nil; !empty(c) {
				*b = []byte("bytes " + c.String(8))
			}
		},
	)
}

// randomJSON returns a JSON object, compact and with sorted keys as
// encoding/json writes it.
func randomJSON(c randfill.Continue) []byte {
	b, err := json.Marshal(map[string]any{"k": c.String(8), "n": []any{c.Int63(), map[string]any{c.String(4): c.Bool()}}})
	if err != nil {
		panic(err)
	}
	return b
}

// fixCatalog makes a filled catalog value one that the catalog can hold
// for an object of kind.
//
// References to cluster-scoped objects and to objects in the referrer's
// namespace carry no namespace in v1beta1 (nor in Service Catalog); the
// catalog never sets one there. Brokers, classes and plans of both scopes
// share the catalog's types: an object has the fields of its scope and not
// the other's, and always names its broker (and a plan its class).
func fixCatalog(kind string, v any) {
	namespaced := kind == catalog.KindNamespacedBroker || kind == catalog.KindNamespacedServiceClass || kind == catalog.KindNamespacedServicePlan
	switch s := v.(type) {
	case *catalog.BrokerSpec:
		// The catalog keeps relistDuration as Go prints durations.
		s.RelistDuration = (90 * time.Minute).String()
		if a := s.AuthInfo; a != nil && namespaced {
			// The Secret is in the broker's own namespace.
			if a.Basic != nil && a.Basic.SecretRef != nil {
				a.Basic.SecretRef.Namespace = ""
			}
			if a.Bearer != nil && a.Bearer.SecretRef != nil {
				a.Bearer.SecretRef.Namespace = ""
			}
		}
	case *catalog.ServiceClassSpec:
		if namespaced {
			s.ClusterServiceBrokerName, s.ServiceBrokerName = "", "broker-"+s.ExternalID
		} else {
			s.ClusterServiceBrokerName, s.ServiceBrokerName = "broker-"+s.ExternalID, ""
		}
	case *catalog.ServicePlanSpec:
		class := catalog.ObjectRef{Name: "class-" + s.ExternalID}
		if namespaced {
			s.ClusterServiceBrokerName, s.ServiceBrokerName = "", "broker-"+s.ExternalID
			s.ClusterServiceClassRef, s.ServiceClassRef = catalog.ObjectRef{}, class
		} else {
			s.ClusterServiceBrokerName, s.ServiceBrokerName = "broker-"+s.ExternalID, ""
			s.ClusterServiceClassRef, s.ServiceClassRef = class, catalog.ObjectRef{}
		}
	case *catalog.InstanceSpec:
		for _, r := range []*catalog.ObjectRef{s.ClusterServiceClassRef, s.ClusterServicePlanRef, s.ServiceClassRef, s.ServicePlanRef} {
			if r != nil {
				r.Namespace = ""
			}
		}
	case *catalog.BindingSpec:
		s.InstanceRef.Namespace = ""
	}
}

// fixAPI makes a filled v1beta1 value one that the API server can hold: a
// class names its broker, a plan its broker and class.
func fixAPI(v any) {
	switch s := v.(type) {
	case *v1beta1.ClusterServiceClassSpec:
		s.ClusterServiceBrokerName = "broker-" + s.ExternalID
	case *v1beta1.ServiceClassSpec:
		s.ServiceBrokerName = "broker-" + s.ExternalID
	case *v1beta1.ClusterServicePlanSpec:
		s.ClusterServiceBrokerName, s.ClusterServiceClassRef.Name = "broker-"+s.ExternalID, "class-"+s.ExternalID
	case *v1beta1.ServicePlanSpec:
		s.ServiceBrokerName, s.ServiceClassRef.Name = "broker-"+s.ExternalID, "class-"+s.ExternalID
	}
}

// apiJSON turns the catalog's JSON of v into v1beta1's: the one field whose
// encoding differs is a broker's caBundle, PEM text in the catalog and bytes
// (so base64) in v1beta1.
func apiJSON(data []byte, v any) []byte {
	s, ok := v.(*catalog.BrokerSpec)
	if !ok || s.CABundle == "" {
		return data
	}
	pem, _ := json.Marshal(s.CABundle)
	b64, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(s.CABundle)))
	return bytes.Replace(data, append([]byte(`"caBundle":`), pem...), append([]byte(`"caBundle":`), b64...), 1)
}

// catalogJSON is the inverse of apiJSON.
func catalogJSON(data []byte, v any) []byte {
	var ca []byte
	switch s := v.(type) {
	case *v1beta1.ClusterServiceBrokerSpec:
		ca = s.CABundle
	case *v1beta1.ServiceBrokerSpec:
		ca = s.CABundle
	}
	if len(ca) == 0 {
		return data
	}
	pem, _ := json.Marshal(string(ca))
	b64, _ := json.Marshal(ca)
	return bytes.Replace(data, append([]byte(`"caBundle":`), b64...), append([]byte(`"caBundle":`), pem...), 1)
}

// TestMinimalObjects encodes zero-valued specs and statuses on both sides:
// what an object looks like before anything is set.
func TestMinimalObjects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		catalog, api any
		diff         string // the difference, if any, explained
	}{
		{catalog.BrokerSpec{}, v1beta1.ClusterServiceBrokerSpec{}, ""},
		{catalog.BrokerStatus{}, v1beta1.ClusterServiceBrokerStatus{}, ""},
		{catalog.InstanceSpec{}, v1beta1.ServiceInstanceSpec{}, ""},
		{catalog.InstanceStatus{}, v1beta1.ServiceInstanceStatus{}, ""},
		{catalog.BindingSpec{}, v1beta1.ServiceBindingSpec{}, ""},
		{catalog.BindingStatus{}, v1beta1.ServiceBindingStatus{}, ""},
		{catalog.BrokerSpec{}, v1beta1.ServiceBrokerSpec{}, ""},
		{catalog.BrokerStatus{}, v1beta1.ServiceBrokerStatus{}, ""},
		// A class names its broker, a plan its broker and class, in the
		// fields of its scope; the catalog omits the other scope's, and
		// Service Catalog always wrote them.
		{catalog.ServicePlanSpec{}, v1beta1.ClusterServicePlanSpec{},
			`{"clusterServiceBrokerName":"","externalName":"","externalID":"","description":"","free":false,"clusterServiceClassRef":{"name":""}}`},
		{catalog.ServiceClassSpec{}, v1beta1.ClusterServiceClassSpec{},
			`{"clusterServiceBrokerName":"","externalName":"","externalID":"","description":"","bindable":false}`},
		{catalog.ServicePlanSpec{}, v1beta1.ServicePlanSpec{},
			`{"serviceBrokerName":"","externalName":"","externalID":"","description":"","free":false,"serviceClassRef":{"name":""}}`},
		{catalog.ServiceClassSpec{}, v1beta1.ServiceClassSpec{},
			`{"serviceBrokerName":"","externalName":"","externalID":"","description":"","bindable":false}`},
		{catalog.ServicePlanStatus{}, v1beta1.ServicePlanStatus{}, ""},
		{catalog.ServiceClassStatus{}, v1beta1.ServiceClassStatus{}, ""},
		// A condition always has a transition time (catalog.SetCondition
		// sets it); a zero one is null in Kubernetes and year 1 in Go.
		{catalog.Condition{}, v1beta1.ServiceInstanceCondition{},
			`{"type":"","status":"","lastTransitionTime":null}`},
	} {
		c, a := mustJSON(t, tc.catalog), mustJSON(t, tc.api)
		want := c
		if tc.diff != "" {
			want = []byte(tc.diff)
		}
		if !bytes.Equal(a, want) {
			t.Errorf("%T: catalog %s, v1beta1 %s", tc.api, c, a)
		}
	}
}

// TestSchemeKinds checks the kinds and their scope as the clientset sees
// them, under both versions.
func TestSchemeKinds(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	install(scheme)
	for _, gv := range []schema.GroupVersion{v1beta1.SchemeGroupVersion, v1beta1.InternalGroupVersion} {
		for _, kind := range []string{
			"ClusterServiceBroker", "ClusterServiceClass", "ClusterServicePlan", "ServiceInstance", "ServiceBinding",
			"ServiceBroker", "ServiceClass", "ServicePlan",
		} {
			for _, k := range []string{kind, kind + "List"} {
				if !scheme.Recognizes(gv.WithKind(k)) {
					t.Errorf("%s %s not registered", gv, k)
				}
			}
		}
	}
	kinds, _, err := scheme.ObjectKinds(&v1beta1.ServiceInstance{})
	if err != nil || len(kinds) != 2 || kinds[0].Version != "v1beta1" {
		t.Errorf("ObjectKinds = %v, %v; want v1beta1 first, then internal", kinds, err)
	}
}

// convert moves a value to a type of the same JSON.
func convert(from, to any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return strictUnmarshal(raw, to)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func strictUnmarshal(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
