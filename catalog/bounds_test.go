package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// boundsSetup is a store with a broker's catalogue, an instance and a
// binding of it.
func boundsSetup(t *testing.T) (*catalog.Store, *catalog.Instance, *catalog.Binding) {
	t.Helper()
	ctx := context.Background()
	s, _ := newStoreAndPool(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "test"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	bd.Name, bd.Namespace = "db-binding", "test"
	bd, err = s.CreateBinding(ctx, bd)
	if err != nil {
		t.Fatal(err)
	}
	return s, in, bd
}

// checkText fails unless s is stored text within max bytes, cut with the
// mark when it had to be.
func checkText(t *testing.T, what, s string, max int, cut bool) {
	t.Helper()
	if len(s) > max || pgtext.Problem(s) != "" || strings.HasSuffix(s, pgtext.ClipMark) != cut {
		t.Errorf("%s: %d bytes (at most %d), cut %v: %.60q…", what, len(s), max, cut, s)
	}
}

// TestStatusTextBounded: whatever a status writer (the engine with a
// broker's text, a client of the status subresource) puts in messages and
// reasons is stored cut to its bound on a character boundary, marked, and
// without NUL; an operation past OSB's 10,000 characters or a dashboard URL
// past its bound is refused naming the field; the history keeps the
// messages cut, and a repeat that differs only past the cut folds.
func TestStatusTextBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, in, _ := boundsSetup(t)
	huge := func(n int) string { return fmt.Sprintf("attempt %d: ", n) + strings.Repeat("é", 200<<10) + "\x00" }
	for n := range 3 {
		got, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
			in.Status.LastError = huge(n)
			catalog.SetCondition(&in.Status.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionFalse,
				Reason: strings.Repeat("R", 10<<10), Message: huge(n)}, in.CreationTimestamp)
			return nil
		}, catalog.EventRecord{Type: "Warning", Reason: "ProvisionCallFailed", Message: "the same start " + huge(0) + fmt.Sprint(n), Operation: "Provision"})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := catalog.FindCondition(got.Status.Conditions, catalog.ConditionReady)
		checkText(t, "Ready's message", c.Message, catalog.MaxMessage, true)
		checkText(t, "Ready's reason", c.Reason, catalog.MaxReason, true)
		checkText(t, "lastError", got.Status.LastError, catalog.MaxMessage, true)
	}
	stored, err := s.GetInstance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := catalog.FindCondition(stored.Status.Conditions, catalog.ConditionReady)
	checkText(t, "stored Ready's message", c.Message, catalog.MaxMessage, true)
	if !strings.HasPrefix(c.Message, "attempt 2: éé") {
		t.Errorf("the message lost its beginning: %.40q", c.Message)
	}
	events, err := s.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	checkText(t, "history message", last.Message, catalog.MaxMessage, true)
	if last.Count != 3 {
		t.Errorf("3 entries that differ only past the cut: count %d, want one entry of 3", last.Count)
	}

	for _, tc := range []struct {
		field  string
		mutate func(*catalog.InstanceStatus)
	}{
		{"status.lastOperation", func(st *catalog.InstanceStatus) { st.LastOperation = strings.Repeat("ö", osb.MaxOperation+1) }},
		{"status.dashboardURL", func(st *catalog.InstanceStatus) {
			st.DashboardURL = "https://dash.example/" + strings.Repeat("a", osb.MaxDashboardURL)
		}},
		// Text PostgreSQL cannot store, where it is not cut.
		{"status.lastOperation", func(st *catalog.InstanceStatus) { st.LastOperation = "op\x00" }},
		{"status.inProgressProperties.parameters.a", func(st *catalog.InstanceStatus) {
			st.InProgressProperties = &catalog.InstanceProperties{Parameters: []byte(`{"a":"\ud800"}`)}
		}},
	} {
		_, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error { tc.mutate(&in.Status); return nil })
		if v, ok := catalog.AsValidation(err); !ok || !strings.Contains(v.Error(), tc.field) {
			t.Errorf("%s past its bound or unstorable: %v, want a validation error naming it", tc.field, err)
		}
	}
	if _, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
		in.Status.LastOperation = strings.Repeat("ö", osb.MaxOperation)
		return nil
	}); err != nil {
		t.Errorf("an operation of 10,000 characters: %v", err)
	}
}

// TestBindingStatusBounded: credentials past osb.MaxCredentials and
// endpoints past their bounds are refused naming the field; messages are
// cut as an instance's are.
func TestBindingStatusBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, bd := boundsSetup(t)
	_, err := s.UpdateBindingStatus(ctx, bd.ID, func(*catalog.Binding) error { return nil },
		map[string]any{"ca": strings.Repeat("c", osb.MaxCredentials)})
	if v, ok := catalog.AsValidation(err); !ok || !strings.Contains(v.Error(), "credentials") {
		t.Errorf("credentials past the bound: %v", err)
	}
	_, err = s.UpdateBindingStatus(ctx, bd.ID, func(b *catalog.Binding) error {
		b.Status.Endpoints = make([]catalog.Endpoint, osb.MaxEndpoints+1)
		return nil
	}, nil)
	if v, ok := catalog.AsValidation(err); !ok || !strings.Contains(v.Error(), "status.endpoints") {
		t.Errorf("too many endpoints: %v", err)
	}
	got, err := s.UpdateBindingStatus(ctx, bd.ID, func(b *catalog.Binding) error {
		b.Status.LastError = strings.Repeat("x", 1<<20)
		return nil
	}, map[string]any{"password": "fits"}, catalog.EventRecord{Type: "Warning", Reason: strings.Repeat("r", 1<<10), Message: strings.Repeat("m", 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	checkText(t, "a binding's lastError", got.Status.LastError, catalog.MaxMessage, true)
	events, err := s.Events(ctx, bd.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	checkText(t, "a binding's history message", last.Message, catalog.MaxMessage, true)
	checkText(t, "a binding's history reason", last.Reason, catalog.MaxReason, true)
}

// TestCatalogueTextBounded: a class's and a plan's descriptions are cut,
// and a broker's failure message keeps its next attempt whatever the
// broker answered.
func TestCatalogueTextBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	long := strings.Repeat("ü", 10<<10)
	svc := osbtest.DefaultCatalog()
	svc[0].Description = long
	svc[0].Plans[0].Description = long
	svc[0].Plans[0].MaintenanceInfo = &osbtest.MaintenanceInfo{Version: "1.0.0", Description: long}
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(svc))
	b := register(t, s, "wordy", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	classes, err := s.ListClasses(ctx, catalog.ClassFilter{}, catalog.ListOptions{})
	if err != nil || len(classes.Items) != 1 {
		t.Fatal(err)
	}
	checkText(t, "class description", classes.Items[0].Spec.Description, osb.MaxDescription, true)
	plan, err := s.GetPlan(ctx, svc[0].Plans[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	checkText(t, "plan description", plan.Spec.Description, osb.MaxDescription, true)
	checkText(t, "maintenance description", plan.Spec.MaintenanceInfo.Description, osb.MaxDescription, true)

	fake.Fail(osbtest.VerbCatalog, osbtest.Failure{Status: 500, Description: strings.Repeat("e", 60<<10), Times: 1})
	got, err := s.Relist(ctx, b.ID)
	if err == nil {
		t.Fatal("a relist answered 500 succeeded")
	}
	c := ready(got)
	checkText(t, "the broker's Ready message", c.Message, catalog.MaxMessage, false)
	if !strings.Contains(c.Message, "Bindery tries again at") || !strings.Contains(c.Message, pgtext.ClipMark) {
		t.Errorf("the broker's message lost its cut mark or its next attempt: %q", c.Message[len(c.Message)-80:])
	}
}
