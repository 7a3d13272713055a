package broker_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/broker"
)

// retirePlan makes instance id's record name a plan the catalogue does
// not have, as it is after the broker restarts with a catalogue that
// dropped the instance's plan.
func retirePlan(t *testing.T, b *bundle, id string) string {
	t.Helper()
	retired := randomID("retired-plan")
	tag, err := b.pool.Exec(context.Background(), `UPDATE broker.instances SET plan_id = $2 WHERE id = $1`, id, retired)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("retire the plan of instance %s: %v (%d rows)", id, err, tag.RowsAffected())
	}
	return retired
}

// TestUpdateOfRetiredPlan: an update that names (or keeps) an instance's
// plan that has left the catalogue gets an OSB answer. A platform's
// context update goes through, since it asks nothing of the plan; a
// change of parameters or maintenance version is refused with 422, saying
// that the plan is no longer offered; a move to a plan of the catalogue
// takes the instance off the retired plan.
func TestUpdateOfRetiredPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := randomID("retired")
	path := "/v2/service_instances/" + id
	b.expect(b.do("PUT", path, provisionBody(planSmall, map[string]any{"statement_timeout_ms": 5000})), 201)
	retired := retirePlan(t, b, id)
	ctx := map[string]any{"platform": "kubernetes", "namespace": "default", "instance_name": "renamed"}

	for _, plan := range []string{retired, ""} {
		body := map[string]any{"service_id": serviceID, "context": ctx}
		if plan != "" {
			body["plan_id"] = plan
		}
		b.expect(b.do("PATCH", path, body), http.StatusOK)
		// The same parameters again change nothing either.
		body["parameters"] = map[string]any{"statement_timeout_ms": 5000}
		b.expect(b.do("PATCH", path, body), http.StatusOK)
		for name, change := range map[string]map[string]any{
			"parameters":       {"parameters": map[string]any{"statement_timeout_ms": 6000}},
			"maintenance_info": {"maintenance_info": map[string]any{"version": "2.0.0"}},
		} {
			body := map[string]any{"service_id": serviceID}
			if plan != "" {
				body["plan_id"] = plan
			}
			for k, v := range change {
				body[k] = v
			}
			r := b.expect(b.do("PATCH", path, body), http.StatusUnprocessableEntity)
			if r.str("error") != broker.CodePlanNotOffered || !strings.Contains(r.str("description"), "no longer offered") {
				t.Errorf("plan_id %q, %s changed: %s", plan, name, r.raw)
			}
		}
	}
	var stored string
	err := b.pool.QueryRow(context.Background(), `SELECT context->>'instance_name' FROM broker.instances WHERE id = $1`, id).Scan(&stored)
	if err != nil || stored != "renamed" {
		t.Errorf("context after the update: %q, %v", stored, err)
	}

	b.expect(b.do("PATCH", path, map[string]any{"service_id": serviceID, "plan_id": planStd}), http.StatusOK)
	if inst := b.expect(b.do("GET", path, nil), http.StatusOK); inst.str("plan_id") != planStd {
		t.Errorf("plan after moving off the retired one: %s", inst.raw)
	}
	b.expect(b.do("DELETE", path+q(planStd), nil), http.StatusOK)
	assertGone(t, id)
}

// panicking is a driver whose Provision panics, as a bug would.
type panicking struct{ broker.Driver }

func (panicking) Provision(context.Context, broker.InstanceRequest) (broker.ProvisionResult, error) {
	panic("a bug in the driver")
}

// TestPanicIsOSBError: a panic while serving a request is answered with
// the OSB 500 body, not a connection cut off, and the broker serves on.
func TestPanicIsOSBError(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.wrap = func(d broker.Driver) broker.Driver { return panicking{d} } })
	r := b.expect(b.do("PUT", "/v2/service_instances/"+randomID("panic"), provisionBody(planSmall, nil)), http.StatusInternalServerError)
	if r.str("error") != "InternalError" || r.str("description") == "" || strings.Contains(string(r.raw), "a bug in the driver") {
		t.Errorf("answer to a panic: %s", r.raw)
	}
	if !strings.Contains(b.logs.String(), "a bug in the driver") {
		t.Error("the panic is not logged")
	}
	b.expect(b.do("GET", "/v2/catalog", nil), http.StatusOK)
}
