package broker

import (
	"context"
	"encoding/json"
)

// Driver does the real work behind one kind of service. The broker keeps
// the OSB bookkeeping (records, operations, status codes, concurrency) and
// calls one Driver method per OSB verb, synchronously or from a durable job.
//
// Every method must be idempotent: after a crash the broker calls it again
// with the same request, and it must then finish the work rather than fail
// on what the first attempt already did. A method that fails must leave
// nothing behind that a later Deprovision or Unbind could not remove.
type Driver interface {
	// Provision creates the service instance's resources.
	// OSB: PUT /v2/service_instances/:instance_id.
	// On error it removes whatever it created before returning.
	Provision(ctx context.Context, req InstanceRequest) (ProvisionResult, error)

	// Update applies a new plan, parameters or maintenance version to an
	// existing instance. OSB: PATCH /v2/service_instances/:instance_id.
	// On error the instance is left usable with its previous settings where
	// the driver can manage it.
	Update(ctx context.Context, req UpdateRequest) error

	// Deprovision removes every resource of the instance, including those of
	// bindings not yet unbound. Resources that are already gone are not an
	// error. OSB: DELETE /v2/service_instances/:instance_id.
	Deprovision(ctx context.Context, req InstanceRequest) error

	// Bind creates credentials for an application.
	// OSB: PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
	// Called again for the same binding (after a crash), it must return
	// working credentials, which may differ from the first attempt's.
	// On error it removes whatever it created before returning.
	Bind(ctx context.Context, req BindRequest) (BindResult, error)

	// Unbind revokes the binding's credentials and removes its resources.
	// Resources that are already gone are not an error.
	// OSB: DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id.
	Unbind(ctx context.Context, req BindRequest) error
}

// InstanceRequest names an instance and the plan it has (or gets).
type InstanceRequest struct {
	InstanceID string
	ServiceID  string
	PlanID     string
	// PlanConfig is the plan's driver settings from the catalogue file
	// (the plan's `config` object), as JSON.
	PlanConfig json.RawMessage
	// Parameters are the instance's parameters, already validated against
	// the plan's schema. Nil when none were given.
	Parameters map[string]any
	// MaintenanceVersion is the plan's maintenance_info.version, if any.
	MaintenanceVersion string
}

// ProvisionResult is what Provision reports back.
type ProvisionResult struct {
	// DashboardURL is returned to the platform when not empty.
	DashboardURL string
}

// UpdateRequest carries the instance before and after the update.
type UpdateRequest struct {
	// Previous is the instance as it is now. Its PlanConfig is nil when
	// its plan has left the catalogue (the update then moves it to
	// another plan).
	Previous InstanceRequest
	// Desired is the instance as it should be: the new plan (or the same),
	// the merged parameters and the maintenance version to apply.
	Desired InstanceRequest
}

// BindRequest names a binding and the instance it belongs to.
type BindRequest struct {
	Instance  InstanceRequest
	BindingID string
	// PredecessorBindingID is set when the binding rotates an older one;
	// both stay valid until each is unbound.
	PredecessorBindingID string
	// Parameters are the binding's parameters, validated against the plan's
	// binding schema.
	Parameters map[string]any
}

// BindResult holds what the application needs to reach the instance.
type BindResult struct {
	// Credentials is returned to the platform and stored encrypted.
	Credentials map[string]any
	// Endpoints are the network endpoints the application connects to.
	Endpoints []Endpoint
}

// Endpoint is an OSB 2.17 endpoint object.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// CapacityChecker is implemented by drivers that can tell, before a
// provision or a plan change is accepted, that the service has no room
// for it: the platform then gets a refusal it can show, rather than an
// operation that fails. Provision and Update stay the authority, as
// another request may take the room in between.
type CapacityChecker interface {
	// CheckCapacity returns a *CapacityError when req, with its plan,
	// does not fit; other errors only mean that it could not tell.
	CheckCapacity(ctx context.Context, req InstanceRequest) error
}

// CapacityError says that the service has no room for a request, and why,
// in words for the platform's user.
type CapacityError struct {
	Reason string
}

func (e *CapacityError) Error() string { return e.Reason }
