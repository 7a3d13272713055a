package broker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is an OSB error response: the HTTP status, the OSB error code and a
// description for the user. Every failure of an OSB request becomes one of
// these in one place (errorHandler), so status codes and bodies follow the
// spec everywhere.
type Error struct {
	Status      int
	Code        string
	Description string
	// InstanceUsable and UpdateRepeatable are only sent for failed updates
	// and deprovisions, as the spec allows.
	InstanceUsable   *bool
	UpdateRepeatable *bool
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Description) }

// body is the OSB error body.
func (e *Error) body() map[string]any {
	b := map[string]any{"description": e.Description}
	if e.Code != "" {
		b["error"] = e.Code
	}
	if e.InstanceUsable != nil {
		b["instance_usable"] = *e.InstanceUsable
	}
	if e.UpdateRepeatable != nil {
		b["update_repeatable"] = *e.UpdateRepeatable
	}
	return b
}

func newError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

// The OSB error codes the spec defines
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#error-codes).
const (
	CodeAsyncRequired           = "AsyncRequired"
	CodeConcurrencyError        = "ConcurrencyError"
	CodeRequiresApp             = "RequiresApp"
	CodeMaintenanceInfoConflict = "MaintenanceInfoConflict"
)

func errBadRequest(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, "BadRequest", format, args...)
}

func errAsyncRequired() *Error {
	return newError(http.StatusUnprocessableEntity, CodeAsyncRequired,
		"This Service Plan requires client support for asynchronous service operations.")
}

func errConcurrency(what string) *Error {
	return newError(http.StatusUnprocessableEntity, CodeConcurrencyError,
		"Another operation for this %s is in progress.", what)
}

func errMaintenanceInfoConflict() *Error {
	return newError(http.StatusUnprocessableEntity, CodeMaintenanceInfoConflict,
		"The maintenance information for the requested Service Plan has changed.")
}

func errRequiresApp() *Error {
	return newError(http.StatusUnprocessableEntity, CodeRequiresApp,
		"This Service supports generation of credentials through binding an application only.")
}

// CodeCapacityExceeded is Bindery's error code for a request the service
// has no room for (a CapacityError): OSB defines none for it, and leaves
// brokers free to name their own.
const CodeCapacityExceeded = "CapacityExceeded"

func errCapacity(e *CapacityError) *Error {
	return newError(http.StatusUnprocessableEntity, CodeCapacityExceeded, "%s", upperFirst(e.Reason)+".")
}

// CodePlanNotOffered is Bindery's error code for an update that asks an
// instance's plan, which has left the catalogue, for new parameters or a
// new maintenance version: OSB defines none for it.
const CodePlanNotOffered = "PlanNotOffered"

func errPlanNotOffered(in *instance) *Error {
	return newError(http.StatusUnprocessableEntity, CodePlanNotOffered,
		"Plan %s of service instance %s is no longer offered: its parameters and maintenance version cannot change. "+
			"Change the instance to a plan of the catalog first.", in.PlanID, in.ID)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func errConflict(format string, args ...any) *Error {
	return newError(http.StatusConflict, "Conflict", format, args...)
}

func errNotFound(format string, args ...any) *Error {
	return newError(http.StatusNotFound, "NotFound", format, args...)
}

// errOperationFailed reports a synchronous operation whose driver failed.
func errOperationFailed(description string) *Error {
	return newError(http.StatusInternalServerError, "OperationFailed", "%s", description)
}

// asError finds an *Error in err's chain.
func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
