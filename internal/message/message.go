// Package message is the one catalogue of what Bindery says to people: the
// sentence and the short word for every condition and history reason, and
// the wording of the messages the doors show (not found, name taken, a
// class or plan no broker offers, a broker that cannot be reached, a bad
// name). The REST API, the web UI and the CLI all word things from here,
// so that one situation reads the same everywhere.
//
// Each message names the thing and, where there is one, the fix, in words.
// Field paths (spec.secretName) are for API clients and travel in their
// own field of an error, never inside the sentence. Reasons stay the
// stable CamelCase codes Service Catalog defined (status.conditions keep
// them for API clients); people are shown Reason(code).Sentence.
//
// The package imports nothing of Bindery's, so every door (the CLI too,
// which speaks only REST) may use it.
package message

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// State is where an instance or binding stands, as a person (or `bindery
// … --wait`) needs to know it: whether to keep waiting, and why not.
type State string

// The states, from the object's conditions and operation.
const (
	// Ready: the engine has done what the current spec asks.
	Ready State = "ready"
	// Working: an operation is under way, or the engine has yet to start it.
	Working State = "working"
	// Retrying: an attempt failed in a way the engine retries, with backoff.
	Retrying State = "retrying"
	// Waiting: it waits for something outside it (a class no broker offers
	// yet, an instance not created yet); it may come by itself.
	Waiting State = "waiting"
	// Blocked: it waits for something that will not come by itself (its
	// bindings must be deleted first), or has waited past the grace period
	// for something missing: a person has to act.
	Blocked State = "blocked"
	// Failed: the broker or the engine failed the operation for good; only
	// a change of the spec (or deleting it) starts a new one.
	Failed State = "failed"
)

// Ends tells whether a client waiting for the object should stop: it is
// ready, failed or blocked.
func (s State) Ends() bool { return s == Ready || s == Failed || s == Blocked }

// Reason is what a reason code says to a person.
type Reason struct {
	// Word is the state in a word or two, for a table cell.
	Word string
	// Sentence says it in words, ending with a full stop.
	Sentence string
	// State is how the reason counts for Ready conditions (Ready,
	// Working, Retrying, Waiting or Blocked); a Failed condition is
	// always Failed.
	State State
}

// reasons are the codes the engine and the catalog write in conditions
// and history: Service Catalog v0.3.1's, and Bindery's own.
var reasons = map[string]Reason{
	// Instances.
	"ProvisionRequestInFlight":                {"Provisioning", "Bindery is asking the broker to provision it.", Working},
	"Provisioning":                            {"Provisioning", "The broker is provisioning it.", Working},
	"ProvisionedSuccessfully":                 {"Ready", "It is provisioned and ready.", Ready},
	"ProvisionCallFailed":                     {"Provision failed", "The broker refused to provision it.", Retrying},
	"ErrorCallingProvision":                   {"Retrying", "Bindery could not reach the broker to provision it; it tries again.", Retrying},
	"ClusterServiceBrokerReturnedFailure":     {"Failed", "The broker failed the provision; change the spec or delete it.", Retrying},
	"ServiceBrokerReturnedFailure":            {"Failed", "The broker failed the provision; change the spec or delete it.", Retrying},
	"UpdateInstanceRequestInFlight":           {"Updating", "Bindery is asking the broker to update it.", Working},
	"UpdatingInstance":                        {"Updating", "The broker is updating it.", Working},
	"InstanceUpdatedSuccessfully":             {"Ready", "It is updated and ready.", Ready},
	"UpdateInstanceCallFailed":                {"Update failed", "The broker refused the update.", Retrying},
	"ErrorCallingUpdateInstance":              {"Retrying", "Bindery could not reach the broker to update it; it tries again.", Retrying},
	"DeprovisionRequestInFlight":              {"Deleting", "Bindery is asking the broker to deprovision it.", Working},
	"Deprovisioning":                          {"Deleting", "The broker is deprovisioning it.", Working},
	"DeprovisionCallFailed":                   {"Retrying", "The broker did not deprovision it; Bindery tries again.", Retrying},
	"DeprovisionBlockedByExistingCredentials": {"Blocked", "It still has bindings: delete them first, then it is deprovisioned.", Blocked},
	"ServiceBindingsDeletion":                 {"Deleting", "Its bindings are being deleted first.", Working},
	"StartingInstanceOrphanMitigation":        {"Cleaning up", "The provision failed unclearly; Bindery asks the broker to remove what it may have made.", Working},
	"OrphanMitigationSuccessful":              {"Cleaned up", "What the failed provision may have left at the broker is removed.", Retrying},
	"ErrorPollingLastOperation":               {"Retrying", "Bindery could not ask the broker how the operation goes; it asks again.", Retrying},
	"ErrorWithParameters":                     {"Bad parameters", "Its parameters cannot be sent to the broker; change them.", Blocked},
	"Abandoned":                               {"Abandoned", "It was abandoned: Bindery forgot it without asking the broker.", Working},
	"WaitingForFinalizers":                    {"Deleting", "It is deprovisioned; other finalizers still keep it.", Waiting},
	"ReferencesNonexistentServiceClass":       {"Waiting", "No broker offers the service class it names.", Waiting},
	"ReferencesNonexistentServicePlan":        {"Waiting", "Its service class has no plan of the name it gives.", Waiting},
	"ReferencesDeletedServicePlan":            {"Plan removed", "Its plan was removed from the broker's catalogue: choose another plan.", Blocked},
	"ReferencesNonexistentBroker":             {"Waiting", "The broker of its class is not registered.", Waiting},
	"QuotaExceeded":                           {"Waiting for room", "A quota of its namespace has no room for its plan; it is provisioned once there is.", Waiting},
	"DeprovisionedGone":                       {"Deleted", "The broker no longer knew it; it is deleted.", Ready},
	"WaitingForBroker":                        {"Broker down", "Its broker is not answering; Bindery asks again once a probe of the broker succeeds.", Waiting},
	"MaintenanceInfoConflict":                 {"Upgrade available", "The broker has a newer maintenance version of the plan; Bindery fetched its catalogue again.", Retrying},
	// Bindings.
	"BindingRequestInFlight":              {"Binding", "Bindery is asking the broker for credentials.", Working},
	"Binding":                             {"Binding", "The broker is making the credentials.", Working},
	"InjectedBindResult":                  {"Ready", "Its credentials are ready.", Ready},
	"CredentialsStored":                   {"Ready", "The broker returned credentials; they are stored encrypted.", Ready},
	"BindCallFailed":                      {"Bind failed", "The broker refused the binding.", Retrying},
	"ServiceBindingReturnedFailure":       {"Failed", "The broker failed the binding; change it or delete it.", Retrying},
	"ServiceBindingNeedsOrphanMitigation": {"Cleaning up", "The bind failed unclearly; Bindery asks the broker to remove what it may have made.", Working},
	"UnbindingRequestInFlight":            {"Deleting", "Bindery is asking the broker to revoke the credentials.", Working},
	"Unbinding":                           {"Deleting", "The broker is revoking the credentials.", Working},
	"UnbindCallFailed":                    {"Retrying", "The broker did not revoke the credentials; Bindery tries again.", Retrying},
	"UnboundGone":                         {"Deleted", "The broker no longer knew it; it is deleted.", Ready},
	// The instance is still being provisioned (which may take long): the
	// binding is working, not stuck; an instance that is stuck says so
	// itself.
	"ErrorInstanceNotReady":         {"Waiting", "Its instance is not ready yet; it is bound once it is.", Working},
	"ErrorInstanceRefsUnresolved":   {"Waiting", "Its instance waits for its class or plan.", Waiting},
	"ErrorNonbindableServiceClass":  {"Not bindable", "The instance's plan cannot be bound: choose a bindable plan.", Blocked},
	"ReferencesNonexistentInstance": {"Waiting", "The instance it names does not exist.", Waiting},
	"ReferencesNonexistentBinding":  {"Waiting", "The binding it rotates does not exist.", Waiting},
	"FetchingBindingFailed":         {"Retrying", "Bindery could not read the credentials from the broker; it tries again.", Retrying},
	"ErrorSecretNotOwned":           {"Blocked", "A Secret of that name belongs to something else: choose another secret name.", Blocked},
	"ErrorInjectingBindResult":      {"Retrying", "Bindery could not write the credentials' Secret; it tries again.", Retrying},
	// Brokers.
	"FetchedCatalog":       {"Ready", "Its catalogue was fetched.", Ready},
	"ErrorFetchingCatalog": {"Unreachable", "Its catalogue could not be fetched.", Retrying},
	"ErrorSyncingCatalog":  {"Bad catalogue", "Its catalogue could not be stored.", Retrying},
	"CircuitOpen":          {"Not answering", "It keeps failing or not answering; Bindery holds its requests back and probes it.", Retrying},
	"CircuitClosed":        {"Answering", "It answers again; the requests held back go on.", Ready},
	// History only.
	"Created": {"Created", "Its desired state was recorded.", Working},
}

// ReasonOf returns what a reason code says to a person. A code the
// catalogue does not list is spelt out from its words
// ("CircuitBreakerOpen" reads "Circuit breaker open."), so no CamelCase
// reaches a person.
func ReasonOf(code string) Reason {
	if r, ok := reasons[code]; ok {
		return r
	}
	words := Words(code)
	return Reason{Word: words, Sentence: words + ".", State: Working}
}

// Words spells a CamelCase code as words: "ProvisionedSuccessfully" is
// "Provisioned successfully". A code that is not CamelCase is returned as
// it is.
func Words(code string) string {
	var b strings.Builder
	rs := []rune(code)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
			b.WriteByte(' ')
			if i+1 < len(rs) && unicode.IsUpper(rs[i+1]) {
				b.WriteRune(r) // an acronym keeps its capitals
				continue
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Kinds of objects as people read them, by the API's collection or kind.
var kindWords = map[string]string{
	"instances": "instance", "bindings": "binding", "brokers": "broker",
	"serviceclasses": "service class", "serviceplans": "service plan",
	"ServiceInstance": "instance", "ServiceBinding": "binding",
	"ClusterServiceBroker": "broker", "ServiceBroker": "broker",
	"ClusterServiceClass": "service class", "ServiceClass": "service class",
	"ClusterServicePlan": "service plan", "ServicePlan": "service plan",
	"token": "token", "tokens": "token",
}

// Kind is how a person calls a kind or collection: "instance", "service
// class".
func Kind(kind string) string {
	if w, ok := kindWords[kind]; ok {
		return w
	}
	return strings.ToLower(Words(kind))
}

// NotFound says that no object of kind has the name in the namespace
// ("" for the cluster's brokers, classes and plans).
func NotFound(kind, name, namespace string) string {
	if namespace == "" {
		return fmt.Sprintf("No %s is named %q.", Kind(kind), name)
	}
	return fmt.Sprintf("No %s is named %q in namespace %q.", Kind(kind), name, namespace)
}

// NotFoundID says that no object of kind has the id.
func NotFoundID(kind, id string) string {
	return fmt.Sprintf("No %s has the id %q.", Kind(kind), id)
}

// Gone says that what a page or request was about no longer exists.
func Gone(kind string) string {
	if kind == "" {
		return "What you asked for does not exist; it may have been deleted."
	}
	return fmt.Sprintf("That %s does not exist; it may have been deleted.", Kind(kind))
}

// Exists says that a name is taken: the new object's kind and name, and
// the fix.
func Exists(kind, name, namespace string) string {
	if namespace == "" {
		return fmt.Sprintf("A %s named %q already exists: choose another name, or delete that one first.", Kind(kind), name)
	}
	return fmt.Sprintf("A %s named %q already exists in namespace %q: choose another name, or delete that one first.", Kind(kind), name, namespace)
}

// Changed says that an object changed since the client read it.
func Changed(kind, name string) string {
	return fmt.Sprintf("The %s %q changed since you read it: read it again and retry.", Kind(kind), name)
}

// UnknownClass is the warning for an instance naming a class no broker
// offers (yet): it is recorded and waits, as Service Catalog did.
func UnknownClass(class, namespace string) string {
	where := "the cluster's brokers"
	if namespace != "" {
		where = fmt.Sprintf("namespace %q's brokers", namespace)
	}
	return fmt.Sprintf("No service class named %q is offered by %s: the instance waits until a broker offers it. Check the name in the marketplace.", class, where)
}

// UnknownPlan is the warning for an instance naming a plan its class does
// not have (yet).
func UnknownPlan(plan, class string) string {
	if class == "" {
		return fmt.Sprintf("No plan named %q is offered: the instance waits until its broker offers it. Check the name in the marketplace.", plan)
	}
	return fmt.Sprintf("Service class %q has no plan named %q: the instance waits until its broker offers it. Check the name in the marketplace.", class, plan)
}

// UnknownInstance is the warning for a binding naming an instance that
// does not exist (yet).
func UnknownInstance(name, namespace string) string {
	return fmt.Sprintf("No instance named %q exists in namespace %q: the binding waits until it does. Check the name, or create the instance.", name, namespace)
}

// BlockedByBindings says why a deletion waits, with the bindings' names
// when known.
func BlockedByBindings(bindings []string) string {
	switch len(bindings) {
	case 0:
		return ReasonOf("DeprovisionBlockedByExistingCredentials").Sentence
	case 1:
		return fmt.Sprintf("It still has binding %q: delete it first (unbind), then the instance is deprovisioned.", bindings[0])
	}
	return fmt.Sprintf("It still has bindings %s: delete them first (unbind), then the instance is deprovisioned.", quoteList(bindings))
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// Fields are the names people call request fields by.
var fields = map[string]string{
	"name":                                  "the name",
	"namespace":                             "the namespace",
	"spec.secretName":                       "the Secret name",
	"spec.instanceRef.name":                 "the instance",
	"spec.instanceRef":                      "the instance",
	"spec.url":                              "the broker URL",
	"url":                                   "the broker URL",
	"spec.parameters":                       "the parameters",
	"spec.externalID":                       "the external id",
	"spec.relistDuration":                   "the relist interval",
	"relistDuration":                        "the relist interval",
	"auth.basic.username":                   "the user name",
	"auth.basic.password":                   "the password",
	"auth.bearer.token":                     "the bearer token",
	"spec.caBundle":                         "the CA bundle",
	"caBundle":                              "the CA bundle",
	"role":                                  "the role",
	"expiresAt":                             "the expiry time",
	"limit":                                 "the page size",
	"labels":                                "the labels",
	"annotations":                           "the annotations",
	"metadata.labels":                       "the labels",
	"metadata.annotations":                  "the annotations",
	"spec.clusterServicePlanExternalName":   "the plan",
	"spec.servicePlanExternalName":          "the plan",
	"spec.clusterServiceClassExternalName":  "the service class",
	"catalogRestrictions.serviceClass":      "the service class restrictions",
	"catalogRestrictions.servicePlan":       "the service plan restrictions",
	"spec.catalogRestrictions.serviceClass": "the service class restrictions",
	"spec.catalogRestrictions.servicePlan":  "the service plan restrictions",
	"spec.serviceClassExternalName":         "the service class",
}

// Field is how a person calls a request field: "spec.secretName" is "the
// Secret name"; a field the catalogue does not list is its last part
// spelt out in words ("the relist behavior").
func Field(path string) string {
	if f, ok := fields[path]; ok {
		return f
	}
	last := path
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		last = strings.Trim(path[i+1:], "]")
	}
	if strings.HasPrefix(path, "spec.parameters.") || strings.HasPrefix(path, "spec.parameters[") {
		return fmt.Sprintf("parameter %q", strings.TrimPrefix(path, "spec.parameters."))
	}
	// An entry of a list is named with its list ("entry 0 of the
	// namespaces"), not by its index alone ("the 0").
	if i := strings.LastIndexByte(path, '['); i > 0 && strings.HasSuffix(path, "]") {
		if n, err := strconv.Atoi(path[i+1 : len(path)-1]); err == nil {
			return fmt.Sprintf("entry %d of %s", n, Field(path[:i]))
		}
	}
	return "the " + strings.ToLower(Words(last))
}

// Required says that a field must be given.
func Required(path string) string {
	return capitalise(Field(path)) + " is required."
}

// BadName says what a Kubernetes object name may be, instead of the
// validation's regular expression: label is true for a namespace (a
// DNS-1123 label, at most 63 characters, no dots).
func BadName(path, value string, label bool) string {
	what := Field(path)
	if r := []rune(value); len(r) > 64 {
		value = string(r[:64]) + "…"
	}
	if label {
		return fmt.Sprintf("%s %q is not valid: use lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (for example team-a).", capitalise(what), value)
	}
	return fmt.Sprintf("%s %q is not valid: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters (for example orders-db).", capitalise(what), value)
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// Capitalise returns s with its first letter upper-cased, for a sentence
// that starts with a catalogue phrase.
func Capitalise(s string) string { return capitalise(s) }

// NoSuchClass refuses a class that is not offered where waiting for it
// makes no sense (a provisioned instance's plan change).
func NoSuchClass(class string) string {
	return fmt.Sprintf("No service class named %q is offered: choose one the marketplace lists.", class)
}

// NoSuchPlan refuses a plan its class does not offer where waiting for it
// makes no sense (a provisioned instance's plan change).
func NoSuchPlan(plan, class string) string {
	return fmt.Sprintf("Service class %q has no plan named %q: choose one of the plans the marketplace lists for it.", class, plan)
}

// QuotaExceeded says that a quota of a namespace has no room for one more:
// "namespace team-a may have 10 instances and has 10". what is the
// singular of what is counted ("instance", "binding"), and of, when not
// empty, narrows it ("plan large": "2 instances of plan large").
func QuotaExceeded(namespace string, limit int64, what, of string, used int64) string {
	if limit != 1 {
		what += "s"
	}
	if of != "" {
		what += " of " + of
	}
	return fmt.Sprintf("namespace %s may have %d %s and has %d", namespace, limit, what, used)
}

// PaidPlanRefused says that a namespace may not use a plan that is not
// free.
func PaidPlanRefused(namespace, plan string) string {
	return fmt.Sprintf("namespace %s may not use paid plans, and plan %s is not free", namespace, plan)
}

// QuotaFrom says, after QuotaExceeded or PaidPlanRefused, where the limit
// comes from when it is not the namespace's own quota: the default quota
// (resourceQuota empty) or a Kubernetes ResourceQuota of the namespace.
func QuotaFrom(byDefault bool, resourceQuota string) string {
	switch {
	case resourceQuota != "":
		return " (ResourceQuota " + resourceQuota + ")"
	case byDefault:
		return " (the default quota)"
	}
	return ""
}
