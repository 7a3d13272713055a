package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// svcatStatus is what svcat v0.3.1 shows as an object's status
// (cmd/svcat/output): its last condition, by type when True, else by
// reason.
func svcatStatus(conds []catalog.Condition) string {
	if len(conds) == 0 {
		return ""
	}
	last := conds[len(conds)-1]
	if last.Status == catalog.ConditionTrue {
		return last.Type
	}
	return last.Reason
}

// statusHistory is every status the object had, oldest first, as the
// change feed recorded them.
func statusHistory(t *testing.T, e *env, kind, id string) [][]catalog.Condition {
	t.Helper()
	changes, err := e.store.Feed().Since(context.Background(), 0, []string{kind}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]catalog.Condition
	for _, ch := range changes {
		if ch.Object.ID != id {
			continue
		}
		var st struct {
			Conditions []catalog.Condition `json:"conditions"`
		}
		if err := json.Unmarshal(ch.Object.Status, &st); err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Conditions)
	}
	return out
}

// svcatView is the sequence of statuses svcat showed for the object, each
// once.
func svcatView(t *testing.T, e *env, kind, id string) []string {
	t.Helper()
	var view []string
	for _, conds := range statusHistory(t, e, kind, id) {
		if s := svcatStatus(conds); len(view) == 0 || view[len(view)-1] != s {
			view = append(view, s)
		}
		// Ready is first, once there: the object is recorded without
		// conditions, as Service Catalog recorded it.
		if len(conds) > 0 && conds[0].Type != catalog.ConditionReady {
			t.Errorf("conditions without Ready first: %+v", conds)
		}
		if kind == catalog.KindBinding && slices.ContainsFunc(conds, func(c catalog.Condition) bool { return c.Type == catalog.ConditionOrphanMitigation }) {
			t.Errorf("a binding has a condition Service Catalog's API has no type for: %+v", conds)
		}
	}
	return view
}

func condTypes(conds []catalog.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type+"="+c.Status+"/"+c.Reason)
	}
	return strings.Join(out, " ")
}

// TestConditionSequences checks, for each path an instance or binding
// takes, what svcat showed all along against what Service Catalog
// v0.3.1's controller wrote on the same path
// (pkg/controller/controller_instance.go, controller_binding.go), and the
// conditions left at the end. An object is recorded without conditions
// ("" in svcat). Bindery retries what Service Catalog gave up on (a bind
// the broker answered 503), so that path ends Ready where Service
// Catalog's ended Failed.
func TestConditionSequences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		plan string
		// fail and failBind make the broker fail before the instance,
		// and before the binding, is created.
		fail, failBind func(*osbtest.Broker)
		// instance and binding: svcat's view of each, after "";
		// final: the conditions left, as type=status/reason.
		instance, binding []string
		final             string
	}{
		{name: "provision and bind", plan: osbtest.PlanSync,
			instance: []string{"ProvisionRequestInFlight", "Ready"},
			binding:  []string{"BindingRequestInFlight", "Ready"},
			final:    "Ready=True/ProvisionedSuccessfully"},
		{name: "asynchronous provision and bind", plan: osbtest.PlanAsync,
			instance: []string{"ProvisionRequestInFlight", "Provisioning", "Ready"},
			binding:  []string{"BindingRequestInFlight", "Binding", "Ready"},
			final:    "Ready=True/ProvisionedSuccessfully"},
		{name: "provision refused", plan: osbtest.PlanSync,
			fail: func(b *osbtest.Broker) {
				b.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 400, Description: "no room", Times: 1})
			},
			instance: []string{"ProvisionRequestInFlight", "Failed"},
			final:    "Ready=False/ProvisionCallFailed Failed=True/ClusterServiceBrokerReturnedFailure"},
		{name: "provision orphan-mitigated then retried", plan: osbtest.PlanSync,
			fail:     func(b *osbtest.Broker) { b.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 500, Times: 1}) },
			instance: []string{"ProvisionRequestInFlight", "OrphanMitigation", "OrphanMitigationSuccessful", "ProvisionRequestInFlight", "Ready"},
			binding:  []string{"BindingRequestInFlight", "Ready"},
			final:    "Ready=True/ProvisionedSuccessfully"},
		{name: "asynchronous provision failed", plan: osbtest.PlanAsync,
			fail: func(b *osbtest.Broker) {
				b.Fail(osbtest.VerbProvision, osbtest.Failure{AsyncFailed: true, Times: 1})
			},
			instance: []string{"ProvisionRequestInFlight", "Provisioning", "OrphanMitigation", "OrphanMitigationSuccessful", "ProvisionRequestInFlight", "Provisioning", "Ready"},
			binding:  []string{"BindingRequestInFlight", "Binding", "Ready"},
			final:    "Ready=True/ProvisionedSuccessfully"},
		{name: "bind refused", plan: osbtest.PlanSync,
			failBind: func(b *osbtest.Broker) { b.Fail(osbtest.VerbBind, osbtest.Failure{Status: 400, Times: 1}) },
			instance: []string{"ProvisionRequestInFlight", "Ready"},
			binding:  []string{"BindingRequestInFlight", "Failed"},
			final:    "Ready=True/ProvisionedSuccessfully"},
		{name: "bind orphan-mitigated then retried", plan: osbtest.PlanSync,
			failBind: func(b *osbtest.Broker) { b.Fail(osbtest.VerbBind, osbtest.Failure{Status: 503, Times: 1}) },
			instance: []string{"ProvisionRequestInFlight", "Ready"},
			binding:  []string{"BindingRequestInFlight", "ServiceBindingNeedsOrphanMitigation", "OrphanMitigationSuccessful", "BindingRequestInFlight", "Ready"},
			final:    "Ready=True/ProvisionedSuccessfully"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			fake := e.registerFake(osbtest.WithRetryAfter(0), osbtest.WithPolls(1))
			if tc.fail != nil {
				tc.fail(fake)
			}
			in := e.createInstance("db", osbtest.DefaultService, tc.plan, nil)
			want := tc.instance[len(tc.instance)-1]
			got := e.waitInstance(in.ID, want, func(in *catalog.Instance) bool { return svcatStatus(in.Status.Conditions) == want })
			if condTypes(got.Status.Conditions) != tc.final {
				t.Errorf("instance's conditions at the end: %s, want %s", condTypes(got.Status.Conditions), tc.final)
			}
			if view := svcatView(t, e, catalog.KindInstance, in.ID); !slices.Equal(view, append([]string{""}, tc.instance...)) {
				t.Errorf("svcat showed the instance as %q, want \"\" then %q", view, tc.instance)
			}
			if len(tc.binding) == 0 {
				return
			}
			if tc.failBind != nil {
				tc.failBind(fake)
			}
			b := e.createBinding("app", "db")
			want = tc.binding[len(tc.binding)-1]
			gotB := e.waitBinding(b.ID, want, func(b *catalog.Binding) bool { return svcatStatus(b.Status.Conditions) == want })
			if view := svcatView(t, e, catalog.KindBinding, b.ID); !slices.Equal(view, append([]string{""}, tc.binding...)) {
				t.Errorf("svcat showed the binding as %q, want \"\" then %q", view, tc.binding)
			}
			wantFinal := "Ready=True/InjectedBindResult"
			if want == "Failed" {
				wantFinal = "Ready=False/BindCallFailed Failed=True/ServiceBindingReturnedFailure"
			}
			if condTypes(gotB.Status.Conditions) != wantFinal {
				t.Errorf("binding's conditions at the end: %s, want %s", condTypes(gotB.Status.Conditions), wantFinal)
			}
			if c := condition(gotB.Status.Conditions, catalog.ConditionReady); want == "Ready" && c.Message != "Injected bind result" {
				t.Errorf("Ready message %q, want Service Catalog's", c.Message)
			}
		})
	}
}

// TestConditionsOfUpdates: an update goes through
// UpdateInstanceRequestInFlight to InstanceUpdatedSuccessfully; one the
// broker refuses adds Failed; the next generation removes it, as Service
// Catalog's controller did, so svcat reads Ready again.
func TestConditionsOfUpdates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithRetryAfter(0), osbtest.WithPolls(0))
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 1})
	e.waitInstance(in.ID, "Ready", instanceReady)
	update := func(size int) {
		t.Helper()
		if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
			in.Spec.Parameters = json.RawMessage(fmt.Sprintf(`{"size":%d}`, size))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	reconciled := func(in *catalog.Instance) bool {
		return in.Status.ObservedGeneration == in.Generation && (instanceReady(in) || failedFor(in))
	}
	update(2)
	got := e.waitInstance(in.ID, "updated", reconciled)
	if c := condition(got.Status.Conditions, catalog.ConditionReady); c.Reason != "InstanceUpdatedSuccessfully" || c.Message != "The instance was updated successfully" {
		t.Errorf("Ready after an update: %+v", c)
	}
	fake.Fail(osbtest.VerbUpdate, osbtest.Failure{Status: 400, Description: "size too large", Times: 1})
	update(9)
	got = e.waitInstance(in.ID, "Failed", reconciled)
	if condTypes(got.Status.Conditions) != "Ready=False/UpdateInstanceCallFailed Failed=True/UpdateInstanceCallFailed" || svcatStatus(got.Status.Conditions) != "Failed" {
		t.Errorf("after a refused update: %s", condTypes(got.Status.Conditions))
	}
	update(3)
	got = e.waitInstance(in.ID, "updated again", reconciled)
	if condTypes(got.Status.Conditions) != "Ready=True/InstanceUpdatedSuccessfully" {
		t.Errorf("after the next generation's update: %s", condTypes(got.Status.Conditions))
	}
	want := []string{"", "ProvisionRequestInFlight", "Ready", "UpdateInstanceRequestInFlight", "Ready", "UpdateInstanceRequestInFlight", "Failed", "UpdateInstanceRequestInFlight", "Ready"}
	if view := svcatView(t, e, catalog.KindInstance, in.ID); !slices.Equal(view, want) {
		t.Errorf("svcat showed %q, want %q", view, want)
	}

	// Deleting while a binding exists: Service Catalog's reason, then the
	// deprovision in flight.
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 500, Times: 1})
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	got = e.waitInstance(in.ID, "blocked", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == "DeprovisionBlockedByExistingCredentials"
	})
	if c := condition(got.Status.Conditions, catalog.ConditionReady); c.Message != "All associated ServiceBindings must be removed before this ServiceInstance can be deleted" {
		t.Errorf("blocked deletion: %+v", c)
	}
	if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	// The deprovision the broker failed once: Ready Unknown, as the
	// instance may still exist; then sent again.
	view := svcatView(t, e, catalog.KindInstance, in.ID)
	want = []string{"DeprovisionBlockedByExistingCredentials", "DeprovisionRequestInFlight", "DeprovisionCallFailed"}
	if i := slices.Index(view, want[0]); i < 0 || !slices.Equal(view[i:], want) {
		t.Errorf("svcat showed %q while deleting, want %q at the end", view, want)
	}
	for _, conds := range statusHistory(t, e, catalog.KindInstance, in.ID) {
		if c := condition(conds, catalog.ConditionReady); c.Reason == "DeprovisionCallFailed" &&
			(c.Status != catalog.ConditionUnknown || !strings.HasPrefix(c.Message, "Deprovision call failed; received error response from broker: ")) {
			t.Errorf("failed deprovision: %+v", c)
		}
	}
}
