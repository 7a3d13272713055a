package apiserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestExternalIDUnique: a second instance or binding with another one's
// spec.externalID is refused with 409, the cause naming the field, in any
// namespace (OSB ids are global to a broker).
func TestExternalIDUnique(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := func(ns, name string) *v1beta1.ServiceInstance {
		return &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1beta1.ServiceInstanceSpec{
				PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"},
				ExternalID:    "shared-instance-id"}}
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Create(ctx, in("a", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.ServicecatalogV1beta1().ServiceInstances("b").Create(ctx, in("b", "db"), metav1.CreateOptions{})
	checkFieldConflict(t, err)

	bind := func(name string) *v1beta1.ServiceBinding {
		return &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "a"},
			Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}, ExternalID: "shared-binding-id"}}
	}
	if _, err := b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(ctx, bind("one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(ctx, bind("two"), metav1.CreateOptions{})
	checkFieldConflict(t, err)
}

func checkFieldConflict(t *testing.T, err error) {
	t.Helper()
	var st apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errorsAs(err, &st) {
		t.Fatalf("duplicate externalID: %v, want 409 Conflict", err)
	}
	s := st.Status()
	if s.Code != http.StatusConflict || s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != "spec.externalID" {
		t.Fatalf("duplicate externalID: status %+v, want a cause naming spec.externalID", s)
	}
}

func errorsAs(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

// TestImmutableRefs: a patch that changes the class or plan reference
// Bindery resolved is 422 Invalid naming the field.
func TestImmutableRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "a"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
	if _, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Patch(ctx, "db", types.MergePatchType,
		[]byte(`{"spec":{"clusterServicePlanRef":{"name":"somebody-else"}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterServicePlanRef.name") {
		t.Fatalf("changing the plan reference: %v, want 422 Invalid naming spec.clusterServicePlanRef.name", err)
	}
}

// TestBrokerInputRefused: a broker whose URL holds credentials, or whose
// metadata PostgreSQL cannot store (a NUL byte), is 422 Invalid naming the
// field, never a 500, and the credentials are not quoted back.
func TestBrokerInputRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ClusterServiceBrokers()
	for _, tc := range []struct {
		name  string
		url   string
		annot map[string]string
		field string
	}{
		{"credentials in the URL", "http://user:hunter2@broker.example", nil, "spec.url"},
		{"a NUL byte in an annotation", "http://broker.example", map[string]string{"note": "a\x00b"}, "metadata.annotations[note]"},
	} {
		_, err := c.Create(ctx, &v1beta1.ClusterServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "refused", Annotations: tc.annot},
			Spec: v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{URL: tc.url}}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want 422 Invalid naming %s without the password", tc.name, err, tc.field)
		}
	}
}

// createDB creates instance a/db of the fake broker's sync plan through
// the API.
func createDB(t *testing.T, b *bundle) *v1beta1.ServiceInstance {
	t.Helper()
	in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "a"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
	created, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Create(context.Background(), in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// createApp creates binding app of instance db in namespace a.
func createApp(t *testing.T, b *bundle) *v1beta1.ServiceBinding {
	t.Helper()
	app := &v1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "a"}, Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}
	if _, err := b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return app
}

// TestUnstorableSpecRefused: text PostgreSQL cannot store (a NUL, a lone
// surrogate escape in the parameters' raw JSON) anywhere in a spec or in
// the rest of the metadata is 422 Invalid naming the field, through every
// kind of write — create, merge, JSON, strategic merge and apply patches —
// never a 500 from the database.
func TestUnstorableSpecRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	newInstance := func(name, spec, meta string) string {
		return `{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance","metadata":{"name":"` + name + `"` + meta + `},` +
			`"spec":{"clusterServiceClassExternalName":"fake-service","clusterServicePlanExternalName":"sync"` + spec + `}}`
	}
	apply := `{"apiVersion":"servicecatalog.k8s.io/v1beta1","kind":"ServiceInstance","metadata":{"name":"db"},"spec":{"parameters":{"x":"\u0000"}}}`
	for _, tc := range []struct {
		verb, path, contentType, body, field string
	}{
		{"POST", "namespaces/a/serviceinstances", "application/json", newInstance("nul", `,"parameters":{"x":"\u0000"}`, ""), "spec.parameters.x"},
		{"POST", "namespaces/a/serviceinstances", "application/json", newInstance("lone", `,"parameters":{"x":"\ud800"}`, ""), "spec.parameters.x"},
		{"POST", "namespaces/a/serviceinstances", "application/json", newInstance("from", `,"parametersFrom":[{"secretKeyRef":{"name":"s","key":"\u0000"}}]`, ""), "spec.parametersFrom[0].secretKeyRef.key"},
		{"POST", "namespaces/a/serviceinstances", "application/json", newInstance("gen", "", `,"generateName":"x\u0000"`), "metadata.generateName"},
		{"PATCH", "namespaces/a/serviceinstances/db", string(types.MergePatchType), `{"spec":{"parameters":{"x":"\ud800"}}}`, "spec.parameters.x"},
		{"PATCH", "namespaces/a/serviceinstances/db", string(types.JSONPatchType), `[{"op":"add","path":"/spec/parameters","value":{"x":"\u0000"}}]`, "spec.parameters.x"},
		{"PATCH", "namespaces/a/serviceinstances/db", string(types.StrategicMergePatchType), `{"spec":{"parameters":{"x":"\u0000"}}}`, "spec.parameters.x"},
		{"PATCH", "namespaces/a/serviceinstances/db?fieldManager=test", string(types.ApplyPatchType), apply, "spec.parameters.x"},
		{"POST", "namespaces/a/servicebindings", "application/json", `{"metadata":{"name":"b"},"spec":{"instanceRef":{"name":"db"},"secretTransforms":[{"addKey":{"key":"k","stringValue":"\u0000"}}]}}`, "spec.secretTransforms[0].addKey.stringValue"},
		// Names the catalog would look up: refused before they reach the
		// database.
		{"POST", "namespaces/a/serviceinstances", "application/json", `{"metadata":{"name":"cls"},"spec":{"clusterServiceClassExternalName":"fake-service\u0000","clusterServicePlanExternalName":"sync"}}`, "spec.clusterServiceClassExternalName"},
		{"POST", "namespaces/a/serviceinstances?dryRun=All", "application/json", `{"metadata":{"name":"pln"},"spec":{"clusterServiceClassExternalName":"fake-service","clusterServicePlanExternalName":"\u0000"}}`, "spec.clusterServicePlanExternalName"},
		{"POST", "namespaces/a/serviceinstances", "application/json", `{"metadata":{"name":"byk8s"},"spec":{"clusterServiceClassName":"x\u0000","clusterServicePlanName":"y"}}`, "spec.clusterServiceClassName"},
		// Longer than any catalogue's name: no class can ever match.
		{"POST", "namespaces/a/serviceinstances", "application/json", `{"metadata":{"name":"long"},"spec":{"clusterServiceClassExternalName":"` + strings.Repeat("p", 300) + `","clusterServicePlanExternalName":"sync"}}`, "spec.clusterServiceClassExternalName"},
		{"POST", "namespaces/a/serviceinstances", "application/json", `{"metadata":{"name":"ns"},"spec":{"serviceClassExternalName":"x\u0000","servicePlanExternalName":"y"}}`, "spec.serviceClassExternalName"},
		{"PATCH", "namespaces/a/serviceinstances/db", string(types.MergePatchType), `{"spec":{"clusterServicePlanExternalName":"async\u0000"}}`, "spec.clusterServicePlanExternalName"},
		{"POST", "namespaces/a/servicebindings", "application/json", `{"metadata":{"name":"ref"},"spec":{"instanceRef":{"name":"db\u0000"}}}`, "spec.instanceRef.name"},
		{"POST", "clusterservicebrokers", "application/json", `{"metadata":{"name":"r"},"spec":{"url":"http://broker.example","catalogRestrictions":{"serviceClass":["name==\u0000"]}}}`, "spec.catalogRestrictions.serviceClass[0]"},
	} {
		var code int
		path, query, _ := strings.Cut(tc.path, "?")
		req := c.RESTClient().Verb(tc.verb).AbsPath("/apis/servicecatalog.k8s.io/v1beta1", path).SetHeader("Content-Type", tc.contentType).Body([]byte(tc.body))
		if m, v, ok := strings.Cut(query, "="); ok {
			req = req.Param(m, v)
		}
		res := req.Do(ctx)
		raw, _ := res.Raw()
		res.StatusCode(&code)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("%s %s %s: %d %s, want 422 naming %s", tc.verb, tc.path, tc.body, code, raw, tc.field)
		}
	}
	got, err := c.ServiceInstances("a").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || got.Spec.Parameters != nil || got.Generation != 1 {
		t.Errorf("the instance after refused patches: %+v, %v", got, err)
	}
}

// TestUnstorableSelectorRefused: a field selector value PostgreSQL cannot
// hold (a NUL, invalid UTF-8) is 400 naming the field, for lists, lists
// across namespaces and watches, not a 500 from the database.
func TestUnstorableSelectorRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	for _, tc := range []struct {
		ns, selector, field string
	}{
		{"a", "metadata.name=x\x00", "metadata.name"},
		{"a", "metadata.name=\xff", "metadata.name"},
		{"", "metadata.namespace=\x00", "metadata.namespace"},
		{"", "spec.externalID=\xff", "spec.externalID"},
	} {
		_, err := c.ServiceInstances(tc.ns).List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("list with %q: %v, want 400 naming %s", tc.selector, err, tc.field)
		}
		w, err := c.ServiceInstances(tc.ns).Watch(ctx, metav1.ListOptions{FieldSelector: tc.selector})
		if err == nil {
			w.Stop()
		}
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("watch with %q: %v, want 400 naming %s", tc.selector, err, tc.field)
		}
	}
}

// TestSelectorWithNULRefused: a label or field selector holding a NUL is
// 400 naming it, for lists, watches and deletes of a collection; the
// selector parser read a NUL as the end of its text, so labelSelector=%00
// selected every object, and a delete of the collection deleted them all.
func TestSelectorWithNULRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	for _, opts := range []metav1.ListOptions{
		{LabelSelector: "\x00"},
		{LabelSelector: "a in (x\x00)"},
		{FieldSelector: "\x00"},
		{LabelSelector: "\x00", Limit: 1},
		{LabelSelector: "\x00", ResourceVersion: "0"},
	} {
		name := "labelSelector"
		if opts.FieldSelector != "" {
			name = "fieldSelector"
		}
		if _, err := c.ServiceInstances("a").List(ctx, opts); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("list with %+v: %v, want 400 naming %s", opts, err, name)
		}
		if _, err := c.ServiceInstances("").List(ctx, opts); !apierrors.IsBadRequest(err) {
			t.Errorf("list of every namespace with %+v: %v, want 400", opts, err)
		}
		w, err := c.ServiceInstances("a").Watch(ctx, opts)
		if err == nil {
			w.Stop()
		}
		if !apierrors.IsBadRequest(err) {
			t.Errorf("watch with %+v: %v, want 400", opts, err)
		}
		if err := c.ServiceInstances("a").DeleteCollection(ctx, metav1.DeleteOptions{}, opts); !apierrors.IsBadRequest(err) {
			t.Errorf("delete of the collection with %+v: %v, want 400", opts, err)
		}
	}
	if in, err := c.ServiceInstances("a").Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if in.DeletionTimestamp != nil {
		t.Error("a refused delete of the collection deleted the instance")
	}
}

// TestOutOfRangeNumberRefused: a parameter number no float64 holds (1e400)
// is 400 naming it, for creates and updates of instances and bindings; it
// used to make the field manager panic, and the client got a reset stream.
func TestOutOfRangeNumberRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	created := createDB(t, b)
	spec := `"spec":{"clusterServiceClassExternalName":"fake-service","clusterServicePlanExternalName":"sync","parameters":{"a":{"b":[1,-1e999]}}}`
	for _, tc := range []struct{ verb, path, contentType, body string }{
		{"POST", "namespaces/a/serviceinstances", "application/json", `{"metadata":{"name":"big"},` + spec + `}`},
		{"PUT", "namespaces/a/serviceinstances/db", "application/json", `{"metadata":{"name":"db","resourceVersion":"` + created.ResourceVersion + `"},` + spec + `}`},
		{"POST", "namespaces/a/servicebindings", "application/json", `{"metadata":{"name":"app"},"spec":{"instanceRef":{"name":"db"},"parameters":{"a":{"b":[1,-1e999]}}}}`},
	} {
		var code int
		res := c.RESTClient().Verb(tc.verb).AbsPath("/apis/servicecatalog.k8s.io/v1beta1", tc.path).SetHeader("Content-Type", tc.contentType).Body([]byte(tc.body)).Do(ctx)
		raw, err := res.Raw()
		res.StatusCode(&code)
		if code != http.StatusBadRequest || !strings.Contains(string(raw), "spec.parameters.a.b[1]") {
			t.Errorf("%s %s %s: %d %s (%v), want 400 naming spec.parameters.a.b[1]", tc.verb, tc.path, tc.contentType, code, raw, err)
		}
	}
}

// TestStatusSubresourceReadsOneObject: GET of an instance's or binding's
// status subresource answers the object, as it does for a CRD with a
// status subresource, and 404 for one that does not exist; it used to
// answer a list of the objects of that name, a 200 for any name. The
// subresource is read and written only by name: it has no list or watch.
func TestStatusSubresourceReadsOneObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createDB(t, b)
	rc := b.client.ServicecatalogV1beta1().RESTClient()
	if _, err := b.client.ServicecatalogV1beta1().ServiceBindings("a").Create(ctx, &v1beta1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, kind string
		code       int
	}{
		{"namespaces/a/serviceinstances/db/status", "ServiceInstance", http.StatusOK},
		{"namespaces/a/servicebindings/app/status", "ServiceBinding", http.StatusOK},
		{"namespaces/a/serviceinstances/nope/status", "Status", http.StatusNotFound},
		{"namespaces/a/servicebindings/nope/status", "Status", http.StatusNotFound},
		{"clusterservicebrokers/fake/status", "ClusterServiceBroker", http.StatusOK},
	} {
		var code int
		res := rc.Get().AbsPath("/apis/servicecatalog.k8s.io/v1beta1", tc.path).Do(ctx)
		raw, _ := res.Raw()
		res.StatusCode(&code)
		if code != tc.code || !strings.Contains(string(raw), `"kind":"`+tc.kind+`"`) {
			t.Errorf("GET %s: %d %.200s, want %d with a %s", tc.path, code, raw, tc.code, tc.kind)
		}
	}
}

// TestUnstorableStatusRefused: text PostgreSQL cannot store written
// through the status subresource of an instance or a binding is 422
// Invalid naming the field, never a 500 from the database, and the status
// stays as it was.
func TestUnstorableStatusRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	if _, err := c.ServiceBindings("a").Create(ctx, &v1beta1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, body, field string }{
		{"namespaces/a/serviceinstances/db/status", `{"status":{"lastOperation":"x\u0000y"}}`, "status.lastOperation"},
		{"namespaces/a/serviceinstances/db/status", `{"status":{"dashboardURL":"https://dash.example/\u0000"}}`, "status.dashboardURL"},
		{"namespaces/a/serviceinstances/db/status", `{"status":{"inProgressProperties":{"clusterServicePlanExternalName":"sync","parameters":{"a":"\u0000"}}}}`, "status.inProgressProperties.parameters.a"},
		{"namespaces/a/servicebindings/app/status", `{"status":{"lastOperation":"\u0000"}}`, "status.lastOperation"},
	} {
		var code int
		res := c.RESTClient().Patch(types.MergePatchType).AbsPath("/apis/servicecatalog.k8s.io/v1beta1", tc.path).Body([]byte(tc.body)).Do(ctx)
		raw, _ := res.Raw()
		res.StatusCode(&code)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("PATCH %s %s: %d %.300s, want 422 naming %s", tc.path, tc.body, code, raw, tc.field)
		}
	}
	in, err := c.ServiceInstances("a").Get(ctx, "db", metav1.GetOptions{})
	if err != nil || in.Status.LastOperation != "" || in.Status.DashboardURL != "" || in.Status.InProgressProperties != nil {
		t.Errorf("the instance's status after refused writes: %+v, %v", in.Status, err)
	}
}

// TestHugeLabelSelectorRefused: a label selector of more requirements and
// values than a PostgreSQL statement can carry as parameters is 400 naming
// labelSelector, for lists (paged or not), watches and deletecollection,
// not a 500 from the database; one of a thousand keys is served.
func TestHugeLabelSelectorRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	keys := func(n int) string {
		k := make([]string, n)
		for i := range k {
			k[i] = fmt.Sprintf("k%d", i)
		}
		return strings.Join(k, ",")
	}
	huge := keys(70000)
	for _, limit := range []int64{0, 5} {
		_, err := c.ServiceInstances("a").List(ctx, metav1.ListOptions{LabelSelector: huge, Limit: limit})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "labelSelector") {
			t.Errorf("list of limit %d with 70,000 keys: %.300v, want 400 naming labelSelector", limit, err)
		}
	}
	w, err := c.ServiceInstances("a").Watch(ctx, metav1.ListOptions{LabelSelector: huge})
	if err == nil {
		w.Stop()
	}
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "labelSelector") {
		t.Errorf("watch with 70,000 keys: %.300v, want 400 naming labelSelector", err)
	}
	err = c.ServiceInstances("a").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: huge})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "labelSelector") {
		t.Errorf("deletecollection with 70,000 keys: %.300v, want 400 naming labelSelector", err)
	}
	if l, err := c.ServiceInstances("a").List(ctx, metav1.ListOptions{LabelSelector: "!" + strings.ReplaceAll(keys(1000), ",", ",!")}); err != nil || len(l.Items) != 1 {
		t.Errorf("list with 1,000 keys: %v", err)
	}
}

// TestRelistRequestsCountUp: a broker's spec.relistRequests is a counter,
// as in Service Catalog: a negative one, or one lower than it was, is 422
// naming the field; counting up is an update like any other.
func TestRelistRequestsCountUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1().ClusterServiceBrokers()
	_, err := c.Create(ctx, &v1beta1.ClusterServiceBroker{ObjectMeta: metav1.ObjectMeta{Name: "negative"},
		Spec: v1beta1.ClusterServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{URL: "http://broker.example", RelistRequests: -1}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.relistRequests") {
		t.Errorf("a broker with relistRequests -1: %v, want 422 naming spec.relistRequests", err)
	}
	if _, err := c.Patch(ctx, "fake", types.MergePatchType, []byte(`{"spec":{"relistRequests":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("counting relistRequests up: %v", err)
	}
	_, err = c.Patch(ctx, "fake", types.MergePatchType, []byte(`{"spec":{"relistRequests":1}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.relistRequests") {
		t.Errorf("relistRequests from 2 to 1: %v, want 422 naming spec.relistRequests", err)
	}
}

// TestUnstorableNameInPath: a name or a namespace in the URL that
// PostgreSQL cannot hold (a NUL, invalid UTF-8) names nothing, as in
// kube-apiserver: 404 for the object and its subresources, an empty list
// in such a namespace. Every verb and kind used to answer 500 from the
// database.
func TestUnstorableNameInPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createDB(t, b)
	g := newHTTPGet(t, b)
	const base = "/apis/servicecatalog.k8s.io/v1beta1/"
	for _, tc := range []struct {
		verb, path, body string
		code             int
	}{
		{"GET", "namespaces/a/serviceinstances/x%00y", "", http.StatusNotFound},
		{"GET", "namespaces/a/serviceinstances/x%ffy", "", http.StatusNotFound},
		{"GET", "namespaces/a%00b/serviceinstances/db", "", http.StatusNotFound},
		{"GET", "namespaces/a/serviceinstances/x%00y/status", "", http.StatusNotFound},
		{"GET", "namespaces/a/servicebindings/x%00y/credentials", "", http.StatusNotFound},
		{"GET", "clusterservicebrokers/x%00y", "", http.StatusNotFound},
		{"GET", "clusterserviceplans/x%ffy", "", http.StatusNotFound},
		{"GET", "namespaces/a/serviceplans/x%00y", "", http.StatusNotFound},
		{"PATCH", "namespaces/a/serviceinstances/x%00y", `{}`, http.StatusNotFound},
		{"PUT", "namespaces/a/serviceinstances/x%00y", `{"metadata":{"name":"x\u0000y"}}`, http.StatusNotFound},
		{"DELETE", "namespaces/a/serviceinstances/x%00y", "", http.StatusNotFound},
		{"GET", "namespaces/a%00b/serviceinstances", "", http.StatusOK},
		{"GET", "namespaces/a%ffb/serviceinstances?limit=5", "", http.StatusOK},
		{"DELETE", "namespaces/a%00b/serviceinstances", "", http.StatusOK},
	} {
		req, err := http.NewRequest(tc.verb, g.host+base+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/merge-patch+json")
		if tc.verb == "PUT" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.code || (tc.code == http.StatusOK && !strings.Contains(string(raw), `"items":[]`)) {
			t.Errorf("%s %s: %d %.300s, want %d", tc.verb, tc.path, res.StatusCode, raw, tc.code)
		}
	}
}

// TestDeepBodyRefused: a create, update or patch whose JSON body nests
// deeper than 100 levels is 400 before k8s.io/apiserver decodes or applies
// it (a merge patch 6,000 levels deep took 4.7 s of the server's CPU);
// parameters nested a few dozen levels are stored as before.
func TestDeepBodyRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createDB(t, b)
	c := b.client.ServicecatalogV1beta1().ServiceInstances("a")
	nested := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	if _, err := c.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"parameters":`+nested(50)+`}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("parameters 50 levels deep: %v", err)
	}
	for _, tc := range []struct {
		name string
		pt   types.PatchType
		body string
	}{
		{"merge patch", types.MergePatchType, `{"spec":{"parameters":` + nested(3000) + `}}`},
		{"strategic merge patch", types.StrategicMergePatchType, `{"metadata":{"annotations":` + nested(200) + `}}`},
		{"JSON patch", types.JSONPatchType, `[{"op":"add","path":"/spec/parameters","value":` + nested(200) + `}]`},
	} {
		_, err := c.Patch(ctx, "db", tc.pt, []byte(tc.body), metav1.PatchOptions{})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "deeper than 100 levels") {
			t.Errorf("%s nested past 100 levels: %v, want 400 saying it nests too deep", tc.name, err)
		}
	}
	deep := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: "deep"}, Spec: v1beta1.ServiceInstanceSpec{
		PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"},
		Parameters:    &runtime.RawExtension{Raw: []byte(nested(200))}}}
	if _, err := c.Create(ctx, deep, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a create with parameters 200 levels deep: %v, want 400", err)
	}
}

// TestStatusValuesChecked: a status written through the status subresource
// holds only the operations, states and conditions the engine knows, no
// dashboard URL but an http or https one, and no negative generation (422
// naming the field, as Service Catalog's validation answered); a value
// left as it was passes.
func TestStatusValuesChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client.ServicecatalogV1beta1()
	createDB(t, b)
	createApp(t, b)
	for _, tc := range []struct{ path, patch, field string }{
		{"serviceinstances/db", `{"status":{"currentOperation":"Bogus"}}`, "status.currentOperation"},
		{"serviceinstances/db", `{"status":{"provisionStatus":"Maybe"}}`, "status.provisionStatus"},
		{"serviceinstances/db", `{"status":{"deprovisionStatus":"Later"}}`, "status.deprovisionStatus"},
		{"serviceinstances/db", `{"status":{"conditions":[{"type":"Ready","status":"Maybe"}]}}`, "status.conditions[0].status"},
		{"serviceinstances/db", `{"status":{"conditions":[{"type":"","status":"True"}]}}`, "status.conditions[0].type"},
		{"serviceinstances/db", `{"status":{"observedGeneration":-5}}`, "status.observedGeneration"},
		{"serviceinstances/db", `{"status":{"dashboardURL":"javascript:alert(document.cookie)"}}`, "status.dashboardURL"},
		{"servicebindings/app", `{"status":{"currentOperation":"Provision"}}`, "status.currentOperation"},
		{"servicebindings/app", `{"status":{"unbindStatus":"Perhaps"}}`, "status.unbindStatus"},
		{"servicebindings/app", `{"status":{"reconciledGeneration":-1}}`, "status.reconciledGeneration"},
	} {
		var code int
		raw, _ := c.RESTClient().Patch(types.MergePatchType).AbsPath("/apis/servicecatalog.k8s.io/v1beta1/namespaces/a", tc.path, "status").
			Body([]byte(tc.patch)).Do(ctx).StatusCode(&code).Raw()
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"field":"`+tc.field+`"`) {
			t.Errorf("PATCH %s/status %s: %d %.300s, want 422 naming %s", tc.path, tc.patch, code, raw, tc.field)
		}
	}
	// A write that leaves the values as they are, and one of known values.
	for _, patch := range []string{`{"status":{"lastError":"seen"}}`, `{"status":{"conditions":[{"type":"Ready","status":"Unknown"}],"provisionStatus":"Provisioned"}}`} {
		if _, err := c.ServiceInstances("a").Patch(ctx, "db", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("PATCH status %s: %v", patch, err)
		}
	}
}
