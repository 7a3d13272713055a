package catalog

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// Bounds on the text stored with objects, whoever writes it: the engine
// with a broker's words, a client of the Kubernetes API's status
// subresource. Messages and reasons are cut (pgtext.Clip: on a character
// boundary, marked, NUL replaced); what cannot be cut without becoming
// wrong (an operation, a URL, credentials, endpoints), or holds text
// PostgreSQL cannot store (a NUL, a lone surrogate escape in parameters),
// is refused, naming the field. internal/osb reads brokers' answers to the same bounds, so
// the engine's writes never meet a refusal (docs/engine.md, Bounds).
const (
	// MaxMessage bounds a condition's message, a lastError and a history
	// entry's message, in bytes (as Kubernetes bounds an Event's note).
	MaxMessage = 1 << 10
	// MaxReason bounds a condition's and a history entry's reason.
	MaxReason = 256
	// maxOperationName bounds a history entry's operation (Provision, …)
	// and type (Normal, Warning).
	maxOperationName = 64
)

// clipConditions cuts the conditions' reasons and messages.
func clipConditions(conds []Condition) {
	for i := range conds {
		conds[i].Reason = pgtext.Clip(conds[i].Reason, MaxReason)
		conds[i].Message = pgtext.Clip(conds[i].Message, MaxMessage)
	}
}

// boundInstanceStatus cuts an instance's messages and refuses what is past
// its bounds.
func boundInstanceStatus(st *InstanceStatus) error {
	clipConditions(st.Conditions)
	st.LastError = pgtext.Clip(st.LastError, MaxMessage)
	path := field.NewPath("status")
	errs := boundOperation(path, st.LastOperation)
	if len(st.DashboardURL) > osb.MaxDashboardURL {
		errs = append(errs, bad(path.Child("dashboardURL"), fmt.Sprintf("must be at most %d bytes", osb.MaxDashboardURL)))
	}
	return invalid(append(errs, storableJSON("status", mustJSON(st))...))
}

// boundBindingStatus cuts a binding's messages and refuses what is past
// its bounds.
func boundBindingStatus(st *BindingStatus) error {
	clipConditions(st.Conditions)
	st.LastError = pgtext.Clip(st.LastError, MaxMessage)
	path := field.NewPath("status")
	errs := boundOperation(path, st.LastOperation)
	if len(st.Endpoints) > osb.MaxEndpoints {
		errs = append(errs, bad(path.Child("endpoints"), fmt.Sprintf("must be at most %d", osb.MaxEndpoints)))
	}
	for i, e := range st.Endpoints {
		if p := osb.EndpointProblem(e.Host, e.Ports, e.Protocol); p != "" {
			errs = append(errs, bad(path.Child("endpoints").Index(i), "must have "+p))
		}
	}
	return invalid(append(errs, storableJSON("status", mustJSON(st))...))
}

func boundOperation(path *field.Path, op string) field.ErrorList {
	if n := utf8.RuneCountInString(op); n > osb.MaxOperation {
		return field.ErrorList{bad(path.Child("lastOperation"), fmt.Sprintf("must be at most %d characters (OSB's bound)", osb.MaxOperation))}
	}
	return nil
}

// boundCredentials refuses credentials past osb.MaxCredentials, as JSON.
func boundCredentials(raw []byte) error {
	if len(raw) > osb.MaxCredentials {
		return invalid(field.ErrorList{bad(field.NewPath("credentials"), fmt.Sprintf("must be at most %d KiB as JSON", osb.MaxCredentials>>10))})
	}
	return nil
}
