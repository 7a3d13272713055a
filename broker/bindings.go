package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
)

// bind handles PUT /v2/service_instances/:instance_id/service_bindings/:binding_id,
// including rotation with predecessor_binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#binding).
func (b *Broker) bind(c echo.Context) error {
	ctx := c.Request().Context()
	instanceID, bindingID := c.Param("instance_id"), c.Param("binding_id")
	async, err := acceptsIncomplete(c)
	if err != nil {
		return err
	}
	var req bindRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := checkIDs(map[string]string{"service_id": req.ServiceID, "plan_id": req.PlanID,
		"predecessor_binding_id": req.PredecessorBindingID, "bind_resource.app_guid": req.appGUID()}); err != nil {
		return err
	}
	if err := req.checkObjects(); err != nil {
		return err
	}
	if req.PredecessorBindingID == "" && (req.ServiceID == "" || req.PlanID == "") {
		return errBadRequest("service_id, plan_id: required, must be non-empty strings")
	}
	var r bindRecord
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		in, plan, err := b.bindable(ctx, tx, instanceID, &req)
		if err != nil {
			return err
		}
		params, err := b.bindParameters(ctx, tx, plan, instanceID, &req)
		if err != nil {
			return err
		}
		if plan.AsyncRequired && !async {
			return errAsyncRequired()
		}
		bnd := &binding{
			ID: bindingID, InstanceID: instanceID, ServiceID: in.ServiceID, PlanID: in.PlanID, State: bindBinding,
			Parameters: params, Context: req.Context, BindResource: req.BindResource, AppGUID: req.appGUID(),
			PredecessorBindingID: req.PredecessorBindingID,
		}
		inserted, err := insertBinding(ctx, tx, bnd)
		if err != nil {
			return err
		}
		if !inserted {
			r.existing, r.replay, err = bindAgain(ctx, tx, bnd, async)
			return err
		}
		r.op = b.newOperation(c, kindBind, instanceID, bindingID, async, opRequest{})
		return b.enqueue(ctx, tx, r.op, plan)
	})
	if err != nil {
		return err
	}
	return b.bindAnswer(c, r, async)
}

// bindRecord is what a bind's transaction found or made: a new operation,
// the same bind under way, or the binding as it exists.
type bindRecord struct {
	op, replay *operation
	existing   *binding
}

// bindable locks the instance of a bind and checks that it and the
// request allow a binding: it returns the instance and its plan.
func (b *Broker) bindable(ctx context.Context, tx pgx.Tx, instanceID string, req *bindRequest) (*instance, *Plan, error) {
	in, err := lockInstance(ctx, tx, instanceID)
	if errors.Is(err, errNoRow) {
		return nil, nil, errNotFound("Service instance %s does not exist.", instanceID)
	}
	if err != nil {
		return nil, nil, err
	}
	if in.State != instReady {
		return nil, nil, errConcurrency("Service Instance")
	}
	if running, err := optional(runningOperation(ctx, tx, instanceID, "")); err != nil {
		return nil, nil, err
	} else if running != nil && running.Kind != kindUpdate {
		return nil, nil, errConcurrency("Service Instance")
	}
	if req.ServiceID != "" && req.ServiceID != in.ServiceID {
		return nil, nil, errBadRequest("service_id: %q is not the service of instance %s", req.ServiceID, instanceID)
	}
	if req.PlanID != "" && req.PlanID != in.PlanID {
		return nil, nil, errBadRequest("plan_id: %q is not the plan of instance %s", req.PlanID, instanceID)
	}
	plan, err := b.planOf(in.ServiceID, in.PlanID)
	if err != nil {
		return nil, nil, err
	}
	if !plan.IsBindable() {
		return nil, nil, errBadRequest("Plan %s is not bindable.", plan.Name)
	}
	if plan.RequiresApp && req.appGUID() == "" {
		return nil, nil, errRequiresApp()
	}
	return in, plan, nil
}

// bindParameters are a bind's parameters, checked against the plan's
// schema: the request's, or for a rotation without any, the
// predecessor's.
func (b *Broker) bindParameters(ctx context.Context, tx pgx.Tx, plan *Plan, instanceID string, req *bindRequest) (map[string]any, error) {
	params := req.Parameters
	if req.PredecessorBindingID != "" {
		if !plan.BindingRotatable {
			return nil, errBadRequest("predecessor_binding_id: bindings of plan %s cannot be rotated", plan.Name)
		}
		pred, err := getBinding(ctx, tx, req.PredecessorBindingID)
		if errors.Is(err, errNoRow) || (err == nil && (pred.InstanceID != instanceID || pred.State != bindBound)) {
			return nil, errBadRequest("predecessor_binding_id: %q is not a binding of instance %s", req.PredecessorBindingID, instanceID)
		}
		if err != nil {
			return nil, err
		}
		if params == nil {
			params = pred.Parameters
		}
	}
	if err := validateParameters(plan.bind, params); err != nil {
		return nil, err
	}
	return params, nil
}

// bindAgain answers a bind of a binding that exists: it must be the same
// binding, and bound (or its bind under way, for a platform that accepts
// asynchronous answers).
func bindAgain(ctx context.Context, tx pgx.Tx, bnd *binding, async bool) (existing *binding, replay *operation, err error) {
	if existing, err = lockBinding(ctx, tx, bnd.ID); err != nil {
		return nil, nil, err
	}
	same := existing.InstanceID == bnd.InstanceID && existing.ServiceID == bnd.ServiceID &&
		existing.PlanID == bnd.PlanID && existing.AppGUID == bnd.AppGUID &&
		existing.PredecessorBindingID == bnd.PredecessorBindingID &&
		sameJSON(existing.Parameters, bnd.Parameters) && sameJSON(existing.BindResource, bnd.BindResource)
	if !same {
		return nil, nil, errConflict("Service binding %s already exists with different parameters.", bnd.ID)
	}
	running, err := optional(runningOperation(ctx, tx, bnd.InstanceID, bnd.ID))
	switch {
	case err != nil:
		return nil, nil, err
	case running != nil && running.Kind == kindBind && async:
		return nil, running, nil
	case running != nil:
		return nil, nil, errConcurrency("Service Binding")
	case existing.State != bindBound:
		return nil, nil, errConflict("Service binding %s exists but its creation failed; unbind it first.", bnd.ID)
	}
	return existing, nil, nil
}

// bindAnswer answers a bind once its transaction has run: 202 for an
// operation under way, 200 with the existing binding's credentials, or
// the outcome of running the new operation now.
func (b *Broker) bindAnswer(c echo.Context, r bindRecord, async bool) error {
	switch {
	case r.replay != nil:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": r.replay.ID})
	case r.existing != nil:
		body, err := b.bindingBody(r.existing, false)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, body)
	case async:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": r.op.ID})
	}
	ctx := c.Request().Context()
	out, err := b.runSync(ctx, r.op)
	if err != nil {
		return err
	}
	body := map[string]any{"credentials": out.credentials}
	if out.credentials == nil {
		// Another process finished the bind: the record has the credentials.
		bnd, err := getBinding(ctx, b.pool, r.op.BindingID)
		if err != nil {
			return err
		}
		if body, err = b.bindingBody(bnd, false); err != nil {
			return err
		}
	} else if len(out.endpoints) > 0 {
		body["endpoints"] = out.endpoints
	}
	return c.JSON(http.StatusCreated, body)
}

// bindingBody is the response of a bind or a binding fetch, with the
// credentials opened.
func (b *Broker) bindingBody(bnd *binding, withParameters bool) (map[string]any, error) {
	body := map[string]any{}
	if bnd.Credentials != nil {
		plain, err := b.keys.Open(bnd.Credentials, []byte(bnd.ID))
		if err != nil {
			return nil, err
		}
		body["credentials"] = json.RawMessage(plain)
	}
	if len(bnd.Endpoints) > 0 {
		body["endpoints"] = bnd.Endpoints
	}
	if withParameters && bnd.Parameters != nil {
		body["parameters"] = bnd.Parameters
	}
	return body, nil
}

// getBinding handles GET .../service_bindings/:binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#fetching-a-service-binding).
func (b *Broker) getBinding(c echo.Context) error {
	ctx := c.Request().Context()
	instanceID, bindingID := c.Param("instance_id"), c.Param("binding_id")
	if err := optionalQuery(c, "service_id", "plan_id"); err != nil {
		return err
	}
	bnd, err := getBinding(ctx, b.pool, bindingID)
	if errors.Is(err, errNoRow) || (err == nil && bnd.InstanceID != instanceID) {
		return errNotFound("Service binding %s does not exist.", bindingID)
	}
	if err != nil {
		return err
	}
	if svc, ok := b.catalog.ServiceByID(bnd.ServiceID); ok && !svc.BindingsRetrievable {
		return errBadRequest("Bindings of service %s are not retrievable.", svc.Name)
	}
	if bnd.State != bindBound {
		return errNotFound("Service binding %s is being created.", bindingID)
	}
	body, err := b.bindingBody(bnd, true)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, body)
}

// unbind handles DELETE .../service_bindings/:binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#unbinding).
func (b *Broker) unbind(c echo.Context) error {
	ctx := c.Request().Context()
	instanceID, bindingID := c.Param("instance_id"), c.Param("binding_id")
	async, err := acceptsIncomplete(c)
	if err != nil {
		return err
	}
	if err := requireQuery(c, "service_id", "plan_id"); err != nil {
		return err
	}
	var op, replay *operation
	gone := false
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		bnd, err := lockBinding(ctx, tx, bindingID)
		if errors.Is(err, errNoRow) || (err == nil && bnd.InstanceID != instanceID) {
			gone = true
			return nil
		}
		if err != nil {
			return err
		}
		running, err := optional(runningOperation(ctx, tx, instanceID, bindingID))
		if err != nil {
			return err
		}
		if running != nil {
			if running.Kind == kindUnbind && async {
				replay = running
				return nil
			}
			return errConcurrency("Service Binding")
		}
		if inst, err := optional(runningOperation(ctx, tx, instanceID, "")); err != nil {
			return err
		} else if inst != nil && inst.Kind == kindDeprovision {
			return errConcurrency("Service Instance")
		}
		plan, _ := b.catalog.Plan(bnd.PlanID)
		if plan != nil && plan.AsyncRequired && !async {
			return errAsyncRequired()
		}
		op = b.newOperation(c, kindUnbind, instanceID, bindingID, async, opRequest{})
		return b.enqueue(ctx, tx, op, plan)
	})
	if err != nil {
		return err
	}
	return b.deleteAnswer(c, op, replay, gone, async)
}

// bindingLastOperation handles GET .../service_bindings/:binding_id/last_operation
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#polling-last-operation-for-service-bindings).
func (b *Broker) bindingLastOperation(c echo.Context) error {
	return b.lastOperation(c, c.Param("instance_id"), c.Param("binding_id"), kindUnbind)
}
