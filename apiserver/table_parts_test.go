package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestTablePartsAsWholeObjects checks the lists read with only part of
// each object's spec and status (a Table without the objects, a list of
// metadata: catalog.Parts) against the same lists built from whole
// objects by k8s.io/apiserver's own list handler (a pretty page, which the
// server leaves to it), byte for byte once compacted: instances and
// bindings in each state the Table tells apart (ready, failed, pending
// with a reason, deleting, released and kept by another finalizer,
// abandoned; the class and plan named each way), brokers, classes and
// plans of both scopes; unpaged (read in chunks), in one page and in
// small pages, with label and field selectors.
func TestTablePartsAsWholeObjects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	fake := osbtest.New(t, osbtest.WithCatalog(osbtest.GenerateCatalog(2, 2)))
	b.mustKubectl([]byte(strings.NewReplacer("NAMESPACE", "team-1", "URL", fake.URL()).Replace(serviceBrokerYAML)), "apply", "-f", "-")
	b.mustKubectl(nil, "wait", "--for=condition=Ready", "servicebroker/team-broker", "-n", "team-1", "--timeout=30s")
	createPartsObjects(t, b.store)
	// Ages that read the same however long the test takes.
	for _, table := range []string{"instances", "bindings", "brokers", "service_classes", "service_plans"} {
		if _, err := apiserver.PoolOf(b.store).Exec(ctx, `UPDATE catalog.`+table+` SET created_at = created_at - interval '400 days'`); err != nil {
			t.Fatal(err)
		}
	}

	g := newHTTPGet(t, b)
	for _, resource := range []string{"serviceinstances", "servicebindings", "clusterservicebrokers", "clusterserviceclasses",
		"clusterserviceplans", "servicebrokers", "serviceclasses", "serviceplans"} {
		for _, accept := range []string{acceptTable, acceptTableV1b, acceptPartial} {
			queries := []string{"", "includeObject=None", "labelSelector=set%3Dparts", "fieldSelector=metadata.name%21%3Dparts-new"}
			if !strings.HasSuffix(resource, "brokers") {
				queries = append(queries, "fieldSelector=spec.externalID%21%3Dx")
			}
			for _, query := range queries {
				base := "/apis/servicecatalog.k8s.io/v1beta1/" + resource + "?" + query
				want := compactGet(t, g, base+"&limit=500&pretty=true", accept)
				for _, path := range []string{base, base + "&limit=0", base + "&limit=500"} {
					if got := compactGet(t, g, path, accept); got != want {
						t.Errorf("%s (%s):\n got %s\nwant %s", path, accept, got, want)
					}
				}
				// Small pages, each against the same page of whole objects.
				for cont, n := "", 0; n < 20; n++ {
					page := base + "&limit=3&continue=" + cont
					want := compactGet(t, g, page+"&pretty=true", accept)
					if got := compactGet(t, g, page, accept); got != want {
						t.Errorf("%s (%s):\n got %s\nwant %s", page, accept, got, want)
					}
					var l struct{ Metadata struct{ Continue string } }
					if err := json.Unmarshal([]byte(want), &l); err != nil {
						t.Fatal(err)
					}
					if cont = l.Metadata.Continue; cont == "" {
						break
					}
				}
			}
		}
	}
}

// compactGet reads a list and returns it compacted.
func compactGet(t *testing.T, g httpGet, path, accept string) string {
	t.Helper()
	code, _, body := g.get(path, accept, true)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// An empty list's array is null from k8s.io/apiserver, [] from the
	// server's own encoders (both decode alike).
	return emptyArray.Replace(out.String())
}

var emptyArray = strings.NewReplacer(`"rows":null}`, `"rows":[]}`, `"items":null}`, `"items":[]}`)

// partsState is a state of an instance and its binding.
type partsState struct {
	name       string
	conditions []catalog.Condition
	deleting   bool
	released   bool
	abandoned  bool
}

// createPartsObjects creates instances and bindings in the states a Table
// tells apart, with the class and plan named each way in each state.
func createPartsObjects(t *testing.T, store *catalog.Store) {
	t.Helper()
	specs := []catalog.InstanceSpec{
		{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync", Parameters: json.RawMessage(`{"size":"large","tags":["a","b"]}`)},
		{ClusterServiceClassExternalID: "class-id", ClusterServicePlanExternalID: "plan-id"},
		{ClusterServiceClassName: "class-k8s-name", ClusterServicePlanName: "plan-k8s-name"},
		{ServiceClassExternalName: "ns-class", ServicePlanExternalName: "ns-plan"},
		{ServiceClassExternalID: "ns-class-id", ServicePlanExternalID: "ns-plan-id"},
		{ServiceClassName: "ns-class-name", ServicePlanName: "ns-plan-name"},
	}
	now := time.Now().UTC().Truncate(time.Second)
	cond := func(typ, status, reason string) catalog.Condition {
		return catalog.Condition{Type: typ, Status: status, Reason: reason, Message: "a <message> & more", LastTransitionTime: now}
	}
	states := []partsState{
		{name: "new"},
		{name: "ready", conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionTrue, "ProvisionedSuccessfully")}},
		{name: "waiting", conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionFalse, "Provisioning")}},
		{name: "failed", conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionFalse, "ProvisionCallFailed"), cond(catalog.ConditionFailed, catalog.ConditionTrue, "ProvisionCallFailed")}},
		{name: "deleting", conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionTrue, "ProvisionedSuccessfully")}, deleting: true},
		{name: "released", deleting: true, released: true, conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionFalse, catalog.ReasonWaitingForFinalizers)}},
		{name: "abandoned", abandoned: true, conditions: []catalog.Condition{cond(catalog.ConditionReady, catalog.ConditionFalse, catalog.ReasonAbandoned)}},
	}
	for i, st := range states {
		for j, spec := range specs {
			createInState(t, store, fmt.Sprintf("parts-%s-%d", st.name, j), fmt.Sprintf("team-%d", (i+j)%2), spec, st, j%2 == 0)
		}
	}
}

// createInState creates an instance and its binding (with a Secret's name
// when secret is true) in state st.
func createInState(t *testing.T, store *catalog.Store, name, namespace string, spec catalog.InstanceSpec, st partsState, secret bool) {
	t.Helper()
	ctx := context.Background()
	in := &catalog.Instance{Spec: spec}
	in.Name, in.Namespace = name, namespace
	in.Labels = map[string]string{"set": "parts"}
	in.Annotations = map[string]string{"note": "a<b & c", "state": st.name}
	if st.released || st.abandoned {
		in.Finalizers = []string{"example.com/keep"}
	}
	if st.abandoned {
		in.Annotations[catalog.AbandonAnnotation] = "true"
	}
	in, err := store.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: in.Name}, Parameters: json.RawMessage(`{"role":"reader"}`)}}
	if secret {
		bd.Spec.SecretName = "secret-" + name
	}
	bd.Name, bd.Namespace, bd.Labels, bd.Annotations, bd.Finalizers = in.Name, in.Namespace, in.Labels, in.Annotations, in.Finalizers
	if bd, err = store.CreateBinding(ctx, bd); err != nil {
		t.Fatal(err)
	}
	if st.deleting {
		if _, err := store.DeleteBinding(ctx, bd.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := store.DeleteInstance(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.UpdateBindingStatus(ctx, bd.ID, func(b *catalog.Binding) error {
		b.Status.Conditions, b.Status.LastOperation = st.conditions, "op-1"
		if st.released {
			b.Status.UnbindStatus = catalog.UnbindSucceeded
		}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
		in.Status.Conditions, in.Status.DashboardURL, in.Status.LastOperation = st.conditions, "https://dash.example/"+st.name, "op-1"
		if st.released {
			in.Status.DeprovisionStatus = catalog.DeprovisionSucceeded
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
