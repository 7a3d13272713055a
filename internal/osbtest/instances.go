package osbtest

import (
	"fmt"
	"maps"
	"net/http"
)

// provision handles PUT /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#provisioning).
func (b *Broker) provision(r *http.Request, body []byte, f *Failure) response {
	id := r.PathValue("instance_id")
	accepts, res, ok := acceptsIncomplete(r)
	if !ok {
		return res
	}
	var req struct {
		ServiceID        string           `json:"service_id"`
		PlanID           string           `json:"plan_id"`
		OrganizationGUID string           `json:"organization_guid"`
		SpaceGUID        string           `json:"space_guid"`
		Context          map[string]any   `json:"context"`
		Parameters       map[string]any   `json:"parameters"`
		MaintenanceInfo  *MaintenanceInfo `json:"maintenance_info"`
	}
	if err := decode(body, &req); err != nil {
		return badRequest("%v", err)
	}
	if m := missing("service_id", req.ServiceID, "plan_id", req.PlanID,
		"organization_guid", req.OrganizationGUID, "space_guid", req.SpaceGUID); m != "" {
		return badRequest("missing required fields: %s", m)
	}
	p, res, ok := b.plan(req.ServiceID, req.PlanID)
	if !ok {
		return res
	}
	if res, ok := checkMaintenance(p.plan, req.MaintenanceInfo); !ok {
		return res
	}
	async, res, ok := b.async(p.plan, accepts, f)
	if !ok {
		return res
	}
	if in := b.instances[id]; in != nil {
		same := in.ServiceID == req.ServiceID && in.PlanID == req.PlanID &&
			in.OrganizationGUID == req.OrganizationGUID && in.SpaceGUID == req.SpaceGUID &&
			sameJSON(in.Parameters, req.Parameters)
		switch {
		case !same:
			return conflict("Service instance %s already exists with different attributes.", id)
		case in.State == StateCreating && accepts:
			return accepted(in.last())
		case in.State == StateReady:
			return reply(http.StatusOK, empty())
		case in.State == StateFailed:
			return conflict("Service instance %s exists but its provision failed; deprovision it first.", id)
		default:
			return concurrencyError("Service Instance")
		}
	}
	in := &instance{Instance: Instance{
		ID: id, ServiceID: req.ServiceID, PlanID: req.PlanID,
		OrganizationGUID: req.OrganizationGUID, SpaceGUID: req.SpaceGUID,
		Parameters: req.Parameters, Context: req.Context, MaintenanceInfo: p.plan.MaintenanceInfo,
		State: StateReady,
	}}
	op := b.newOperation(opProvision, async, f)
	in.ops = []*operation{op}
	b.instances[id] = in
	delete(b.goneInstances, id)
	if async {
		in.State = StateCreating
		return accepted(op)
	}
	return reply(http.StatusCreated, empty())
}

// update handles PATCH /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#updating-a-service-instance).
// Parameters are merged into the instance's, key by key.
func (b *Broker) update(r *http.Request, body []byte, f *Failure) response {
	id := r.PathValue("instance_id")
	accepts, res, ok := acceptsIncomplete(r)
	if !ok {
		return res
	}
	var req struct {
		ServiceID       string           `json:"service_id"`
		PlanID          string           `json:"plan_id"`
		Context         map[string]any   `json:"context"`
		Parameters      *map[string]any  `json:"parameters"` // nil: absent, change nothing
		MaintenanceInfo *MaintenanceInfo `json:"maintenance_info"`
	}
	if err := decode(body, &req); err != nil {
		return badRequest("%v", err)
	}
	if req.ServiceID == "" {
		return badRequest("missing required fields: service_id")
	}
	in := b.instances[id]
	if in == nil {
		return notFound("Service instance %s does not exist.", id)
	}
	if req.ServiceID != in.ServiceID {
		return badRequest("service_id: %q is not the service of instance %s", req.ServiceID, id)
	}
	current := b.plans[in.PlanID]
	target := current
	if req.PlanID != "" && req.PlanID != in.PlanID {
		if current != nil && !current.updateable() {
			return reply(http.StatusUnprocessableEntity, map[string]any{
				"error":             "PlanChangeNotSupported",
				"description":       fmt.Sprintf("The plan of instance %s cannot be changed.", id),
				"update_repeatable": false,
			})
		}
		if target, res, ok = b.plan(in.ServiceID, req.PlanID); !ok {
			return res
		}
	}
	var targetPlan *Plan
	if target != nil {
		targetPlan = target.plan
	}
	if req.MaintenanceInfo != nil {
		if res, ok := checkMaintenance(targetPlan, req.MaintenanceInfo); !ok {
			return res
		}
	}
	planID, params, maint := in.PlanID, in.Parameters, in.MaintenanceInfo
	if targetPlan != nil {
		planID = targetPlan.ID
		if req.MaintenanceInfo != nil || planID != in.PlanID {
			maint = targetPlan.MaintenanceInfo
		}
	}
	if req.Parameters != nil {
		params = maps.Clone(in.Parameters)
		if params == nil {
			params = map[string]any{}
		}
		maps.Copy(params, *req.Parameters)
	}
	switch in.State {
	case StateUpdating:
		// A re-sent PATCH gets 202 while the same update runs.
		if op := in.last(); accepts && op.planID == planID && sameJSON(op.params, params) {
			return accepted(op)
		}
		return concurrencyError("Service Instance")
	case StateCreating, StateDeleting:
		return concurrencyError("Service Instance")
	case StateFailed:
		return osbError(http.StatusUnprocessableEntity, "", "Service instance %s failed to provision; deprovision it.", id)
	}
	async, res, ok := b.async(targetPlan, accepts, f)
	if !ok {
		return res
	}
	op := b.newOperation(opUpdate, async, f)
	op.planID, op.params, op.maint = planID, params, maint
	in.ops = append(in.ops, op)
	if req.Context != nil {
		in.Context = req.Context
	}
	if async {
		in.State = StateUpdating
		return accepted(op)
	}
	in.PlanID, in.Parameters, in.MaintenanceInfo = planID, params, maint
	return reply(http.StatusOK, empty())
}

// deprovision handles DELETE /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#deprovisioning).
// Deleting an instance that is being provisioned halts the provision. The
// instance's bindings are left alone: platforms must unbind first.
func (b *Broker) deprovision(r *http.Request, _ []byte, f *Failure) response {
	id := r.PathValue("instance_id")
	accepts, res, ok := acceptsIncomplete(r)
	if !ok {
		return res
	}
	q := r.URL.Query()
	if m := missing("service_id", q.Get("service_id"), "plan_id", q.Get("plan_id")); m != "" {
		return badRequest("missing required query parameters: %s", m)
	}
	in := b.instances[id]
	if in == nil {
		return reply(http.StatusGone, empty())
	}
	if q.Get("service_id") != in.ServiceID {
		return badRequest("service_id: %q is not the service of instance %s", q.Get("service_id"), id)
	}
	switch in.State {
	case StateDeleting:
		if accepts {
			return accepted(in.last())
		}
		return concurrencyError("Service Instance")
	case StateUpdating:
		return concurrencyError("Service Instance")
	}
	async, res, ok := b.async(b.planOf(in.PlanID), accepts, f)
	if !ok {
		return res
	}
	creation := in.last()
	halted := halt(creation)
	op := b.newOperation(opDeprovision, async, f)
	in.ops = append(in.ops, op)
	if async {
		in.State = StateDeleting
		return accepted(op)
	}
	delete(b.instances, id)
	if halted {
		// Polls now say that the provision failed.
		b.goneInstances[id] = creation
	}
	return reply(http.StatusOK, empty())
}

// fetchInstance handles GET /v2/service_instances/:instance_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#fetching-a-service-instance).
func (b *Broker) fetchInstance(r *http.Request, _ []byte, _ *Failure) response {
	id := r.PathValue("instance_id")
	in := b.instances[id]
	switch {
	case in == nil || in.State == StateCreating || in.State == StateFailed:
		return notFound("Service instance %s does not exist.", id)
	case in.State == StateUpdating:
		return concurrencyError("Service Instance")
	}
	body := map[string]any{"service_id": in.ServiceID, "plan_id": in.PlanID}
	if in.Parameters != nil {
		body["parameters"] = in.Parameters
	}
	if in.MaintenanceInfo != nil {
		body["maintenance_info"] = in.MaintenanceInfo
	}
	return reply(http.StatusOK, body)
}

// lastOperation handles GET /v2/service_instances/:instance_id/last_operation
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#polling-last-operation-for-service-instances).
// An instance removed by an asynchronous deprovision answers 410 Gone from
// then on; one whose provision a synchronous deprovision halted answers that
// the provision failed.
func (b *Broker) lastOperation(r *http.Request, _ []byte, _ *Failure) response {
	id := r.PathValue("instance_id")
	in := b.instances[id]
	if in == nil {
		switch op := b.goneInstances[id]; {
		case op == nil:
			return notFound("Service instance %s does not exist.", id)
		case op.kind == opDeprovision:
			return reply(http.StatusGone, empty())
		default:
			return b.pollAnswer(op)
		}
	}
	op, res, ok := findOperation(in.ops, r)
	if !ok {
		return res
	}
	if b.advance(op) {
		b.finishInstanceOperation(in, op)
	}
	return b.pollAnswer(op)
}

// finishInstanceOperation applies the end of an asynchronous operation.
func (b *Broker) finishInstanceOperation(in *instance, op *operation) {
	ok := op.state == succeeded
	switch op.kind {
	case opProvision:
		in.State = StateReady
		if !ok {
			in.State = StateFailed
		}
	case opUpdate:
		in.State = StateReady
		if ok {
			in.PlanID, in.Parameters, in.MaintenanceInfo = op.planID, op.params, op.maint
		}
	case opDeprovision:
		in.State = StateReady
		if ok {
			delete(b.instances, in.ID)
			b.goneInstances[in.ID] = op
		}
	}
}
