package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// The conditions the engine writes are those Service Catalog v0.3.1's
// controller wrote (pkg/controller/controller_instance.go,
// controller_binding.go), with its reasons and, where Service Catalog had
// a fixed text, its messages: its clients show them (svcat shows an
// object's last condition, its reason unless the condition is True, and
// its message). Ready comes first and stays first; Failed is added only
// when an operation failed for good and removed when a new generation is
// worked on or an operation succeeds; OrphanMitigation (instances only)
// is there while an orphan is being cleaned up. Bindery's own details go
// into the messages of conditions whose text Service Catalog built from
// an error, and into the history.

// Instance condition reasons and messages.
const (
	reasonProvisionInFlight = "ProvisionRequestInFlight"
	msgProvisionInFlight    = "Provision request for ServiceInstance in-flight to Broker"
	reasonProvisioning      = "Provisioning"
	msgProvisioning         = "The instance is being provisioned asynchronously"
	reasonProvisioned       = "ProvisionedSuccessfully"
	msgProvisioned          = "The instance was provisioned successfully"
	reasonProvisionFailed   = "ProvisionCallFailed"
	reasonErrorProvisioning = "ErrorCallingProvision"
	// reasonBrokerFailure is the Failed condition's reason when the broker
	// refused a provision for good (brokerFailureReason); and
	// reasonNamespacedBrokerFailure when the broker is a namespace's.
	reasonBrokerFailure           = "ClusterServiceBrokerReturnedFailure"
	reasonNamespacedBrokerFailure = "ServiceBrokerReturnedFailure"

	reasonUpdateInFlight = "UpdateInstanceRequestInFlight"
	msgUpdateInFlight    = "Update request for ServiceInstance in-flight to Broker"
	reasonUpdating       = "UpdatingInstance"
	msgUpdating          = "The instance is being updated asynchronously"
	reasonUpdated        = "InstanceUpdatedSuccessfully"
	msgUpdated           = "The instance was updated successfully"
	reasonUpdateFailed   = "UpdateInstanceCallFailed"
	reasonErrorUpdating  = "ErrorCallingUpdateInstance"

	reasonDeprovisionInFlight = "DeprovisionRequestInFlight"
	msgDeprovisionInFlight    = "Deprovision request for ServiceInstance in-flight to Broker"
	reasonDeprovisioning      = "Deprovisioning"
	msgDeprovisioning         = "The instance is being deprovisioned asynchronously"
	reasonDeprovisionFailed   = "DeprovisionCallFailed"
	reasonBlockedByBindings   = "DeprovisionBlockedByExistingCredentials"
	msgBlockedByBindings      = "All associated ServiceBindings must be removed before this ServiceInstance can be deleted"
	reasonBindingsDeletion    = "ServiceBindingsDeletion"
	msgBindingsDeletion       = "The instance's service bindings are being deleted"

	reasonStartingOrphanMitigation = "StartingInstanceOrphanMitigation"
	msgStartingOrphanMitigation    = "The instance provision call failed with an ambiguous error; attempting to deprovision the instance in order to mitigate an orphaned resource"
	reasonOrphanMitigated          = "OrphanMitigationSuccessful"
	msgOrphanMitigated             = "Orphan mitigation was completed successfully"

	reasonPollFailed     = "ErrorPollingLastOperation"
	reasonWithParameters = "ErrorWithParameters"
	reasonAbandoned      = "Abandoned" // Bindery's: Service Catalog had no abandon
	// reasonWaitBroker is Bindery's: the broker's circuit breaker is open
	// (bulkhead.go), and requests to it wait.
	reasonWaitBroker = "WaitingForBroker"
	// reasonMaintenance is Bindery\'s: a broker answered
	// MaintenanceInfoConflict (maintenance.go).
	reasonMaintenance      = "MaintenanceInfoConflict"
	reasonNonexistentClass = catalog.ReasonNonexistentServiceClass
	reasonNonexistentPlan  = catalog.ReasonNonexistentServicePlan
	reasonDeletedPlan      = catalog.ReasonDeletedServicePlan
	reasonNonexistentBkr   = catalog.ReasonNonexistentBroker
)

// Binding condition reasons and messages.
const (
	reasonBindInFlight        = "BindingRequestInFlight"
	msgBindInFlight           = "Binding request for ServiceBinding in-flight to Broker"
	reasonBinding             = "Binding"
	msgBinding                = "The binding is being created asynchronously"
	reasonBound               = "InjectedBindResult"
	msgBound                  = "Injected bind result"
	reasonBindFailed          = "BindCallFailed"
	reasonBindRefused         = "ServiceBindingReturnedFailure"
	reasonBindingOrphan       = "ServiceBindingNeedsOrphanMitigation"
	msgBindingOrphan          = "Starting orphan mitigation"
	reasonUnbindInFlight      = "UnbindingRequestInFlight"
	msgUnbindInFlight         = "Unbind request for ServiceBinding in-flight to Broker"
	reasonUnbinding           = "Unbinding"
	msgUnbinding              = "The binding is being deleted asynchronously"
	reasonUnbindFailed        = "UnbindCallFailed"
	reasonWaitInstance        = catalog.ReasonInstanceNotReady
	reasonInstanceUnresolved  = "ErrorInstanceRefsUnresolved"
	reasonNonbindable         = "ErrorNonbindableServiceClass"
	reasonNonexistentInstance = catalog.ReasonNonexistentInstance
	reasonFetchBindingFailed  = "FetchingBindingFailed"
	reasonSecretNotOwned      = "ErrorSecretNotOwned" // Bindery's: a Secret of that name is someone else's
	reasonSecretFailed        = "ErrorInjectingBindResult"
	// reasonNonexistentBinding is Bindery's: a rotation names a
	// predecessor that does not exist (Service Catalog had no rotation).
	reasonNonexistentBinding = "ReferencesNonexistentBinding"
)

// setReady sets the Ready condition; Ready stays the first condition (it
// is set when the object is recorded), so svcat, which shows the last,
// shows Ready whenever there is no Failed or OrphanMitigation condition.
func setReady(conds *[]catalog.Condition, status, reason, msg string, now time.Time) {
	catalog.SetCondition(conds, catalog.Condition{Type: catalog.ConditionReady, Status: status, Reason: reason, Message: msg}, now)
}

// setFailed adds the Failed condition of a failure that retrying the same
// generation cannot fix.
func setFailed(conds *[]catalog.Condition, reason, msg string, now time.Time) {
	catalog.SetCondition(conds, catalog.Condition{Type: catalog.ConditionFailed, Status: catalog.ConditionTrue, Reason: reason, Message: msg}, now)
}

// removeCondition drops the condition of the given type, as Service
// Catalog did with Failed when a new generation is worked on and with
// OrphanMitigation when it is over.
func removeCondition(conds *[]catalog.Condition, typ string) {
	*conds = slices.DeleteFunc(*conds, func(c catalog.Condition) bool { return c.Type == typ })
	if len(*conds) == 0 {
		*conds = nil
	}
}

// instanceName is how Service Catalog named an instance in messages:
// ServiceInstance "ns/name".
func instanceName(in *catalog.Instance) string {
	return fmt.Sprintf(`ServiceInstance "%s/%s"`, in.Namespace, in.Name)
}

// kindNames are the kinds of a broker, class and plan, as messages name
// them: the cluster's, or the namespaced ones.
type kindNames struct{ broker, class, plan string }

// scopedKinds are the kinds of the brokers, classes and plans of namespace
// ("" for the cluster's).
func scopedKinds(namespace string) kindNames {
	if namespace != "" {
		return kindNames{catalog.KindNamespacedBroker, catalog.KindNamespacedServiceClass, catalog.KindNamespacedServicePlan}
	}
	return kindNames{catalog.KindBroker, catalog.KindServiceClass, catalog.KindServicePlan}
}

// className is how Service Catalog named a class in messages:
// ClusterServiceClass (K8S: "id" ExternalName: "name"), or ServiceClass
// for a namespaced one.
func className(c *catalog.ServiceClass) string {
	if c == nil {
		return catalog.KindServiceClass
	}
	return fmt.Sprintf("%s (K8S: %q ExternalName: %q)", catalog.Kind(c), c.Name, c.Spec.ExternalName)
}

// planName names a plan as className does a class.
func planName(p *catalog.ServicePlan) string {
	return fmt.Sprintf("%s (K8S: %q ExternalName: %q)", catalog.Kind(p), p.Name, p.Spec.ExternalName)
}

// brokerOf names the broker of an instance's plan as Service Catalog did:
// ClusterServiceBroker "b" (or ServiceBroker "b").
func brokerOf(env *instanceEnv) string {
	if env.plan == nil {
		return fmt.Sprintf("%s %q", catalog.KindBroker, "")
	}
	return fmt.Sprintf("%s %q", scopedKinds(env.plan.Namespace).broker, env.plan.Spec.BrokerName())
}

// brokerFailureReason is the Failed reason of a provision env's broker
// refused for good, in the words for its kind of broker.
func brokerFailureReason(env *instanceEnv) string {
	if env.plan != nil && env.plan.Namespace != "" {
		return reasonNamespacedBrokerFailure
	}
	return reasonBrokerFailure
}

// instanceAt is Service Catalog's "ServiceInstance "ns/name" of
// ClusterServiceClass (…) at ClusterServiceBroker "b"".
func instanceAt(env *instanceEnv) string {
	return fmt.Sprintf("%s of %s at %s", instanceName(env.in), className(env.class), brokerOf(env))
}

// provisionFailure is the reason and message of a provision request that
// failed, as Service Catalog worded them: the broker's answer
// (ProvisionCallFailed), a timeout or an error reaching it
// (ErrorCallingProvision).
func provisionFailure(env *instanceEnv, err error) (reason, msg string) {
	var he *osb.HTTPError
	switch {
	case errors.As(err, &he):
		return reasonProvisionFailed, fmt.Sprintf("Error provisioning ServiceInstance of %s at %s: %v",
			className(env.class), brokerOf(env), err)
	case osb.IsTimeout(err):
		return reasonErrorProvisioning, fmt.Sprintf("Communication with the %s timed out; operation will be retried: %v", brokerKind(env), err)
	}
	return reasonErrorProvisioning, fmt.Sprintf("The provision call failed and will be retried: Error communicating with broker for provisioning: %v", err)
}

// updateFailure is provisionFailure for an update; retried says whether
// Bindery sends it again.
func updateFailure(err error, retried bool) (reason, msg string) {
	var he *osb.HTTPError
	switch {
	case errors.As(err, &he) && retried:
		return reasonUpdateFailed, fmt.Sprintf("ServiceBroker returned a failure for update call; update will be retried: %v", err)
	case errors.As(err, &he):
		return reasonUpdateFailed, fmt.Sprintf("ServiceBroker returned a failure for update call; update will not be retried: %v", err)
	case osb.IsTimeout(err):
		return reasonErrorUpdating, fmt.Sprintf("Communication with the ServiceBroker timed out; update will be retried: %v", err)
	}
	return reasonErrorUpdating, fmt.Sprintf("The update call failed and will be retried: Error communicating with broker for updating: %v", err)
}

// brokerKind is the kind of env's broker: ClusterServiceBroker, or
// ServiceBroker for a namespace's.
func brokerKind(env *instanceEnv) string {
	if env.plan != nil {
		return scopedKinds(env.plan.Namespace).broker
	}
	return catalog.KindBroker
}

// deprovisionFailure words a failed deprovision request.
func deprovisionFailure(env *instanceEnv, err error) string {
	var he *osb.HTTPError
	if errors.As(err, &he) {
		return fmt.Sprintf("Deprovision call failed; received error response from broker: %v", err)
	}
	return fmt.Sprintf("Error deprovisioning, %s at %s: %v", className(env.class), brokerOf(env), err)
}

// bindFailure words a failed bind request; retried says whether Bindery
// sends it again (Service Catalog never did after a broker's error).
func bindFailure(env *bindingEnv, err error, retried bool) string {
	var he *osb.HTTPError
	switch {
	case errors.As(err, &he) && retried:
		return fmt.Sprintf("ServiceBroker returned failure; bind operation will be retried: %v", err)
	case errors.As(err, &he):
		return fmt.Sprintf("ServiceBroker returned failure; bind operation will not be retried: %v", err)
	case osb.IsTimeout(err):
		return "Communication with the ServiceBroker timed out; Bind operation will be retried: " + err.Error()
	}
	return fmt.Sprintf("Error creating ServiceBinding for %s: %v", instanceAt(&env.instanceEnv), err)
}

// unbindFailure words a failed unbind request.
func unbindFailure(env *bindingEnv, err error) string {
	return fmt.Sprintf("Error unbinding from %s: %v", instanceAt(&env.instanceEnv), err)
}

// orphanMitigated is Ready's message once an orphan mitigation is over
// and op (a provision or a bind) waits for its next attempt: Service
// Catalog's words, then what the broker said of the failure (lastError)
// and when the next attempt is, which the user needs to know.
func orphanMitigated(lastError string, retries map[string]catalog.Retry, op string) string {
	msg := msgOrphanMitigated
	if lastError != "" {
		msg += ": " + lastError
	}
	if r, ok := retries[op]; ok && r.Failures > 0 {
		msg += retrying(retries, op)
	}
	return msg
}

// inProgress is the Ready reason and message while an asynchronous
// operation runs, with the broker's description when it gave one.
func inProgress(op, description string) (reason, msg string) {
	switch op {
	case catalog.OperationUpdate:
		reason, msg = reasonUpdating, msgUpdating
	case catalog.OperationDeprovision:
		reason, msg = reasonDeprovisioning, msgDeprovisioning
	case catalog.OperationBind:
		reason, msg = reasonBinding, msgBinding
	case catalog.OperationUnbind:
		reason, msg = reasonUnbinding, msgUnbinding
	default:
		reason, msg = reasonProvisioning, msgProvisioning
	}
	if description != "" {
		msg = fmt.Sprintf("%s (%s)", msg, description)
	}
	return reason, msg
}
