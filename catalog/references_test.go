package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// soloCatalog is a catalogue of one service with one plan, whose instance
// parameters must be {"size": integer}, and DefaultCatalog's service.
func soloCatalog() []osbtest.Service {
	solo := osbtest.Service{ID: "solo-service-id", Name: "solo", Description: "One plan.", Bindable: true,
		Plans: []osbtest.Plan{{ID: "solo-only-id", Name: "only", Description: "The only plan.",
			Schemas: &osbtest.Schemas{ServiceInstance: &osbtest.ServiceInstanceSchema{Create: &osbtest.InputParameters{Parameters: map[string]any{
				"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}, "additionalProperties": false,
			}}}}}}}
	return append(osbtest.DefaultCatalog(), solo)
}

func newInstance(name string, spec catalog.InstanceSpec) *catalog.Instance {
	in := &catalog.Instance{Spec: spec}
	in.Name, in.Namespace = name, "team"
	return in
}

// TestInstanceWaitsForItsPlan: an instance naming a class or plan that no
// broker offers yet is recorded, unresolved; ResolveInstance says what is
// missing in Service Catalog's terms until a broker offers it, then fills
// in the references without a new generation. Each way of naming the
// class and plan, and a class of one plan with no plan named, alike.
func TestInstanceWaitsForItsPlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		spec   catalog.InstanceSpec
		reason string
		// message Service Catalog wrote for the missing reference.
		message string
		// plan is the plan the resolved spec names.
		plan func(*catalog.InstanceSpec) string
	}{
		{"class by external name", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo", ClusterServicePlanExternalName: "only"},
			catalog.ReasonNonexistentServiceClass,
			`The instance references a ClusterServiceClass that does not exist. References a non-existent ClusterServiceClass {ClusterServiceClassExternalName:"solo"} or there is more than one (found: 0)`,
			func(s *catalog.InstanceSpec) string { return s.ClusterServicePlanExternalName }},
		{"class by external id", catalog.InstanceSpec{ClusterServiceClassExternalID: "solo-service-id", ClusterServicePlanExternalID: "solo-only-id"},
			catalog.ReasonNonexistentServiceClass,
			`The instance references a ClusterServiceClass that does not exist. References a non-existent ClusterServiceClass {ClusterServiceClassExternalID:"solo-service-id"} or there is more than one (found: 0)`,
			func(s *catalog.InstanceSpec) string { return s.ClusterServicePlanExternalID }},
		{"class by name", catalog.InstanceSpec{ClusterServiceClassName: "solo-service-id", ClusterServicePlanName: "solo-only-id"},
			catalog.ReasonNonexistentServiceClass,
			`The instance references a ClusterServiceClass that does not exist. References a non-existent ClusterServiceClass {ClusterServiceClassName:"solo-service-id"}`,
			func(s *catalog.InstanceSpec) string { return s.ClusterServicePlanName }},
		{"no plan named", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"},
			catalog.ReasonNonexistentServiceClass,
			`The instance references a ClusterServiceClass that does not exist. References a non-existent ClusterServiceClass {ClusterServiceClassExternalName:"solo"} or there is more than one (found: 0)`,
			func(s *catalog.InstanceSpec) string { return s.ClusterServicePlanExternalName }},
		{"no plan named, by name", catalog.InstanceSpec{ClusterServiceClassName: "solo-service-id"},
			catalog.ReasonNonexistentServiceClass,
			`The instance references a ClusterServiceClass that does not exist. References a non-existent ClusterServiceClass {ClusterServiceClassName:"solo-service-id"}`,
			func(s *catalog.InstanceSpec) string { return s.ClusterServicePlanName }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newStore(t)
			in, err := s.CreateInstance(ctx, newInstance("db", tc.spec))
			if err != nil {
				t.Fatalf("an instance of a class not offered yet: %v", err)
			}
			if in.Spec.ClusterServiceClassRef != nil || in.Spec.ClusterServicePlanRef != nil {
				t.Errorf("references of what is not offered: %+v %+v", in.Spec.ClusterServiceClassRef, in.Spec.ClusterServicePlanRef)
			}
			_, err = s.ResolveInstance(ctx, in.ID)
			r, ok := catalog.AsReference(err)
			if !ok || r.Reason != tc.reason || r.Message != tc.message {
				t.Fatalf("resolve: %v, want %s %q", err, tc.reason, tc.message)
			}
			if ids, _ := s.UnresolvedInstances(ctx); len(ids) != 1 || ids[0] != (catalog.Key{Namespace: in.Namespace, ID: in.ID}) {
				t.Errorf("unresolved instances: %v", ids)
			}

			fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(soloCatalog()))
			if _, err := s.Relist(ctx, register(t, s, "fake", fake.URL(), "").ID); err != nil {
				t.Fatal(err)
			}
			got, err := s.ResolveInstance(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.ClusterServiceClassRef == nil || got.Spec.ClusterServiceClassRef.Name != "solo-service-id" ||
				got.Spec.ClusterServicePlanRef == nil || got.Spec.ClusterServicePlanRef.Name != "solo-only-id" {
				t.Errorf("references: %+v %+v", got.Spec.ClusterServiceClassRef, got.Spec.ClusterServicePlanRef)
			}
			if want := map[bool]string{true: "solo-only-id", false: "only"}[tc.spec.ClusterServiceClassExternalName == ""]; tc.plan(&got.Spec) != want {
				t.Errorf("the spec names plan %q, want %q", tc.plan(&got.Spec), want)
			}
			stored, err := s.GetInstance(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Generation != 1 || stored.ResourceVersion == in.ResourceVersion || stored.Spec.ClusterServicePlanRef == nil {
				t.Errorf("stored: generation %d, resourceVersion %d (was %d), plan %+v", stored.Generation, stored.ResourceVersion, in.ResourceVersion, stored.Spec.ClusterServicePlanRef)
			}
			if ids, _ := s.UnresolvedInstances(ctx); len(ids) != 0 {
				t.Errorf("unresolved instances after the relist: %v", ids)
			}
			if !hasEvent(t, s, in.ID, "ReferencesResolved") {
				t.Error("the history does not say the references were resolved")
			}
		})
	}
}

func hasEvent(t *testing.T, s *catalog.Store, id, reason string) bool {
	t.Helper()
	events, err := s.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// TestReferencesRefusedOrWaiting: what the catalog knows about is checked
// when an instance is recorded — a removed plan, a class of several plans
// with none named, parameters against the plan's schema — and what it
// does not know yet is accepted to wait; how the class and plan are named
// is checked either way.
func TestReferencesRefusedOrWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(soloCatalog()))
	broker := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, broker.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		spec   catalog.InstanceSpec
		field  string // "" when accepted
		reason string // what ResolveInstance says of an accepted one; "" when resolved
	}{
		{"offered", catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}, "", ""},
		{"only plan chosen", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"}, "", ""},
		{"plan not offered yet", catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: "huge"}, "", catalog.ReasonNonexistentServicePlan},
		{"class not offered yet", catalog.InstanceSpec{ClusterServiceClassExternalName: "mysql", ClusterServicePlanExternalName: "small"}, "", catalog.ReasonNonexistentServiceClass},
		{"several plans and none named", catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService}, "spec.clusterServicePlanExternalName", ""},
		{"two ways", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo", ClusterServicePlanExternalID: "solo-only-id"}, "spec", ""},
		{"no class", catalog.InstanceSpec{ClusterServicePlanExternalName: "only"}, "spec.clusterServiceClassExternalName", ""},
		{"bad parameters", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo", Parameters: json.RawMessage(`{"size":"big"}`)}, "spec.parameters.size", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := s.CreateInstance(ctx, newInstance(strings.ReplaceAll(tc.name, " ", "-"), tc.spec))
			if tc.field != "" {
				v, ok := catalog.AsValidation(err)
				if !ok || len(v.Errors) != 1 || v.Errors[0].Field != tc.field {
					t.Fatalf("create: %v, want a field error on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.ResolveInstance(ctx, in.ID)
			if r, _ := catalog.AsReference(err); (tc.reason == "" && err != nil) || (tc.reason != "" && (r == nil || r.Reason != tc.reason)) {
				t.Errorf("resolve: %v, want %q", err, tc.reason)
			}
		})
	}
	got, err := s.GetInstanceByName(ctx, "team", "only-plan-chosen")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClusterServicePlanExternalName != "only" || got.Spec.ClusterServicePlanRef == nil {
		t.Errorf("the class's only plan was not chosen: %+v", got.Spec)
	}
	// Parameters are checked against the schema of a plan that appears
	// later, when the instance is resolved: the references are recorded,
	// the parameters are refused.
	late := newInstance("late", catalog.InstanceSpec{ClusterServiceClassExternalName: "later", Parameters: json.RawMessage(`{"size":"big"}`)})
	if late, err = s.CreateInstance(ctx, late); err != nil {
		t.Fatal(err)
	}
	services := soloCatalog()
	services[1].Name, services[1].ID, services[1].Plans[0].ID = "later", "later-id", "later-only-id"
	fake.SetCatalog(services)
	if _, err := s.Relist(ctx, broker.ID); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.ResolveInstance(ctx, late.ID)
	if v, ok := catalog.AsValidation(err); !ok || v.Errors[0].Field != "spec.parameters.size" {
		t.Errorf("resolving an instance whose parameters the plan refuses: %v", err)
	}
	if resolved == nil || resolved.Spec.ClusterServicePlanRef == nil {
		t.Errorf("the references were not recorded with the refused parameters: %+v", resolved)
	}
}

// TestUpdateWhileWaiting: the spec of an instance waiting for its plan may
// change (a new generation) and is resolved when it names what is offered;
// a provisioned instance moves only to an offered plan.
func TestUpdateWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(soloCatalog()))
	if _, err := s.Relist(ctx, register(t, s, "fake", fake.URL(), "").ID); err != nil {
		t.Fatal(err)
	}
	in, err := s.CreateInstance(ctx, newInstance("db", catalog.InstanceSpec{ClusterServiceClassExternalName: "sol", ClusterServicePlanExternalName: "only"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Labels = map[string]string{"tier": "gold"}
		return nil
	})
	if err != nil || got.Generation != 1 || got.Spec.ClusterServicePlanRef != nil {
		t.Fatalf("label change of a waiting instance: %v, generation %d", err, got.Generation)
	}
	got, err = s.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.ClusterServiceClassExternalName = "solo"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.Spec.ClusterServicePlanRef == nil || got.Spec.ClusterServicePlanRef.Name != "solo-only-id" {
		t.Errorf("after naming an offered class: generation %d, plan %+v", got.Generation, got.Spec.ClusterServicePlanRef)
	}
	_, err = s.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.ClusterServicePlanExternalName = "bigger"
		return nil
	})
	if v, ok := catalog.AsValidation(err); !ok || v.Errors[0].Field != "spec.clusterServicePlanExternalName" {
		t.Errorf("moving a resolved instance to a plan not offered: %v", err)
	}
}

// TestBindingWaitsForItsInstance: a binding naming an instance that does
// not exist is recorded, unlinked; LinkBinding says so in Service
// Catalog's terms; creating the instance links it; the instance's removal
// unlinks it again.
func TestBindingWaitsForItsInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	b.Name, b.Namespace = "app", "team"
	b, err := s.CreateBinding(ctx, b)
	if err != nil {
		t.Fatalf("a binding of an instance not created yet: %v", err)
	}
	if _, err := s.InstanceOf(ctx, b); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("instance of an unlinked binding: %v", err)
	}
	_, err = s.LinkBinding(ctx, b.ID)
	if r, ok := catalog.AsReference(err); !ok || r.Reason != catalog.ReasonNonexistentInstance || r.Message != `References a non-existent ServiceInstance "team/db"` {
		t.Fatalf("link: %v", err)
	}
	if ids, _ := s.BindingsToWake(ctx, nil, []string{"team"}, []string{"db"}); len(ids) != 1 || ids[0] != (catalog.Key{Namespace: "team", ID: b.ID}) {
		t.Errorf("bindings awaiting team/db: %v", ids)
	}
	// Invalid names are still refused.
	bad := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "Not A Name"}}}
	bad.Name, bad.Namespace = "bad", "team"
	if _, err := s.CreateBinding(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.instanceRef.name") {
		t.Errorf("a binding naming no valid instance name: %v", err)
	}

	in, err := s.CreateInstance(ctx, newInstance("db", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.InstanceOf(ctx, b); err != nil || got.ID != in.ID {
		t.Fatalf("the instance's creation did not link the binding: %v", err)
	}
	if got, err := s.LinkBinding(ctx, b.ID); err != nil || got.ID != in.ID {
		t.Errorf("link a linked binding: %v", err)
	}
	if ids, _ := s.BindingsToWake(ctx, nil, []string{"team"}, []string{"db"}); len(ids) != 0 {
		t.Errorf("bindings still awaiting team/db: %v", ids)
	}
	if bs, _ := s.BindingsOf(ctx, in.ID); len(bs) != 1 {
		t.Errorf("bindings of the instance: %d", len(bs))
	}
	// The instance waits for its class and so does the binding's check.
	if err := s.CheckBindable(ctx, b, in, nil, nil); err != nil {
		t.Errorf("check a binding of an unresolved instance: %v", err)
	}

	if _, err := s.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.FinalizeInstance(ctx, in.ID, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was provisioned."}); err != nil {
		t.Fatalf("remove an instance with a binding that waited for it: %v", err)
	}
	if ids, _ := s.BindingsToWake(ctx, nil, []string{"team"}, []string{"db"}); len(ids) != 1 {
		t.Errorf("the binding of a removed instance does not wait for a new one: %v", ids)
	}
}
