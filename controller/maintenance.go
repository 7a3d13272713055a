package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// MaintenanceInfoConflict: the broker says the maintenance_info a request
// carried is not the plan's (OSB 2.17, Error Codes): Bindery's copy of the
// catalogue is stale. The platform SHOULD fetch the catalogue then, and
// the engine does at once (the catalog's relist; one at a time per
// broker from this engine). A provision is sent again as soon as the
// fetch brings the plan a new maintenance_info, its backoff lifted; an
// update is not — sending the new version would start an upgrade nobody
// asked for — and fails saying that a maintenance upgrade is available,
// as Cloud Controller does.

// maintenanceConflict reports a broker's 422 MaintenanceInfoConflict.
func maintenanceConflict(err error) bool {
	var he *osb.HTTPError
	return errors.As(err, &he) && he.Status == http.StatusUnprocessableEntity && he.Code == "MaintenanceInfoConflict"
}

// maintenanceVersion is the plan's maintenance_info version, or "".
func maintenanceVersion(p *catalog.ServicePlan) string {
	if p == nil || p.Spec.MaintenanceInfo == nil {
		return ""
	}
	return p.Spec.MaintenanceInfo.Version
}

// provisionConflict records a provision the broker refused for its
// maintenance_info and fetches the broker's catalogue; the provision goes
// again once the plan's version changed.
func (c *Controller) provisionConflict(ctx context.Context, env *instanceEnv, err error) (result, error) {
	sent := maintenanceVersion(env.plan)
	c.refetchCatalogue(env, instanceKey(env.in.Namespace, env.in.ID), sent)
	msg := fmt.Sprintf("The broker refused maintenance_info version %q of %s (%v): its catalogue is being fetched again, and the provision is retried with the plan's new version.",
		sent, planName(env.plan), err)
	return c.instanceRetryable(ctx, env.in, catalog.OperationProvision, reasonMaintenance, msg, err)
}

// updateConflict fails an update the broker refused for its
// maintenance_info, for good, and fetches the broker's catalogue.
func (c *Controller) updateConflict(ctx context.Context, env *instanceEnv, err error) error {
	c.refetchCatalogue(env, objectKey{}, "")
	msg := fmt.Sprintf("Update call failed: the broker refused the maintenance_info of %s (%v). A maintenance upgrade is available: the broker's catalogue is being fetched again; the update is not retried, and the upgrade runs with the next update of the instance.",
		planName(env.plan), err)
	return c.instanceFailed(ctx, env.in, reasonMaintenance, msg, reasonMaintenance)
}

// refetchCatalogue fetches the catalogue of env's broker now, beside the
// workers; then, if the plan's maintenance_info is no longer sent, key is
// retried at once. The fetch forgets what the engine keeps of the broker's
// namespace at once, not when the feed brings it: the retry is queued
// now, and must not send the version the broker refused again.
func (c *Controller) refetchCatalogue(env *instanceEnv, key objectKey, sent string) {
	broker, ns, plan := env.broker.ID, env.plan.Namespace, env.plan.Name
	go func() {
		ctx := c.gates.ctx
		_, err, _ := c.refetches.Do(broker, func() (any, error) {
			_, err := c.store.Store.Relist(ctx, broker)
			c.store.Store.ForgetCached(ns)
			return nil, err
		})
		if err != nil {
			c.log.Warn("fetch a broker's catalogue after MaintenanceInfoConflict", "broker", env.broker.Name, "error", err)
		}
		if key == (objectKey{}) {
			return
		}
		p, err := c.store.Store.GetPlanIn(ctx, ns, plan)
		if err == nil && maintenanceVersion(p) != sent {
			c.gates.lift(key, "provision")
			c.queue.Add(key)
		}
	}()
}
