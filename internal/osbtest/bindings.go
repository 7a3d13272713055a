package osbtest

import (
	"cmp"
	"fmt"
	"net/http"
	"reflect"
)

// bind handles PUT /v2/service_instances/:instance_id/service_bindings/:binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#binding),
// including rotation with predecessor_binding_id.
func (b *Broker) bind(r *http.Request, body []byte, f *Failure) response {
	key := bindingKey{r.PathValue("instance_id"), r.PathValue("binding_id")}
	accepts, res, ok := acceptsIncomplete(r)
	if !ok {
		return res
	}
	var req struct {
		ServiceID            string         `json:"service_id"`
		PlanID               string         `json:"plan_id"`
		Context              map[string]any `json:"context"`
		AppGUID              string         `json:"app_guid"`
		BindResource         map[string]any `json:"bind_resource"`
		Parameters           map[string]any `json:"parameters"`
		PredecessorBindingID string         `json:"predecessor_binding_id"`
	}
	if err := decode(body, &req); err != nil {
		return badRequest("%v", err)
	}
	in := b.instances[key.instance]
	if in == nil {
		return notFound("Service instance %s does not exist.", key.instance)
	}
	if req.PredecessorBindingID != "" {
		// A rotation request needs only the predecessor.
		req.ServiceID = cmp.Or(req.ServiceID, in.ServiceID)
		req.PlanID = cmp.Or(req.PlanID, in.PlanID)
	}
	if m := missing("service_id", req.ServiceID, "plan_id", req.PlanID); m != "" {
		return badRequest("missing required fields: %s", m)
	}
	if req.ServiceID != in.ServiceID {
		return badRequest("service_id: %q is not the service of instance %s", req.ServiceID, key.instance)
	}
	p, res, ok := b.plan(req.ServiceID, req.PlanID)
	if !ok {
		return res
	}
	if !p.bindable() {
		return badRequest("plan_id: plan %s is not bindable", req.PlanID)
	}
	params := req.Parameters
	if req.PredecessorBindingID != "" {
		if !p.plan.BindingRotatable {
			return badRequest("predecessor_binding_id: plan %s is not binding_rotatable", req.PlanID)
		}
		pred := b.bindings[bindingKey{key.instance, req.PredecessorBindingID}]
		if pred == nil || pred.State != StateReady {
			return badRequest("predecessor_binding_id: instance %s has no binding %s", key.instance, req.PredecessorBindingID)
		}
		params = pred.Parameters
	}
	appGUID := req.AppGUID
	if g, ok := req.BindResource["app_guid"].(string); ok && g != "" {
		appGUID = g
	}
	async, res, ok := b.async(p.plan, accepts, f)
	if !ok {
		return res
	}
	if bd := b.bindings[key]; bd != nil {
		same := bd.ServiceID == req.ServiceID && bd.PlanID == req.PlanID && bd.AppGUID == appGUID &&
			sameJSON(bd.Parameters, params) && reflect.DeepEqual(bd.BindResource["route"], req.BindResource["route"])
		switch {
		case !same:
			return conflict("Service binding %s already exists with different attributes.", key.binding)
		case bd.State == StateCreating && accepts:
			return accepted(bd.last())
		case bd.State == StateReady:
			return reply(http.StatusOK, bindingBody(bd, false))
		case bd.State == StateFailed:
			return conflict("Service binding %s exists but its creation failed; unbind it first.", key.binding)
		default:
			return concurrencyError("Service Binding")
		}
	}
	switch in.State {
	case StateCreating, StateDeleting:
		return concurrencyError("Service Instance")
	case StateFailed:
		return osbError(http.StatusUnprocessableEntity, "", "Service instance %s failed to provision.", key.instance)
	}
	creds := b.opts.credentials(key.instance, key.binding)
	bd := &binding{Binding: Binding{
		ID: key.binding, InstanceID: key.instance, ServiceID: req.ServiceID, PlanID: req.PlanID,
		AppGUID: appGUID, BindResource: req.BindResource, Context: req.Context, Parameters: params,
		Credentials: creds, Endpoints: endpoints(creds), State: StateReady,
	}}
	op := b.newOperation(opBind, async, f)
	bd.ops = []*operation{op}
	b.bindings[key] = bd
	delete(b.goneBindings, key)
	if async {
		bd.State = StateCreating
		return accepted(op)
	}
	return reply(http.StatusCreated, bindingBody(bd, false))
}

// endpoints are the binding endpoints for credentials with a host and port.
func endpoints(creds map[string]any) []Endpoint {
	host, _ := creds["host"].(string)
	port, ok := creds["port"]
	if host == "" || !ok {
		return nil
	}
	return []Endpoint{{Host: host, Ports: []string{fmt.Sprint(port)}, Protocol: "tcp"}}
}

// bindingBody is the answer describing a binding; a fetch adds parameters.
func bindingBody(bd *binding, fetch bool) map[string]any {
	body := map[string]any{}
	if bd.Credentials != nil {
		body["credentials"] = bd.Credentials
	}
	if bd.Endpoints != nil {
		body["endpoints"] = bd.Endpoints
	}
	if fetch && bd.Parameters != nil {
		body["parameters"] = bd.Parameters
	}
	return body
}

// unbind handles DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#unbinding).
// Deleting a binding that is being created halts its creation.
func (b *Broker) unbind(r *http.Request, _ []byte, f *Failure) response {
	key := bindingKey{r.PathValue("instance_id"), r.PathValue("binding_id")}
	accepts, res, ok := acceptsIncomplete(r)
	if !ok {
		return res
	}
	q := r.URL.Query()
	if m := missing("service_id", q.Get("service_id"), "plan_id", q.Get("plan_id")); m != "" {
		return badRequest("missing required query parameters: %s", m)
	}
	bd := b.bindings[key]
	if bd == nil {
		return reply(http.StatusGone, empty())
	}
	if q.Get("service_id") != bd.ServiceID {
		return badRequest("service_id: %q is not the service of binding %s", q.Get("service_id"), key.binding)
	}
	if bd.State == StateDeleting {
		if accepts {
			return accepted(bd.last())
		}
		return concurrencyError("Service Binding")
	}
	async, res, ok := b.async(b.planOf(bd.PlanID), accepts, f)
	if !ok {
		return res
	}
	creation := bd.last()
	halted := halt(creation)
	op := b.newOperation(opUnbind, async, f)
	bd.ops = append(bd.ops, op)
	if async {
		bd.State = StateDeleting
		return accepted(op)
	}
	delete(b.bindings, key)
	if halted {
		b.goneBindings[key] = creation
	}
	return reply(http.StatusOK, empty())
}

// fetchBinding handles GET /v2/service_instances/:instance_id/service_bindings/:binding_id
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#fetching-a-service-binding).
func (b *Broker) fetchBinding(r *http.Request, _ []byte, _ *Failure) response {
	key := bindingKey{r.PathValue("instance_id"), r.PathValue("binding_id")}
	bd := b.bindings[key]
	if bd == nil || bd.State == StateCreating || bd.State == StateFailed {
		return notFound("Service binding %s does not exist.", key.binding)
	}
	return reply(http.StatusOK, bindingBody(bd, true))
}

// bindingLastOperation handles GET .../service_bindings/:binding_id/last_operation
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#polling-last-operation-for-service-bindings),
// with 410 Gone as for instances.
func (b *Broker) bindingLastOperation(r *http.Request, _ []byte, _ *Failure) response {
	key := bindingKey{r.PathValue("instance_id"), r.PathValue("binding_id")}
	bd := b.bindings[key]
	if bd == nil {
		switch op := b.goneBindings[key]; {
		case op == nil:
			return notFound("Service binding %s does not exist.", key.binding)
		case op.kind == opUnbind:
			return reply(http.StatusGone, empty())
		default:
			return b.pollAnswer(op)
		}
	}
	op, res, ok := findOperation(bd.ops, r)
	if !ok {
		return res
	}
	if b.advance(op) {
		ok := op.state == succeeded
		switch op.kind {
		case opBind:
			bd.State = StateReady
			if !ok {
				bd.State = StateFailed
			}
		case opUnbind:
			bd.State = StateReady
			if ok {
				delete(b.bindings, key)
				b.goneBindings[key] = op
			}
		}
	}
	return b.pollAnswer(op)
}
