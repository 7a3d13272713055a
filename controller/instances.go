package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// AbandonAnnotation on an instance or a binding (value "true") makes its
// deletion skip the broker (catalog.AbandonAnnotation).
const AbandonAnnotation = catalog.AbandonAnnotation

// CascadeAnnotation on an instance (value "true") makes its deletion
// delete its bindings first instead of waiting for them
// (catalog.CascadeAnnotation).
const CascadeAnnotation = catalog.CascadeAnnotation

// instanceEnv is what a reconcile of an instance works with.
type instanceEnv struct {
	in     *catalog.Instance
	class  *catalog.ServiceClass
	plan   *catalog.ServicePlan
	broker *catalog.Broker
	client *osb.Client
}

// reconcileInstance computes the next step for an instance from its spec
// and status and takes it. It returns when to look again (the zero result:
// only on a change) or an error to retry with backoff.
func (c *Controller) reconcileInstance(ctx context.Context, key objectKey) (result, error) {
	in, err := c.store.GetInstance(ctx, key.id)
	if errors.Is(err, catalog.ErrNotFound) || err == nil && in.Namespace != key.namespace {
		return result{}, nil
	}
	if err != nil {
		return result{}, err
	}
	c.named(ctx, "instance", in.Namespace, in.Name)
	env := &instanceEnv{in: in}
	if in.DeletionTimestamp != nil && in.Annotations[AbandonAnnotation] == "true" {
		return result{}, c.finalizeInstance(ctx, in, catalog.EventRecord{Type: "Warning", Reason: reasonAbandoned,
			Message: "Removed without deprovisioning: the instance was abandoned."})
	}
	if in.DeletionTimestamp != nil && in.Status.DeprovisionStatus != catalog.DeprovisionRequired && !resolved(in) {
		return result{}, c.finalizeInstance(ctx, in, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was provisioned."})
	}
	if err := c.resolveInstance(ctx, env); err != nil {
		if in.DeletionTimestamp != nil && in.Status.DeprovisionStatus != catalog.DeprovisionRequired {
			return result{}, c.finalizeInstance(ctx, in, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was provisioned."})
		}
		if r, ok := catalog.AsReference(err); ok {
			// What the instance names is not offered (yet): a change to the
			// catalogue wakes it up. What it named and is gone since is
			// looked for again after the backoff.
			werr := c.instanceWaiting(ctx, in, r.Reason, r.Message)
			if werr == nil && errors.Is(err, errVanished) {
				werr = err
			}
			return result{}, werr
		}
		if q, ok := catalog.AsQuota(err); ok {
			// Its plan, resolved now, is over a quota of the namespace: it
			// waits, unresolved, for room, looked at again now and then.
			return after(quotaRecheck), c.instanceWaiting(ctx, in, catalog.ReasonQuotaExceeded, q.Error())
		}
		if v, ok := catalog.AsValidation(err); ok {
			return result{}, c.instanceFailed(ctx, in, reasonWithParameters, v.Error(), reasonWithParameters)
		}
		return result{}, err
	}
	in = env.in
	st := &in.Status
	// Each step waits for its backoff, if its last attempt failed: the
	// status writes that woke the instance up do not cut it short.
	switch {
	case st.AsyncOpInProgress:
		if wait := c.retryWait(ctx, st.Retries, retryPoll, in.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.pollInstance(ctx, env)
	case in.DeletionTimestamp != nil || st.OrphanMitigationInProgress:
		if wait := c.retryWait(ctx, st.Retries, catalog.OperationDeprovision, in.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.deprovision(ctx, env)
	case st.ProvisionStatus != catalog.ProvisionStatusProvisioned:
		if terminal(in.Status.Conditions, st.ObservedGeneration, in.Generation) {
			return result{}, nil
		}
		if wait := c.retryWait(ctx, st.Retries, catalog.OperationProvision, in.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.provision(ctx, env)
	case st.ReconciledGeneration < in.Generation:
		if terminal(in.Status.Conditions, st.ObservedGeneration, in.Generation) {
			return result{}, nil
		}
		if wait := c.retryWait(ctx, st.Retries, catalog.OperationUpdate, in.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.update(ctx, env)
	}
	return result{}, nil
}

// terminal reports a failure that retrying the same generation cannot fix.
func terminal(conds []catalog.Condition, observed, generation int64) bool {
	f, ok := catalog.FindCondition(conds, catalog.ConditionFailed)
	return ok && f.Status == catalog.ConditionTrue && observed == generation
}

// resolved reports whether the instance's class and plan are resolved.
func resolved(in *catalog.Instance) bool { return in.Resolved() }

// quotaRecheck is how often an instance whose plan a quota refuses looks
// for room.
const quotaRecheck = 30 * time.Second

// errVanished marks a reference that was resolved and whose object is gone
// since (a broker deregistered): no change of the feed announces its
// return, so it is looked for again after the backoff.
var errVanished = errors.New("a referenced object is gone")

// resolveInstance resolves the class and plan of an instance recorded
// before they were offered (in the catalog, which records them), then
// loads them, their broker and its client. What is still missing comes back
// as a *catalog.ReferenceError.
func (c *Controller) resolveInstance(ctx context.Context, env *instanceEnv) error {
	if !resolved(env.in) {
		in, err := c.store.ResolveInstance(ctx, env.in.ID)
		if in != nil {
			env.in = in
		}
		if err != nil {
			return err
		}
	}
	return c.load(ctx, env)
}

// load reads the class, plan and broker of a resolved instance.
func (c *Controller) load(ctx context.Context, env *instanceEnv) error {
	in := env.in
	if !resolved(in) {
		return fmt.Errorf("%s has no resolved class and plan", instanceName(in))
	}
	classRef, planRef, ns := in.Refs()
	kinds := scopedKinds(ns)
	var err error
	if env.plan, err = c.getPlan(ctx, ns, planRef.Name); errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("%w: %w", errVanished, &catalog.ReferenceError{Reason: reasonNonexistentPlan,
			Message: fmt.Sprintf("References a non-existent %s %q", kinds.plan, planRef.Name)})
	} else if err != nil {
		return fmt.Errorf("plan %s: %w", planRef.Name, err)
	}
	if env.class, err = c.getClass(ctx, ns, classRef.Name); errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("%w: %w", errVanished, &catalog.ReferenceError{Reason: reasonNonexistentClass,
			Message: fmt.Sprintf("References a non-existent %s %q", kinds.class, classRef.Name)})
	} else if err != nil {
		return fmt.Errorf("class %s: %w", classRef.Name, err)
	}
	env.broker, env.client, err = c.client(ctx, ns, env.plan.Spec.BrokerName())
	if errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("%w: %w", errVanished, &catalog.ReferenceError{Reason: reasonNonexistentBkr,
			Message: fmt.Sprintf("References a non-existent %s %q", kinds.broker, env.plan.Spec.BrokerName())})
	}
	return err
}

// instanceParked: the instance waits in its broker's line for a slot
// (errBrokerBusy), or for the broker's breaker to close (an
// *unavailableError, which Ready says, once).
func (c *Controller) instanceParked(ctx context.Context, in *catalog.Instance, err error) (result, error) {
	var ue *unavailableError
	if !errors.As(err, &ue) {
		return result{}, nil
	}
	if cond, _ := catalog.FindCondition(in.Status.Conditions, catalog.ConditionReady); cond.Reason == reasonWaitBroker && cond.Message == ue.msg {
		return result{}, nil
	}
	return result{}, c.instanceWaiting(ctx, in, reasonWaitBroker, ue.msg)
}

// instanceWaiting says in the Ready condition what the instance waits for.
func (c *Controller) instanceWaiting(ctx context.Context, in *catalog.Instance, reason, msg string) error {
	now := c.now().UTC()
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		setReady(&in.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg})
	return err
}

// identity is the originating identity of the object's requester.
func identity(u *catalog.UserInfo) *osb.Identity {
	if u == nil || u.Username == "" {
		return nil
	}
	v := map[string]any{"username": u.Username}
	if u.UID != "" {
		v["uid"] = u.UID
	}
	if len(u.Groups) > 0 {
		v["groups"] = u.Groups
	}
	if len(u.Extra) > 0 {
		v["extra"] = u.Extra
	}
	return &osb.Identity{Platform: "kubernetes", Value: v}
}

func checksum(params map[string]any) string {
	if params == nil {
		return ""
	}
	raw, _ := json.Marshal(params)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// parameters are the instance's parameters, with those from Secrets merged
// in.
func (c *Controller) parameters(ctx context.Context, namespace string, raw json.RawMessage, from []catalog.ParametersFrom) (map[string]any, error) {
	var params map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, fmt.Errorf("spec.parameters: %w", err)
		}
	}
	if len(from) == 0 {
		return params, nil
	}
	more, err := c.parametersFrom(ctx, namespace, from)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	for k, v := range more {
		if _, dup := params[k]; dup {
			return nil, fmt.Errorf("parameter %q is given both in spec.parameters and in spec.parametersFrom", k)
		}
		params[k] = v
	}
	return params, nil
}

func (c *Controller) requestContext(ns, name string) map[string]any {
	return map[string]any{"platform": "kubernetes", "namespace": ns, "clusterid": c.clusterID, "instance_name": name}
}

// provision sends the provision request. The status says a deprovision is
// required before the request leaves, so a crash during the call cannot
// leave an orphan behind.
func (c *Controller) provision(ctx context.Context, env *instanceEnv) (result, error) {
	in := env.in
	if env.plan.Status.RemovedFromBrokerCatalog {
		// The broker may offer it again: looked at again after the backoff.
		msg := planName(env.plan) + " has been deleted; cannot provision."
		if err := c.instanceWaiting(ctx, in, reasonDeletedPlan, msg); err != nil {
			return result{}, err
		}
		return result{}, errors.New(msg)
	}
	params, err := c.parameters(ctx, in.Namespace, in.Spec.Parameters, in.Spec.ParametersFrom)
	if err != nil {
		return result{}, c.instanceFailed(ctx, in, reasonWithParameters, err.Error(), permanentUnless(errors.Is(err, errKube), reasonWithParameters))
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.instanceParked(ctx, in, err)
	}
	now := c.now().UTC()
	props := new(catalog.PropertiesOf(env.plan))
	props.ParameterChecksum, props.UserInfo = checksum(params), in.Spec.UserInfo
	if env.plan.Spec.MaintenanceInfo != nil {
		props.MaintenanceInfoVersion = env.plan.Spec.MaintenanceInfo.Version
	}
	earlier := in.Status.DeprovisionStatus == catalog.DeprovisionRequired
	in, err = c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.CurrentOperation, st.OperationStartTime, st.InProgressProperties = catalog.OperationProvision, &now, props
		st.DeprovisionStatus = catalog.DeprovisionRequired
		st.ObservedGeneration = in.Generation
		removeCondition(&st.Conditions, catalog.ConditionFailed)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonProvisionInFlight, msgProvisionInFlight, now)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	req := &osb.ProvisionRequest{
		InstanceID: in.Spec.ExternalID, AcceptsIncomplete: true, Identity: identity(in.Spec.UserInfo),
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID,
		OrganizationGUID: c.clusterID, SpaceGUID: in.Namespace,
		Parameters: params, Context: c.requestContext(in.Namespace, in.Name),
	}
	if env.plan.Spec.MaintenanceInfo != nil {
		req.MaintenanceInfo = &osb.MaintenanceInfo{Version: env.plan.Spec.MaintenanceInfo.Version}
	}
	cctx, done := c.brokerCall(ctx, "provision")
	res, err := env.client.Provision(cctx, req)
	err = done(err)
	if err != nil {
		env.in = in
		return c.provisionFailed(ctx, env, err, earlier)
	}
	c.metrics.brokerCalls.WithLabelValues("provision", "ok").Inc()
	if res.Async {
		_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
			in.Status.AsyncOpInProgress, in.Status.LastOperation = true, res.Operation
			if res.DashboardURL != "" {
				in.Status.DashboardURL = res.DashboardURL
			}
			setReady(&in.Status.Conditions, catalog.ConditionFalse, reasonProvisioning, msgProvisioning, c.now().UTC())
			return nil
		}, catalog.EventRecord{Type: "Normal", Reason: reasonProvisioning, Message: msgProvisioning, Operation: catalog.OperationProvision})
		return after(c.accepted(in.ID, c.pollDelay(in.Status.OperationStartTime, 0, attemptWeight(in.Status.Retries, catalog.OperationProvision, in.Generation)))), err
	}
	return result{}, c.instanceSucceeded(ctx, in, catalog.OperationProvision, res.DashboardURL)
}

// provisionFailed applies the OSB orphan-mitigation table to a failed
// provision request: a 5xx, a timeout or a malformed 201 or 202 may have
// created something, so it is deprovisioned; 408 and other 4xx created
// nothing; a malformed 200 is a failure without orphan mitigation. Every
// retry waits for the backoff. earlier says an earlier attempt may have
// left something at the broker (refusalLeavesNothing).
func (c *Controller) provisionFailed(ctx context.Context, env *instanceEnv, err error, earlier bool) (result, error) {
	in := env.in
	c.metrics.brokerCalls.WithLabelValues("provision", "error").Inc()
	reason, msg := provisionFailure(env, err)
	var he *osb.HTTPError
	switch {
	case maintenanceConflict(err):
		return c.provisionConflict(ctx, env, err)
	case needsOrphanMitigation(err):
		return c.startInstanceOrphanMitigation(ctx, in, reason, msg, err)
	case malformed200(err):
		// The table's "200 with malformed response": a failure, and no
		// orphan mitigation. A 200 says the instance exists; the deletion
		// of this object still deprovisions it (DeprovisionRequired).
		return c.instanceRetryable(ctx, in, catalog.OperationProvision, reason, msg, err)
	case refusedForNow(err):
		return c.instanceRetryable(ctx, in, catalog.OperationProvision, reason, msg, err)
	case errors.As(err, &he):
		// 400, 409, other 422s: the broker refused; the same request will
		// be refused again.
		return result{}, c.instanceFailed(ctx, in, reason, msg, brokerFailureReason(env), func(st *catalog.InstanceStatus) {
			if refusalLeavesNothing(earlier) {
				st.DeprovisionStatus = catalog.DeprovisionNotRequired
			}
		})
	default:
		// The request did not reach the broker (connection refused): retry.
		return c.instanceRetryable(ctx, in, catalog.OperationProvision, reason, msg, err)
	}
}

// needsOrphanMitigation reports the failures of a provision or bind after
// which the broker may have created something, by OSB 2.17's
// orphan-mitigation table: a 5xx, a timeout, a 2xx other than 200/201/202,
// or a 201 (or 202) whose body is malformed — not a malformed 200, which
// the table calls a failure without orphan mitigation. (The table has no
// row for a malformed 202; it is treated as the 201's, since an accepted
// operation may be creating something.)
func needsOrphanMitigation(err error) bool {
	var he *osb.HTTPError
	var me *osb.MalformedError
	switch {
	case errors.As(err, &me):
		return me.Status != http.StatusOK
	case osb.IsTimeout(err):
		return true
	case errors.As(err, &he):
		return he.Status >= 500 || (he.Status >= 200 && he.Status < 300)
	}
	return false
}

// refusedForNow reports the 4xx answers that refuse a request for now,
// not for good, so that it is sent again after its backoff (or the
// broker's Retry-After, when longer) instead of failing until the spec
// changes: 408 (the request did not reach the broker in time), 429 Too
// Many Requests (the broker asks to be asked less often) and a
// ConcurrencyError (another operation on the object is in progress; OSB
// asks platforms to retry later, not at once). Like every 4xx they
// created nothing and are not orphan-mitigated (OSB 2.17, Orphan
// Mitigation).
func refusedForNow(err error) bool {
	var he *osb.HTTPError
	if !errors.As(err, &he) {
		return false
	}
	return he.Status == http.StatusRequestTimeout || he.Status == http.StatusTooManyRequests || he.Code == "ConcurrencyError"
}

// refusalLeavesNothing reports whether a provision or bind that the
// broker refused (a 4xx) leaves nothing at the broker for the object's
// deletion to remove. The refused request created nothing, but an earlier
// attempt of the same object may have: one answered with a malformed 200
// (OSB's table has no orphan mitigation for it), one whose answer never
// came, one cut short by a crash. Each of those leaves the status saying
// that a deprovision (or unbind) is required, as every attempt writes
// before its request leaves, and only a finished orphan mitigation or an
// earlier refusal says otherwise; so earlier, that status as the attempt
// found it, keeps it required. A 409 says that an object with this id
// exists at the broker, but not that it is this object's: on a first
// attempt it is someone else's (an abandoned instance's, or another
// platform's on a shared broker, since an externalID is unique only among
// Bindery's objects), and deleting this object must not remove it.
func refusalLeavesNothing(earlier bool) bool {
	return !earlier
}

// malformed200 reports a 200 whose body cannot be read.
func malformed200(err error) bool {
	var me *osb.MalformedError
	return errors.As(err, &me) && me.Status == http.StatusOK
}

// startInstanceOrphanMitigation records a failed provision that needs cleaning up:
// the deprovision follows at once (on the reconcile the status change
// triggers), the provision again after the backoff. As in Service
// Catalog, the OrphanMitigation condition carries the failure and Ready
// says that orphan mitigation started.
func (c *Controller) startInstanceOrphanMitigation(ctx context.Context, in *catalog.Instance, reason, msg string, cause error) (result, error) {
	now := c.now().UTC()
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress = true, false
		st.LastError = msg
		c.failedMitigated(&st.Retries, catalog.OperationProvision, in.Generation, cause)
		catalog.SetCondition(&st.Conditions, catalog.Condition{Type: catalog.ConditionOrphanMitigation, Status: catalog.ConditionTrue,
			Reason: reason, Message: msg}, now)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonStartingOrphanMitigation, msgStartingOrphanMitigation, now)
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: catalog.OperationProvision},
		catalog.EventRecord{Type: "Warning", Reason: reasonStartingOrphanMitigation, Message: msgStartingOrphanMitigation, Operation: catalog.OperationProvision})
	// The deprovision follows on the next reconcile, which the status
	// change triggers.
	return result{}, err
}

// instanceRetryable records a failure of op that is retried after the
// backoff, and looks again once it is over. Ready is False, or Unknown for
// a deprovision, as Service Catalog had it: the instance may still exist
// at the broker.
func (c *Controller) instanceRetryable(ctx context.Context, in *catalog.Instance, op, reason, msg string, cause error) (result, error) {
	now := c.now().UTC()
	status := catalog.ConditionFalse
	if op == catalog.OperationDeprovision {
		status = catalog.ConditionUnknown
	}
	var wait time.Duration
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.LastError = msg
		wait = c.failed(&st.Retries, op, in.Generation, cause)
		setReady(&st.Conditions, status, reason, msg+retrying(st.Retries, op), now)
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: op})
	if err != nil {
		return result{}, err
	}
	c.logger(ctx).Warn("broker call failed; retrying after backoff", "operation", op, "wait", wait, "error", cause)
	return after(wait), nil
}

// permanentUnless is the Failed reason of a failure, "" (not permanent)
// when retry says it is worth retrying.
func permanentUnless(retry bool, failedReason string) string {
	if retry {
		return ""
	}
	return failedReason
}

// instanceFailed records a failure in status: Ready False with reason and
// msg. A permanent one (failedReason not empty) adds the Failed condition
// and marks the generation as observed, so it is not retried until the
// spec changes; any other is retried with backoff.
func (c *Controller) instanceFailed(ctx context.Context, in *catalog.Instance, reason, msg, failedReason string, extra ...func(*catalog.InstanceStatus)) error {
	now := c.now().UTC()
	permanent := failedReason != ""
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.LastError, st.CurrentOperation, st.AsyncOpInProgress = msg, "", false
		st.OperationStartTime, st.InProgressProperties = nil, nil
		setReady(&st.Conditions, catalog.ConditionFalse, reason, msg, now)
		if permanent {
			st.ObservedGeneration = in.Generation
			setFailed(&st.Conditions, failedReason, msg, now)
		}
		for _, f := range extra {
			f(st)
		}
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: in.Status.CurrentOperation})
	if err != nil || permanent {
		return err
	}
	return errors.New(msg)
}

// instanceSucceeded records a finished provision or update.
func (c *Controller) instanceSucceeded(ctx context.Context, in *catalog.Instance, op, dashboard string) error {
	now := c.now().UTC()
	reason, msg := reasonProvisioned, msgProvisioned
	if op == catalog.OperationUpdate {
		reason, msg = reasonUpdated, msgUpdated
	}
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.ProvisionStatus = catalog.ProvisionStatusProvisioned
		st.DeprovisionStatus = catalog.DeprovisionRequired
		if st.InProgressProperties != nil {
			st.ExternalProperties = st.InProgressProperties
		}
		st.InProgressProperties, st.CurrentOperation, st.OperationStartTime = nil, "", nil
		st.AsyncOpInProgress, st.LastError = false, ""
		st.ReconciledGeneration = st.ObservedGeneration
		delete(st.Retries, op)
		if dashboard != "" {
			st.DashboardURL = dashboard
		}
		setReady(&st.Conditions, catalog.ConditionTrue, reason, msg, now)
		removeCondition(&st.Conditions, catalog.ConditionFailed)
		removeCondition(&st.Conditions, catalog.ConditionOrphanMitigation)
		return nil
	}, catalog.EventRecord{Type: "Normal", Reason: reason, Message: msg, Operation: op})
	return err
}

// update sends the changed plan, parameters or maintenance version.
func (c *Controller) update(ctx context.Context, env *instanceEnv) (result, error) {
	in := env.in
	params, err := c.parameters(ctx, in.Namespace, in.Spec.Parameters, in.Spec.ParametersFrom)
	if err != nil {
		return result{}, c.instanceFailed(ctx, in, reasonWithParameters, err.Error(), permanentUnless(errors.Is(err, errKube), reasonWithParameters))
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.instanceParked(ctx, in, err)
	}
	ext := in.Status.ExternalProperties
	now := c.now().UTC()
	props := new(catalog.PropertiesOf(env.plan))
	props.ParameterChecksum, props.UserInfo = checksum(params), in.Spec.UserInfo
	req := &osb.UpdateRequest{
		InstanceID: in.Spec.ExternalID, AcceptsIncomplete: true, Identity: identity(in.Spec.UserInfo),
		ServiceID: env.class.Spec.ExternalID, Context: c.requestContext(in.Namespace, in.Name),
	}
	if ext == nil || ext.PlanID() != env.plan.Spec.ExternalID {
		req.PlanID = env.plan.Spec.ExternalID
	}
	if ext != nil {
		req.PreviousValues = &osb.PreviousValues{PlanID: ext.PlanID()}
		if ext.MaintenanceInfoVersion != "" {
			req.PreviousValues.MaintenanceInfo = &osb.MaintenanceInfo{Version: ext.MaintenanceInfoVersion}
		}
	}
	if ext == nil || ext.ParameterChecksum != props.ParameterChecksum || in.Spec.UpdateRequests > 0 {
		req.Parameters = params
		if req.Parameters == nil {
			req.Parameters = map[string]any{}
		}
	}
	if mi := env.plan.Spec.MaintenanceInfo; mi != nil {
		props.MaintenanceInfoVersion = mi.Version
		if ext == nil || ext.MaintenanceInfoVersion != mi.Version {
			req.MaintenanceInfo = &osb.MaintenanceInfo{Version: mi.Version}
		}
	}
	in, err = c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.CurrentOperation, st.OperationStartTime, st.InProgressProperties = catalog.OperationUpdate, &now, props
		st.ObservedGeneration = in.Generation
		removeCondition(&st.Conditions, catalog.ConditionFailed)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonUpdateInFlight, msgUpdateInFlight, now)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	cctx, done := c.brokerCall(ctx, "update")
	res, err := env.client.Update(cctx, req)
	err = done(err)
	if err != nil {
		c.metrics.brokerCalls.WithLabelValues("update", "error").Inc()
		var he *osb.HTTPError
		if maintenanceConflict(err) {
			return result{}, c.updateConflict(ctx, env, err)
		}
		// An update is never orphan-mitigated. A 4xx is the broker's answer
		// to this spec, unless it asks to be asked later; anything else is
		// retried.
		if errors.As(err, &he) && he.Status >= 400 && he.Status < 500 && !refusedForNow(err) {
			reason, msg := updateFailure(err, false)
			return result{}, c.instanceFailed(ctx, in, reason, msg, reasonUpdateFailed)
		}
		reason, msg := updateFailure(err, true)
		return c.instanceRetryable(ctx, in, catalog.OperationUpdate, reason, msg, err)
	}
	c.metrics.brokerCalls.WithLabelValues("update", "ok").Inc()
	if res.Async {
		_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
			in.Status.AsyncOpInProgress, in.Status.LastOperation = true, res.Operation
			setReady(&in.Status.Conditions, catalog.ConditionFalse, reasonUpdating, msgUpdating, c.now().UTC())
			return nil
		}, catalog.EventRecord{Type: "Normal", Reason: reasonUpdating, Message: msgUpdating, Operation: catalog.OperationUpdate})
		return after(c.accepted(in.ID, c.pollDelay(in.Status.OperationStartTime, 0, attemptWeight(in.Status.Retries, catalog.OperationUpdate, in.Generation)))), err
	}
	return result{}, c.instanceSucceeded(ctx, in, catalog.OperationUpdate, res.DashboardURL)
}

// deprovision deletes the instance at the broker — after its bindings are
// gone — and removes it; or, for orphan mitigation, cleans up after a
// failed provision. A failed deprovision is retried, never forgotten.
func (c *Controller) deprovision(ctx context.Context, env *instanceEnv) (result, error) {
	in := env.in
	orphan := in.Status.OrphanMitigationInProgress && in.DeletionTimestamp == nil
	if !orphan {
		if blocked, err := c.blockedByBindings(ctx, in); blocked || err != nil {
			// The bindings' deletion wakes the instance up again.
			return result{}, err
		}
		if in.Status.DeprovisionStatus != catalog.DeprovisionRequired {
			return result{}, c.finalizeInstance(ctx, in, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was provisioned at the broker."})
		}
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.instanceParked(ctx, in, err)
	}
	now := c.now().UTC()
	if in.Status.CurrentOperation != catalog.OperationDeprovision {
		// A retry leaves status as the failure left it (saying why and
		// when the next attempt is) until the broker answers: one write
		// per attempt, not two.
		var err error
		in, err = c.writeInstance(ctx, in, func(in *catalog.Instance) error {
			st := &in.Status
			st.CurrentOperation, st.OperationStartTime = catalog.OperationDeprovision, &now
			if !orphan {
				// Orphan mitigation keeps saying so in Ready.
				setReady(&st.Conditions, catalog.ConditionFalse, reasonDeprovisionInFlight, msgDeprovisionInFlight, now)
			}
			return nil
		})
		if err != nil {
			return result{}, err
		}
	}
	planID := env.plan.Spec.ExternalID
	if p := in.Status.InProgressProperties; orphan && p != nil {
		planID = p.PlanID()
	}
	cctx, done := c.brokerCall(ctx, "deprovision")
	res, err := env.client.Deprovision(cctx, &osb.DeprovisionRequest{
		InstanceID: in.Spec.ExternalID, ServiceID: env.class.Spec.ExternalID, PlanID: planID,
		AcceptsIncomplete: true, Identity: identity(in.Spec.UserInfo),
	})
	err = done(err)
	if err != nil {
		// Never forgotten: retried after the backoff until the broker
		// answers.
		c.metrics.brokerCalls.WithLabelValues("deprovision", "error").Inc()
		return c.instanceRetryable(ctx, in, catalog.OperationDeprovision, reasonDeprovisionFailed, deprovisionFailure(env, err), err)
	}
	c.metrics.brokerCalls.WithLabelValues("deprovision", "ok").Inc()
	if res.Gone {
		return c.deprovisioned(ctx, in, true)
	}
	if res.Async {
		_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
			st := &in.Status
			// The polling duration counts from this request.
			st.AsyncOpInProgress, st.LastOperation, st.OperationStartTime = true, res.Operation, &now
			setReady(&st.Conditions, catalog.ConditionFalse, reasonDeprovisioning, msgDeprovisioning, now)
			return nil
		}, catalog.EventRecord{Type: "Normal", Reason: reasonDeprovisioning, Message: msgDeprovisioning, Operation: catalog.OperationDeprovision})
		return after(c.accepted(in.ID, c.pollDelay(&now, 0, attemptWeight(in.Status.Retries, catalog.OperationDeprovision, in.Generation)))), err
	}
	return c.deprovisioned(ctx, in, false)
}

// blockedByBindings reports whether the deletion of in waits for its
// bindings, deleting them first when it cascades, and says so in Ready.
func (c *Controller) blockedByBindings(ctx context.Context, in *catalog.Instance) (bool, error) {
	bindings, err := c.store.BindingsOf(ctx, in.ID)
	if err != nil || len(bindings) == 0 {
		return false, err
	}
	cascade := in.Annotations[CascadeAnnotation] == "true"
	reason, msg := reasonBlockedByBindings, msgBlockedByBindings
	if cascade {
		reason, msg = reasonBindingsDeletion, msgBindingsDeletion
		for _, b := range bindings {
			if b.DeletionTimestamp == nil {
				if _, err := c.store.DeleteBinding(ctx, b.ID); err != nil {
					return true, err
				}
			}
		}
	}
	now := c.now().UTC()
	_, err = c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		setReady(&in.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
		return nil
	})
	return true, err
}

// goneMessage says a 410 Gone was the broker's answer.
const goneMessage = "The broker answered 410 Gone: it no longer has the %s."

// deprovisioned records a finished deprovision — gone: the broker answered
// 410 Gone — the end of an orphan mitigation (the provision is tried
// again after its backoff), or of the instance.
func (c *Controller) deprovisioned(ctx context.Context, in *catalog.Instance, gone bool) (result, error) {
	msg, reason := "The instance was deprovisioned.", "Deprovisioned"
	if gone {
		msg, reason = fmt.Sprintf(goneMessage, "instance"), "DeprovisionedGone"
	}
	if in.DeletionTimestamp != nil {
		return result{}, c.finalizeInstance(ctx, in, catalog.EventRecord{Type: "Normal", Reason: reason, Message: msg, Operation: catalog.OperationDeprovision})
	}
	now := c.now().UTC()
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress = false, false
		st.ProvisionStatus, st.DeprovisionStatus = catalog.ProvisionStatusNotProvisioned, catalog.DeprovisionSucceeded
		st.CurrentOperation, st.OperationStartTime, st.InProgressProperties = "", nil, nil
		delete(st.Retries, catalog.OperationDeprovision)
		removeCondition(&st.Conditions, catalog.ConditionOrphanMitigation)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonOrphanMitigated, orphanMitigated(st.LastError, st.Retries, catalog.OperationProvision), now)
		return nil
	}, catalog.EventRecord{Type: "Normal", Reason: reasonOrphanMitigated, Message: "Orphan mitigation finished; the provision will be retried. " + msg, Operation: catalog.OperationDeprovision})
	// The provision is tried again once its backoff (status.retries)
	// allows: the reconcile this write triggers waits for it.
	return result{}, err
}

func (c *Controller) finalizeInstance(ctx context.Context, in *catalog.Instance, e catalog.EventRecord) error {
	if err := c.store.FinalizeInstance(ctx, in.ID, e); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	c.logger(ctx).Info("instance removed", "reason", e.Reason)
	return nil
}

// pollInstance asks the broker about the operation in progress.
func (c *Controller) pollInstance(ctx context.Context, env *instanceEnv) (result, error) {
	in := env.in
	st := in.Status
	if wait, due := c.pollDue(in.ID); !due {
		return after(wait), nil
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.instanceParked(ctx, in, err)
	}
	planID := env.plan.Spec.ExternalID
	if st.CurrentOperation == catalog.OperationUpdate && st.ExternalProperties != nil {
		// While a plan change runs, the platform polls with the old plan.
		planID = st.ExternalProperties.PlanID()
	}
	if d, expired := c.pollExpired(env.plan, st.OperationStartTime); expired {
		return c.instanceAsyncFailed(ctx, env, fmt.Sprintf("The operation did not finish within the maximum polling duration (%s).", d), nil)
	}
	cctx, done := c.brokerCall(ctx, "last_operation")
	res, err := env.client.LastOperation(cctx, &osb.LastOperationRequest{
		InstanceID: in.Spec.ExternalID, ServiceID: env.class.Spec.ExternalID, PlanID: planID, Operation: st.LastOperation,
	})
	err = done(err)
	if err != nil {
		c.metrics.brokerCalls.WithLabelValues("last_operation", "error").Inc()
		return c.instancePollFailed(ctx, in, err)
	}
	c.metrics.brokerCalls.WithLabelValues("last_operation", "ok").Inc()
	next := c.untilExpiry(env.plan, st.OperationStartTime, c.pollDelay(st.OperationStartTime, res.RetryAfter, attemptWeight(st.Retries, st.CurrentOperation, in.Generation)))
	switch {
	case res.Gone && st.CurrentOperation == catalog.OperationDeprovision:
		return c.deprovisioned(ctx, in, true)
	case res.Gone:
		// 410 while creating or updating is not a valid answer: keep polling.
		return after(c.polled(in.ID, next)), nil
	case res.State == osb.StateInProgress:
		if reason, msg, ok := c.progress(in.ID, st.Conditions, st.Retries, st.CurrentOperation, res.Description); ok {
			now := c.now().UTC()
			_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
				delete(in.Status.Retries, retryPoll)
				setReady(&in.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
				return nil
			})
			if err != nil {
				return result{}, err
			}
		}
		return after(c.polled(in.ID, next)), nil
	case res.State == osb.StateSucceeded:
		if st.CurrentOperation == catalog.OperationDeprovision {
			return c.deprovisioned(ctx, in, false)
		}
		return result{}, c.instanceSucceeded(ctx, in, st.CurrentOperation, "")
	default:
		return c.instanceAsyncFailed(ctx, env, res.Description, res)
	}
}

// instancePollFailed makes a failed poll visible — in the Ready
// condition's message, in the history (identical failures folded into one
// entry), in a metric and in the log — and polls again after the backoff.
func (c *Controller) instancePollFailed(ctx context.Context, in *catalog.Instance, cause error) (result, error) {
	op := in.Status.CurrentOperation
	c.metrics.pollErrors.WithLabelValues("instance", op).Inc()
	c.logger(ctx).Warn("poll last operation", "operation", op, "error", cause)
	msg := fmt.Sprintf("Error polling last operation: %v", cause)
	now := c.now().UTC()
	var wait time.Duration
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		wait = max(c.failed(&st.Retries, retryPoll, in.Generation, cause), c.pollDelay(st.OperationStartTime, 0, attemptWeight(st.Retries, op, in.Generation)))
		setReady(&st.Conditions, catalog.ConditionFalse, reasonPollFailed, msg+retrying(st.Retries, retryPoll), now)
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reasonPollFailed, Message: msg, Operation: op})
	return after(c.polled(in.ID, wait)), err
}

// instanceAsyncFailed handles an asynchronous operation that ended "failed" (or
// ran past its maximum polling duration): a provision is orphan-mitigated
// at once, an update is retried after the backoff unless the broker says
// it cannot be repeated, a deprovision is sent again after the backoff.
// The backoff counts every request the attempt cost (its polls too).
func (c *Controller) instanceAsyncFailed(ctx context.Context, env *instanceEnv, description string, res *osb.LastOperationResponse) (result, error) {
	in := env.in
	if description == "" {
		description = "The broker reported the operation as failed."
	}
	polls := c.pollsMade(in.ID)
	if res != nil {
		polls++ // the poll that said so
	}
	switch in.Status.CurrentOperation {
	case catalog.OperationProvision:
		return c.mitigateAtOnce(ctx, env, reasonProvisionFailed, "Provision call failed: "+description, polls)
	case catalog.OperationUpdate:
		if res != nil && res.UpdateRepeatable != nil && !*res.UpdateRepeatable {
			return result{}, c.instanceFailed(ctx, in, reasonUpdateFailed, "Update call failed: "+description, reasonUpdateFailed)
		}
		// OSB: update_repeatable defaults to true.
		return c.instanceAsyncRetry(ctx, in, catalog.OperationUpdate, catalog.ConditionFalse, reasonUpdateFailed, "Update call failed: "+description, polls)
	default:
		// A deprovision is never forgotten: sent again after the backoff.
		return c.instanceAsyncRetry(ctx, in, catalog.OperationDeprovision, catalog.ConditionUnknown, reasonDeprovisionFailed, "Deprovision call failed: "+description, polls)
	}
}

// instanceAsyncRetry records an asynchronous operation op that failed after polls
// and is sent again after the backoff; Ready says why (with the broker's
// description) and when.
func (c *Controller) instanceAsyncRetry(ctx context.Context, in *catalog.Instance, op, status, reason, msg string, polls int) (result, error) {
	now := c.now().UTC()
	var wait time.Duration
	_, err := c.writeInstance(ctx, in, func(in *catalog.Instance) error {
		st := &in.Status
		st.AsyncOpInProgress, st.LastError = false, msg
		if op == catalog.OperationUpdate {
			st.CurrentOperation, st.OperationStartTime, st.InProgressProperties = "", nil, nil
		}
		wait = c.failedAsync(&st.Retries, op, in.Generation, polls, false)
		setReady(&st.Conditions, status, reason, msg+retrying(st.Retries, op), now)
		return nil
	}, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: op})
	return after(wait), err
}

// mitigateAtOnce cleans up after an asynchronous provision that failed: the
// deprovision goes in the same reconcile, and the failure, the start of
// orphan mitigation and the deprovision's outcome are one write. (A crash
// between the request and the write polls the failed provision again,
// which says failed again — or 410 Gone once deleted — and starts over.)
func (c *Controller) mitigateAtOnce(ctx context.Context, env *instanceEnv, reason, msg string, polls int) (result, error) {
	now := c.now().UTC()
	// The failure is counted here, once: start is applied to the instance
	// in memory (which the deprovision reads) and again by the write that
	// carries it, and must leave the same status however often it runs.
	retries := maps.Clone(env.in.Status.Retries)
	c.failedAsync(&retries, catalog.OperationProvision, env.in.Generation, polls, true)
	failure := retries[catalog.OperationProvision]
	start := func(in *catalog.Instance) {
		st := &in.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress, st.LastError = true, false, msg
		st.CurrentOperation, st.OperationStartTime, st.LastOperation = catalog.OperationDeprovision, &now, ""
		if st.Retries == nil {
			st.Retries = map[string]catalog.Retry{}
		}
		st.Retries[catalog.OperationProvision] = failure
		catalog.SetCondition(&st.Conditions, catalog.Condition{Type: catalog.ConditionOrphanMitigation, Status: catalog.ConditionTrue,
			Reason: reason, Message: msg}, now)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonStartingOrphanMitigation, msgStartingOrphanMitigation, now)
	}
	events := []catalog.EventRecord{{Type: "Warning", Reason: reason, Message: msg, Operation: catalog.OperationProvision},
		{Type: "Warning", Reason: reasonStartingOrphanMitigation, Message: msgStartingOrphanMitigation, Operation: catalog.OperationProvision}}
	if env.in.DeletionTimestamp != nil {
		// Deleted meanwhile: its deletion deprovisions it.
		_, err := c.writeInstance(ctx, env.in, func(in *catalog.Instance) error { start(in); return nil }, events...)
		return result{}, err
	}
	start(env.in)
	r := runOf(ctx)
	r.pending = &pendingWrite{fn: start, events: events}
	res, err := c.deprovision(ctx, env)
	if r.pending != nil && err == nil {
		// The deprovision wrote nothing: the failure is written alone.
		r.pending = nil
		_, err = c.writeInstance(ctx, env.in, func(in *catalog.Instance) error { start(in); return nil }, events...)
	}
	return res, err
}
