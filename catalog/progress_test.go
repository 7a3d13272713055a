package catalog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
)

// TestProgress: each situation the engine reports comes out as the state
// a waiting client acts on, in words, without CamelCase.
func TestProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	ready := func(status, reason, msg string, at time.Time) catalog.Condition {
		return catalog.Condition{Type: catalog.ConditionReady, Status: status, Reason: reason, Message: msg, LastTransitionTime: at}
	}
	for _, tc := range []struct {
		name     string
		in       catalog.Instance
		state    message.State
		contains string
	}{
		{"new", catalog.Instance{}, message.Working, "waits for the engine to provision"},
		{"provisioning", catalog.Instance{Status: catalog.InstanceStatus{CurrentOperation: "Provision",
			Conditions: []catalog.Condition{ready("False", "Provisioning", "The instance is being provisioned asynchronously", ago(time.Second))}}},
			message.Working, "The broker is provisioning it."},
		{"ready", catalog.Instance{Meta: catalog.Meta{Generation: 1}, Status: catalog.InstanceStatus{ReconciledGeneration: 1,
			Conditions: []catalog.Condition{ready("True", "ProvisionedSuccessfully", "The instance was provisioned successfully", ago(time.Second))}}},
			message.Ready, "provisioned and ready"},
		{"ready for an older generation", catalog.Instance{Meta: catalog.Meta{Generation: 2}, Status: catalog.InstanceStatus{ReconciledGeneration: 1,
			Conditions: []catalog.Condition{ready("True", "ProvisionedSuccessfully", "", ago(time.Second))}}},
			message.Working, "apply the change"},
		{"failed", catalog.Instance{Status: catalog.InstanceStatus{Conditions: []catalog.Condition{
			ready("False", "ProvisionCallFailed", "x", ago(time.Second)),
			{Type: "Failed", Status: "True", Reason: "ClusterServiceBrokerReturnedFailure", Message: "quota exceeded"}}}},
			message.Failed, "The broker failed the provision"},
		{"plan missing, just now", catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "tiny"},
			Status: catalog.InstanceStatus{Conditions: []catalog.Condition{ready("False", "ReferencesNonexistentServicePlan", "x", ago(time.Second))}}},
			message.Waiting, `Service class "postgresql" has no plan named "tiny"`},
		{"plan missing past the grace", catalog.Instance{Meta: catalog.Meta{CreationTimestamp: ago(time.Minute)},
			Spec:   catalog.InstanceSpec{ClusterServiceClassExternalName: "postgresq", ClusterServicePlanExternalName: "small"},
			Status: catalog.InstanceStatus{Conditions: []catalog.Condition{ready("False", "ReferencesNonexistentServiceClass", "x", ago(time.Minute))}}},
			message.Blocked, `No service class named "postgresq"`},
		{"blocked by bindings", catalog.Instance{Meta: catalog.Meta{DeletionTimestamp: &now},
			Status: catalog.InstanceStatus{Conditions: []catalog.Condition{ready("False", "DeprovisionBlockedByExistingCredentials", "x", now)}}},
			message.Blocked, "still has bindings"},
		{"deprovisioning", catalog.Instance{Meta: catalog.Meta{DeletionTimestamp: &now},
			Status: catalog.InstanceStatus{CurrentOperation: "Deprovision", Conditions: []catalog.Condition{ready("False", "DeprovisionRequestInFlight", "x", now)}}},
			message.Working, "deprovision it"},
		{"broker unreachable", catalog.Instance{Status: catalog.InstanceStatus{Conditions: []catalog.Condition{ready("False", "ErrorCallingProvision", "dial tcp", now)}}},
			message.Retrying, "tries again"},
		{"a reason the catalogue does not know", catalog.Instance{Status: catalog.InstanceStatus{Conditions: []catalog.Condition{ready("False", "CircuitBreakerOpen", "", now)}}},
			message.Working, "Circuit breaker open."},
	} {
		p := catalog.InstanceProgress(&tc.in, now, 10*time.Second)
		if p.State != tc.state || !strings.Contains(p.Message, tc.contains) {
			t.Errorf("%s: %s %q, want %s saying %q", tc.name, p.State, p.Message, tc.state, tc.contains)
		}
	}
	b := catalog.Binding{Meta: catalog.Meta{Namespace: "team", CreationTimestamp: ago(time.Minute)}, Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "nope"}},
		Status: catalog.BindingStatus{Conditions: []catalog.Condition{ready("False", "ReferencesNonexistentInstance", "x", ago(time.Minute))}}}
	slow := catalog.Binding{Meta: catalog.Meta{CreationTimestamp: ago(time.Hour)},
		Status: catalog.BindingStatus{Conditions: []catalog.Condition{ready("False", "ErrorInstanceNotReady", "x", ago(time.Hour))}}}
	if p := catalog.BindingProgress(&slow, now, 10*time.Second); p.State != message.Working {
		t.Errorf("a binding of an instance still provisioning after an hour: %+v", p)
	}
	if p := catalog.BindingProgress(&b, now, 10*time.Second); p.State != message.Blocked || !strings.Contains(p.Message, `No instance named "nope" exists in namespace "team"`) {
		t.Errorf("binding of a missing instance: %+v", p)
	}
}
