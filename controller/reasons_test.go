package controller

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// TestFailureWording: the Ready reasons and messages of failed broker
// calls are Service Catalog v0.3.1's, built from Bindery's errors: the
// broker's answer, a timeout, a broker that cannot be reached.
func TestFailureWording(t *testing.T) {
	t.Parallel()
	in := &catalog.Instance{Meta: catalog.Meta{Name: "db", Namespace: "team"}}
	class := &catalog.ServiceClass{Meta: catalog.Meta{Name: "c-1"}, Spec: catalog.ServiceClassSpec{ExternalName: "postgresql"}}
	plan := &catalog.ServicePlan{Meta: catalog.Meta{Name: "p-1"}, Spec: catalog.ServicePlanSpec{ExternalName: "small", ClusterServiceBrokerName: "acme"}}
	env := &instanceEnv{in: in, class: class, plan: plan}
	// The same plan of a namespace's broker: its wording is the
	// namespaced kinds'.
	nsClass := &catalog.ServiceClass{Meta: catalog.Meta{Name: "c-1", Namespace: "team"}, Spec: catalog.ServiceClassSpec{ExternalName: "postgresql"}}
	nsPlan := &catalog.ServicePlan{Meta: catalog.Meta{Name: "p-1", Namespace: "team"}, Spec: catalog.ServicePlanSpec{ExternalName: "small", ServiceBrokerName: "acme"}}
	nsEnv := &instanceEnv{in: in, class: nsClass, plan: nsPlan}
	refused := &osb.HTTPError{Status: 400, Description: "no room"}
	timeout := &url.Error{Op: "Put", URL: "http://acme", Err: context.DeadlineExceeded}
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		name, reason, msg string
		got               func() (string, string)
	}{
		{"provision refused", "ProvisionCallFailed",
			`Error provisioning ServiceInstance of ClusterServiceClass (K8S: "c-1" ExternalName: "postgresql") at ClusterServiceBroker "acme": broker answered 400: no room`,
			func() (string, string) { return provisionFailure(env, refused) }},
		{"provision timed out", "ErrorCallingProvision",
			`Communication with the ClusterServiceBroker timed out; operation will be retried: ` + timeout.Error(),
			func() (string, string) { return provisionFailure(env, timeout) }},
		{"provision unreachable", "ErrorCallingProvision",
			`The provision call failed and will be retried: Error communicating with broker for provisioning: ` + down.Error(),
			func() (string, string) { return provisionFailure(env, down) }},
		{"namespaced provision refused", "ProvisionCallFailed",
			`Error provisioning ServiceInstance of ServiceClass (K8S: "c-1" ExternalName: "postgresql") at ServiceBroker "acme": broker answered 400: no room`,
			func() (string, string) { return provisionFailure(nsEnv, refused) }},
		{"namespaced provision timed out", "ErrorCallingProvision",
			`Communication with the ServiceBroker timed out; operation will be retried: ` + timeout.Error(),
			func() (string, string) { return provisionFailure(nsEnv, timeout) }},
		{"namespaced broker's failure", "ServiceBrokerReturnedFailure", "",
			func() (string, string) { return brokerFailureReason(nsEnv), "" }},
		{"cluster broker's failure", "ClusterServiceBrokerReturnedFailure", "",
			func() (string, string) { return brokerFailureReason(env), "" }},
		{"namespaced unbind unreachable", "",
			`Error unbinding from ServiceInstance "team/db" of ServiceClass (K8S: "c-1" ExternalName: "postgresql") at ServiceBroker "acme": ` + down.Error(),
			func() (string, string) { return "", unbindFailure(&bindingEnv{instanceEnv: *nsEnv}, down) }},
		{"update refused", "UpdateInstanceCallFailed",
			`ServiceBroker returned a failure for update call; update will not be retried: broker answered 400: no room`,
			func() (string, string) { return updateFailure(refused, false) }},
		{"update unreachable", "ErrorCallingUpdateInstance",
			`The update call failed and will be retried: Error communicating with broker for updating: ` + down.Error(),
			func() (string, string) { return updateFailure(down, true) }},
		{"deprovision refused", "",
			`Deprovision call failed; received error response from broker: broker answered 400: no room`,
			func() (string, string) { return "", deprovisionFailure(env, refused) }},
		{"deprovision unreachable", "",
			`Error deprovisioning, ClusterServiceClass (K8S: "c-1" ExternalName: "postgresql") at ClusterServiceBroker "acme": ` + down.Error(),
			func() (string, string) { return "", deprovisionFailure(env, down) }},
		{"bind refused", "",
			`ServiceBroker returned failure; bind operation will not be retried: broker answered 400: no room`,
			func() (string, string) { return "", bindFailure(&bindingEnv{instanceEnv: *env}, refused, false) }},
		{"bind unreachable", "",
			`Error creating ServiceBinding for ServiceInstance "team/db" of ClusterServiceClass (K8S: "c-1" ExternalName: "postgresql") at ClusterServiceBroker "acme": ` + down.Error(),
			func() (string, string) { return "", bindFailure(&bindingEnv{instanceEnv: *env}, down, true) }},
		{"unbind unreachable", "",
			`Error unbinding from ServiceInstance "team/db" of ClusterServiceClass (K8S: "c-1" ExternalName: "postgresql") at ClusterServiceBroker "acme": ` + down.Error(),
			func() (string, string) { return "", unbindFailure(&bindingEnv{instanceEnv: *env}, down) }},
		{"orphan mitigated, the provision retried", "",
			`Orphan mitigation was completed successfully: Provision call failed: the backend gave up (attempt 2 failed; next attempt at 2026-01-02T03:04:05Z)`,
			func() (string, string) {
				return "", orphanMitigated("Provision call failed: the backend gave up",
					map[string]catalog.Retry{catalog.OperationProvision: {Failures: 2, NextAttempt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, catalog.OperationProvision)
			}},
		{"provisioning", "Provisioning", "The instance is being provisioned asynchronously",
			func() (string, string) { return inProgress(catalog.OperationProvision, "") }},
		{"updating, with the broker's word", "UpdatingInstance", "The instance is being updated asynchronously (50% done)",
			func() (string, string) { return inProgress(catalog.OperationUpdate, "50% done") }},
		{"deprovisioning", "Deprovisioning", "The instance is being deprovisioned asynchronously",
			func() (string, string) { return inProgress(catalog.OperationDeprovision, "") }},
		{"binding", "Binding", "The binding is being created asynchronously",
			func() (string, string) { return inProgress(catalog.OperationBind, "") }},
		{"unbinding", "Unbinding", "The binding is being deleted asynchronously",
			func() (string, string) { return inProgress(catalog.OperationUnbind, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reason, msg := tc.got()
			if reason != tc.reason || msg != tc.msg {
				t.Errorf("got\n  %s %q\nwant\n  %s %q", reason, msg, tc.reason, tc.msg)
			}
		})
	}
	if !osb.IsTimeout(timeout) {
		t.Fatal("the timeout case is no timeout for the OSB client")
	}
}

// TestConditionOrder: setting conditions keeps Ready first, and removing
// one keeps the others in order, so the last is what svcat shows.
func TestConditionOrder(t *testing.T) {
	t.Parallel()
	var conds []catalog.Condition
	now := time.Now()
	setReady(&conds, catalog.ConditionFalse, reasonProvisionInFlight, msgProvisionInFlight, now)
	catalog.SetCondition(&conds, catalog.Condition{Type: catalog.ConditionOrphanMitigation, Status: catalog.ConditionTrue, Reason: reasonProvisionFailed}, now)
	setReady(&conds, catalog.ConditionFalse, reasonStartingOrphanMitigation, msgStartingOrphanMitigation, now)
	setFailed(&conds, reasonBrokerFailure, "no", now)
	if got := []string{conds[0].Type, conds[1].Type, conds[2].Type}; got[0] != "Ready" || got[1] != "OrphanMitigation" || got[2] != "Failed" {
		t.Fatalf("order %v", got)
	}
	removeCondition(&conds, catalog.ConditionOrphanMitigation)
	removeCondition(&conds, catalog.ConditionFailed)
	setReady(&conds, catalog.ConditionTrue, reasonProvisioned, msgProvisioned, now)
	if len(conds) != 1 || conds[0].Type != "Ready" || conds[0].Status != "True" {
		t.Fatalf("after success: %+v", conds)
	}
	removeCondition(&conds, catalog.ConditionReady)
	if conds != nil {
		t.Errorf("no conditions left: %+v, want nil (omitted in JSON)", conds)
	}
}
