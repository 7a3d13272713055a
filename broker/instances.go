package broker

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
)

// provision handles PUT /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#provisioning).
func (b *Broker) provision(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("instance_id")
	async, err := acceptsIncomplete(c)
	if err != nil {
		return err
	}
	var req provisionRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	plan, err := b.planOf(req.ServiceID, req.PlanID)
	if err != nil {
		return err
	}
	if req.MaintenanceInfo != nil && req.MaintenanceInfo.Version != plan.maintenanceVersion() {
		return errMaintenanceInfoConflict()
	}
	if err := validateParameters(plan.create, req.Parameters); err != nil {
		return err
	}
	if plan.AsyncRequired && !async {
		return errAsyncRequired()
	}
	if err := b.checkCapacity(ctx, InstanceRequest{InstanceID: id, ServiceID: req.ServiceID, PlanID: plan.ID,
		PlanConfig: plan.Config, Parameters: req.Parameters}); err != nil {
		return err
	}
	in := &instance{
		ID: id, ServiceID: req.ServiceID, PlanID: req.PlanID, State: instProvisioning,
		Parameters: req.Parameters, Context: req.Context,
		OrganizationGUID: req.OrganizationGUID, SpaceGUID: req.SpaceGUID,
		MaintenanceVersion: plan.maintenanceVersion(),
	}
	op := b.newOperation(c, kindProvision, id, "", async, opRequest{})
	var existing *instance
	var running *operation
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		inserted, err := insertInstance(ctx, tx, in)
		if err != nil {
			return err
		}
		if !inserted {
			if existing, err = lockInstance(ctx, tx, id); err != nil {
				return err
			}
			running, err = optional(runningOperation(ctx, tx, id, ""))
			return err
		}
		return b.enqueue(ctx, tx, op, plan)
	})
	if err != nil {
		return err
	}
	if existing != nil {
		return b.provisionAgain(c, existing, running, &req, async)
	}
	if async {
		return c.JSON(http.StatusAccepted, map[string]any{"operation": op.ID})
	}
	out, err := b.runSync(ctx, op)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, dashboard(out.dashboardURL))
}

// provisionAgain answers a PUT for an instance that exists: 200 when it is
// the same instance and ready, 202 while the same provision is running (to
// a platform that accepts asynchronous answers; others get ConcurrencyError),
// 409 when the attributes differ.
func (b *Broker) provisionAgain(c echo.Context, in *instance, running *operation, req *provisionRequest, async bool) error {
	same := in.ServiceID == req.ServiceID && in.PlanID == req.PlanID &&
		in.OrganizationGUID == req.OrganizationGUID && in.SpaceGUID == req.SpaceGUID &&
		sameJSON(in.Parameters, req.Parameters)
	if !same {
		return errConflict("Service instance %s already exists with different attributes.", in.ID)
	}
	switch {
	case running != nil && running.Kind == kindProvision && async:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": running.ID})
	case running != nil:
		return errConcurrency("Service Instance")
	case in.State == instReady:
		return c.JSON(http.StatusOK, dashboard(in.DashboardURL))
	default:
		return errConflict("Service instance %s exists but its provision failed; deprovision it first.", in.ID)
	}
}

func dashboard(url string) map[string]any {
	if url == "" {
		return map[string]any{}
	}
	return map[string]any{"dashboard_url": url}
}

// update handles PATCH /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#updating-a-service-instance).
func (b *Broker) update(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("instance_id")
	async, err := acceptsIncomplete(c)
	if err != nil {
		return err
	}
	var req updateRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := checkIDs(map[string]string{"service_id": req.ServiceID, "plan_id": req.PlanID}); err != nil {
		return err
	}
	if req.ServiceID == "" {
		return errBadRequest("service_id: required, must be a non-empty string")
	}
	if err := validObject("context", req.Context); err != nil {
		return err
	}
	if req.MaintenanceInfo != nil && req.MaintenanceInfo.Version == "" {
		return errBadRequest("maintenance_info.version: required when maintenance_info is given")
	}
	capacity := b.precheckUpdateCapacity(ctx, id, &req)
	var op *operation
	var replay *operation
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		in, err := lockInstance(ctx, tx, id)
		if errors.Is(err, errNoRow) {
			return errNotFound("Service instance %s does not exist.", id)
		}
		if err != nil {
			return err
		}
		current, target, desired, err := b.updateTarget(in, &req)
		if err != nil {
			return err
		}
		running, err := optional(runningOperation(ctx, tx, id, ""))
		if err != nil {
			return err
		}
		if running != nil {
			if running.Kind == kindUpdate && async && sameJSON(running.Request, desired) {
				replay = running
				return nil
			}
			return errConcurrency("Service Instance")
		}
		if in.State != instReady {
			return errConcurrency("Service Instance")
		}
		changed := desired.PlanID != in.PlanID || desired.MaintenanceVersion != in.MaintenanceVersion ||
			!sameJSON(desired.Parameters, in.Parameters)
		if len(req.Context) > 0 {
			if err := setInstanceContext(ctx, tx, id, req.Context); err != nil {
				return err
			}
		}
		if !changed {
			return nil // 200: nothing to do but remember the context
		}
		if (target.AsyncRequired || (current != nil && current.AsyncRequired)) && !async {
			return errAsyncRequired()
		}
		if target != current {
			if err := b.updateCapacity(ctx, capacity, capacityRequest(in, target, desired)); err != nil {
				return err
			}
		}
		op = b.newOperation(c, kindUpdate, id, "", async, desired)
		return b.enqueue(ctx, tx, op, target)
	})
	if err != nil {
		return err
	}
	return b.updateAnswer(c, op, replay, async)
}

// capacityVerdict is a capacity check made before an update's
// transaction: the request it checked (nil when none was) and its answer.
type capacityVerdict struct {
	req *InstanceRequest
	err error
}

// precheckUpdateCapacity reads instance id without locking it and checks
// whether the plan the update moves it to fits. The check reads the
// target cluster, bounded by capacityCheckTimeout: made inside the
// update's transaction, it would keep the instance's record locked, and
// every other request for the instance waiting, for as long. What it
// cannot work out (no such instance, a request the transaction refuses)
// it leaves to the transaction.
func (b *Broker) precheckUpdateCapacity(ctx context.Context, id string, req *updateRequest) capacityVerdict {
	in, err := getInstance(ctx, b.pool, id)
	if err != nil {
		return capacityVerdict{}
	}
	current, target, desired, err := b.updateTarget(in, req)
	if err != nil || target == current {
		return capacityVerdict{}
	}
	creq := capacityRequest(in, target, desired)
	return capacityVerdict{req: &creq, err: b.checkCapacity(ctx, creq)}
}

// updateCapacity answers, inside an update's transaction, whether creq
// fits: with the verdict reached before the transaction when that was on
// the same plan and parameters, or else (the instance changed in between)
// with a check now.
func (b *Broker) updateCapacity(ctx context.Context, v capacityVerdict, creq InstanceRequest) error {
	if v.req != nil && v.req.PlanID == creq.PlanID && sameJSON(v.req.Parameters, creq.Parameters) {
		return v.err
	}
	return b.checkCapacity(ctx, creq)
}

// capacityRequest is what the capacity check of an update of instance in
// to plan target, with the desired parameters, asks about.
func capacityRequest(in *instance, target *Plan, desired opRequest) InstanceRequest {
	return InstanceRequest{InstanceID: in.ID, ServiceID: in.ServiceID, PlanID: target.ID,
		PlanConfig: target.Config, Parameters: desired.Parameters}
}

// updateAnswer answers an update once its transaction has run: 202 for
// an operation under way, 200 when there was nothing to change, or the
// outcome of running op now.
func (b *Broker) updateAnswer(c echo.Context, op, replay *operation, async bool) error {
	switch {
	case replay != nil:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": replay.ID})
	case op == nil:
		return c.JSON(http.StatusOK, map[string]any{})
	case async:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": op.ID})
	}
	if _, err := b.runSync(c.Request().Context(), op); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{})
}

// updateTarget works out what an update asks of instance in: its current
// plan (nil when it left the catalogue), the plan it moves to, and the
// operation's request with the parameters merged. An update that keeps a
// plan that left the catalogue has no target plan: it may change nothing
// but the context (see retiredPlanUpdate).
func (b *Broker) updateTarget(in *instance, req *updateRequest) (current, target *Plan, desired opRequest, err error) {
	if in.ServiceID != req.ServiceID {
		return nil, nil, desired, errBadRequest("service_id: %q is not the service of instance %s", req.ServiceID, in.ID)
	}
	current, err = b.planOf(in.ServiceID, in.PlanID)
	if err != nil && (req.PlanID == "" || req.PlanID == in.PlanID) {
		desired, err = retiredPlanUpdate(in, req)
		return nil, nil, desired, err
	}
	target = current
	if req.PlanID != "" && req.PlanID != in.PlanID {
		if current != nil && !current.IsUpdateable() {
			return nil, nil, desired, newError(http.StatusUnprocessableEntity, "PlanChangeNotSupported",
				"The plan of instance %s cannot be changed.", in.ID)
		}
		if target, err = b.planOf(in.ServiceID, req.PlanID); err != nil {
			return nil, nil, desired, err
		}
	}
	if req.MaintenanceInfo != nil && req.MaintenanceInfo.Version != target.maintenanceVersion() {
		return nil, nil, desired, errMaintenanceInfoConflict()
	}
	desired = opRequest{PlanID: target.ID, Parameters: in.Parameters, MaintenanceVersion: in.MaintenanceVersion}
	if req.Parameters != nil {
		if err := validateParameters(target.update, *req.Parameters); err != nil {
			return nil, nil, desired, err
		}
		desired.Parameters = mergeParameters(in.Parameters, *req.Parameters)
	}
	if req.MaintenanceInfo != nil || target != current {
		desired.MaintenanceVersion = target.maintenanceVersion()
	}
	return current, target, desired, nil
}

// retiredPlanUpdate works out an update of instance in that keeps its
// plan when that plan has left the catalogue. Without the plan there is
// no schema to check parameters against, no config for the driver and
// no maintenance version to move to, so such an update may change only
// the context, which platforms send on their own (a namespace or space
// renamed); asking for more is refused with 422, which OSB 2.17 gives to
// a change that is not supported. Moving the instance to a plan of the
// catalogue is the way on.
func retiredPlanUpdate(in *instance, req *updateRequest) (opRequest, error) {
	desired := opRequest{PlanID: in.PlanID, Parameters: in.Parameters, MaintenanceVersion: in.MaintenanceVersion}
	if req.Parameters != nil && !sameJSON(mergeParameters(in.Parameters, *req.Parameters), in.Parameters) {
		return desired, errPlanNotOffered(in)
	}
	if req.MaintenanceInfo != nil && req.MaintenanceInfo.Version != in.MaintenanceVersion {
		return desired, errPlanNotOffered(in)
	}
	return desired, nil
}

// mergeParameters is an instance's parameters with an update's laid over
// them, as OSB has it: parameters the update does not name keep their
// values.
func mergeParameters(have, update map[string]any) map[string]any {
	merged := maps.Clone(have)
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, update)
	return merged
}

// deprovision handles DELETE /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#deprovisioning).
func (b *Broker) deprovision(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("instance_id")
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
		in, err := lockInstance(ctx, tx, id)
		if errors.Is(err, errNoRow) {
			gone = true
			return nil
		}
		if err != nil {
			return err
		}
		running, err := optional(runningOperation(ctx, tx, id, ""))
		if err != nil {
			return err
		}
		if running != nil {
			if running.Kind == kindDeprovision && async {
				replay = running
				return nil
			}
			return errConcurrency("Service Instance")
		}
		if busy, err := bindingsBusy(ctx, tx, id); err != nil || busy {
			if err != nil {
				return err
			}
			return errConcurrency("Service Instance")
		}
		plan, _ := b.catalog.Plan(in.PlanID)
		if plan != nil && plan.AsyncRequired && !async {
			return errAsyncRequired()
		}
		op = b.newOperation(c, kindDeprovision, id, "", async, opRequest{})
		return b.enqueue(ctx, tx, op, plan)
	})
	if err != nil {
		return err
	}
	return b.deleteAnswer(c, op, replay, gone, async)
}

// deleteAnswer answers a deprovision or an unbind once its transaction has
// run: 410 when there was nothing to delete, 202 for an operation under way
// (the one a repeated request finds, or the new asynchronous one), and
// otherwise the outcome of running op now.
func (b *Broker) deleteAnswer(c echo.Context, op, replay *operation, gone, async bool) error {
	switch {
	case gone:
		return c.JSON(http.StatusGone, map[string]any{})
	case replay != nil:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": replay.ID})
	case async:
		return c.JSON(http.StatusAccepted, map[string]any{"operation": op.ID})
	}
	if _, err := b.runSync(c.Request().Context(), op); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{})
}

// getInstance handles GET /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#fetching-a-service-instance).
func (b *Broker) getInstance(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("instance_id")
	if err := optionalQuery(c, "service_id", "plan_id"); err != nil {
		return err
	}
	in, err := getInstance(ctx, b.pool, id)
	if errors.Is(err, errNoRow) {
		return errNotFound("Service instance %s does not exist.", id)
	}
	if err != nil {
		return err
	}
	if svc, ok := b.catalog.ServiceByID(in.ServiceID); ok && !svc.InstancesRetrievable {
		return errBadRequest("Instances of service %s are not retrievable.", svc.Name)
	}
	if in.State == instProvisioning {
		return errNotFound("Service instance %s is being provisioned.", id)
	}
	running, err := optional(runningOperation(ctx, b.pool, id, ""))
	if err != nil {
		return err
	}
	if running != nil && running.Kind == kindUpdate {
		return errConcurrency("Service Instance")
	}
	body := map[string]any{"service_id": in.ServiceID, "plan_id": in.PlanID}
	if in.DashboardURL != "" {
		body["dashboard_url"] = in.DashboardURL
	}
	if in.Parameters != nil {
		body["parameters"] = in.Parameters
	}
	if in.MaintenanceVersion != "" {
		body["maintenance_info"] = map[string]any{"version": in.MaintenanceVersion}
	}
	return c.JSON(http.StatusOK, body)
}

// instanceLastOperation handles GET .../last_operation for instances
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#polling-last-operation-for-service-instances).
func (b *Broker) instanceLastOperation(c echo.Context) error {
	return b.lastOperation(c, c.Param("instance_id"), "", kindDeprovision)
}

func (b *Broker) lastOperation(c echo.Context, instanceID, bindingID, deleteKind string) error {
	ctx := c.Request().Context()
	if err := optionalQuery(c, "service_id", "plan_id", "operation"); err != nil {
		return err
	}
	var op *operation
	var err error
	if name := c.QueryParam("operation"); name != "" {
		op, err = getOperation(ctx, b.pool, name)
		if err == nil && (op.InstanceID != instanceID || op.BindingID != bindingID) {
			err = errNoRow
		}
	} else {
		op, err = lastOperation(ctx, b.pool, instanceID, bindingID)
	}
	if errors.Is(err, errNoRow) {
		if bindingID != "" {
			return errNotFound("Service binding %s has no such operation.", bindingID)
		}
		return errNotFound("Service instance %s has no such operation.", instanceID)
	}
	if err != nil {
		return err
	}
	if op, err = b.settleStranded(ctx, op); err != nil {
		return err
	}
	if op.Kind == deleteKind && op.State == stateSucceeded {
		return c.JSON(http.StatusGone, map[string]any{})
	}
	body := map[string]any{"state": op.State}
	if op.Description != "" {
		body["description"] = op.Description
	}
	if op.State == stateFailed && bindingID == "" && (op.Kind == kindUpdate || op.Kind == kindDeprovision) {
		if op.InstanceUsable != nil {
			body["instance_usable"] = *op.InstanceUsable
		}
		if op.UpdateRepeatable != nil && op.Kind == kindUpdate {
			body["update_repeatable"] = *op.UpdateRepeatable
		}
	}
	if op.State == stateInProgress {
		if after := retryAfter(time.Since(op.CreatedAt)); after != "" {
			c.Response().Header().Set("Retry-After", after)
		}
	}
	return c.JSON(http.StatusOK, body)
}

// retryAfter is the Retry-After of a last_operation answer for an
// operation running for age. The header counts whole seconds, and most
// operations here finish within one: a young operation gets none, so the
// platform polls at its own pace; an older one asks for a quarter of its
// age, up to 30 s.
func retryAfter(age time.Duration) string {
	if age < 4*time.Second {
		return ""
	}
	return strconv.Itoa(int(min(age/4, 30*time.Second) / time.Second))
}

// planOf finds a plan of a service, or answers 400.
func (b *Broker) planOf(serviceID, planID string) (*Plan, error) {
	if _, ok := b.catalog.ServiceByID(serviceID); !ok {
		return nil, errBadRequest("service_id: %q is not a service of this broker", serviceID)
	}
	p, ok := b.catalog.Plan(planID)
	if !ok || p.service.ID != serviceID {
		return nil, errBadRequest("plan_id: %q is not a plan of service %q", planID, serviceID)
	}
	return p, nil
}

// optional turns errNoRow into a nil result.
func optional[T any](v *T, err error) (*T, error) {
	if errors.Is(err, errNoRow) {
		return nil, nil
	}
	return v, err
}

// newOperation starts an operation record for this request.
func (b *Broker) newOperation(c echo.Context, kind, instanceID, bindingID string, async bool, req opRequest) *operation {
	origin := originOf(c)
	return &operation{
		ID: newID(kind), InstanceID: instanceID, BindingID: bindingID, Kind: kind,
		State: stateInProgress, Async: async, Request: req,
		Platform: origin.Platform, Identity: origin.Value,
		RequestIdentity: c.Request().Header.Get("X-Broker-API-Request-Identity"),
	}
}
