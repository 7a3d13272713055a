package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

type bindingEnv struct {
	b *catalog.Binding
	instanceEnv
}

// reconcileBinding computes the next step for a binding from its spec and
// status and takes it: an abandoned one goes at once; otherwise its
// instance is linked and loaded, and the step dispatched.
func (c *Controller) reconcileBinding(ctx context.Context, key objectKey) (result, error) {
	b, in, inErr, err := c.store.GetBindingLinked(ctx, key.id)
	if errors.Is(err, catalog.ErrNotFound) || err == nil && b.Namespace != key.namespace {
		return result{}, nil
	}
	if err != nil {
		return result{}, err
	}
	c.named(ctx, "binding", b.Namespace, b.Name)
	if b.DeletionTimestamp != nil && b.Annotations[AbandonAnnotation] == "true" {
		return result{}, c.abandonBinding(ctx, b)
	}
	env, err := c.linkInstance(ctx, b, in, inErr)
	if env == nil {
		return result{}, err
	}
	return c.dispatchBinding(ctx, env)
}

// abandonBinding removes an abandoned binding (and its Secret) without
// asking the broker, whatever the binding was waiting for.
func (c *Controller) abandonBinding(ctx context.Context, b *catalog.Binding) error {
	if err := c.deleteSecret(ctx, b); err != nil {
		return err
	}
	return c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Warning", Reason: reasonAbandoned,
		Message: "Removed without unbinding: the binding was abandoned."})
}

// linkInstance finds the binding's instance (which the binding may have
// been recorded before: it is linked to it now if it exists) and loads its
// class, plan and broker. A nil env means the binding was dealt with: it
// waits for its instance (saying so), or it is removed, having nothing to
// unbind.
func (c *Controller) linkInstance(ctx context.Context, b *catalog.Binding, in *catalog.Instance, inErr error) (*bindingEnv, error) {
	err := inErr
	if errors.Is(err, catalog.ErrNotFound) {
		in, err = c.store.LinkBinding(ctx, b.ID)
	}
	if r, ok := catalog.AsReference(err); ok {
		if b.DeletionTimestamp != nil {
			// Nothing can be unbound without the instance (one that was
			// abandoned leaves its bindings so).
			if err := c.deleteSecret(ctx, b); err != nil {
				return nil, err
			}
			return nil, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "The instance does not exist: nothing to unbind."})
		}
		// The instance's creation wakes the binding up.
		return nil, c.bindingWaiting(ctx, b, r.Reason, r.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("instance of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	nothingBound := b.DeletionTimestamp != nil && b.Status.UnbindStatus != catalog.UnbindRequired
	if !resolved(in) {
		if nothingBound {
			return nil, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound."})
		}
		// The instance's resolution wakes the binding up.
		return nil, c.bindingWaiting(ctx, b, reasonInstanceUnresolved, fmt.Sprintf(
			"Binding cannot begin because ClusterServiceClass and ClusterServicePlan references for %s have not been resolved yet", instanceName(in)))
	}
	env := &bindingEnv{b: b, instanceEnv: instanceEnv{in: in}}
	if err := c.load(ctx, &env.instanceEnv); err != nil {
		if nothingBound {
			return nil, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound."})
		}
		if r, ok := catalog.AsReference(err); ok {
			// Gone since the instance was resolved: looked for again after
			// the backoff.
			if werr := c.bindingWaiting(ctx, b, r.Reason, r.Message); werr != nil {
				return nil, werr
			}
		}
		return nil, err
	}
	return env, nil
}

// dispatchBinding takes the binding's next step: poll, unbind, keep it
// bound, or bind once its instance is ready — each after its backoff.
func (c *Controller) dispatchBinding(ctx context.Context, env *bindingEnv) (result, error) {
	b, in := env.b, env.in
	st := &b.Status
	switch {
	case st.AsyncOpInProgress:
		if wait := c.retryWait(ctx, st.Retries, retryPoll, b.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.pollBinding(ctx, env)
	case b.DeletionTimestamp != nil || st.OrphanMitigationInProgress:
		if wait := c.retryWait(ctx, st.Retries, catalog.OperationUnbind, b.Generation); wait > 0 {
			return after(wait), nil
		}
		return c.unbind(ctx, env)
	case st.ReconciledGeneration == b.Generation && ready(st.Conditions):
		return result{}, c.keepBound(ctx, env)
	case terminal(st.Conditions, st.ObservedGeneration, b.Generation):
		return result{}, nil
	}
	if !ready(in.Status.Conditions) || in.DeletionTimestamp != nil || in.Status.ProvisionStatus != catalog.ProvisionStatusProvisioned {
		// The instance's change wakes the binding up.
		return result{}, c.bindingWaiting(ctx, b, reasonWaitInstance, fmt.Sprintf("Binding cannot begin because referenced %s is not ready", instanceName(in)))
	}
	if wait := c.retryWait(ctx, st.Retries, catalog.OperationBind, b.Generation); wait > 0 {
		return after(wait), nil
	}
	return c.bind(ctx, env)
}

// bindingParked is instanceParked for a binding.
func (c *Controller) bindingParked(ctx context.Context, b *catalog.Binding, err error) (result, error) {
	var ue *unavailableError
	if !errors.As(err, &ue) {
		return result{}, nil
	}
	if cond, _ := catalog.FindCondition(b.Status.Conditions, catalog.ConditionReady); cond.Reason == reasonWaitBroker && cond.Message == ue.msg {
		return result{}, nil
	}
	return result{}, c.bindingWaiting(ctx, b, reasonWaitBroker, ue.msg)
}

// bindingWaiting says in the Ready condition what the binding waits for,
// unless it says so already: a binding waiting for its instance is woken
// by each of the instance's changes, and the same wait is written (and
// entered in the history) once.
//
// What it waits for is someone else's change, which wakes it up: the
// feed's news of this write does not, unless the binding changed since
// the reconcile read it.
func (c *Controller) bindingWaiting(ctx context.Context, b *catalog.Binding, reason, msg string) error {
	if cond, ok := catalog.FindCondition(b.Status.Conditions, catalog.ConditionReady); ok &&
		cond.Status == catalog.ConditionFalse && cond.Reason == reason && cond.Message == msg {
		return nil
	}
	now := c.now().UTC()
	read, untouched := b.ResourceVersion, false
	b, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		untouched = b.ResourceVersion == read
		setReady(&b.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg})
	if err == nil && untouched {
		c.wake.wrote(bindingKey(b.Namespace, b.ID), b.ResourceVersion, true)
	}
	return err
}

// bindable reports whether the instance's plan may be bound.
func bindable(class *catalog.ServiceClass, plan *catalog.ServicePlan) bool {
	if plan.Spec.Bindable != nil {
		return *plan.Spec.Bindable
	}
	return class.Spec.Bindable
}

// predecessor is the external id of the binding b rotates, once that
// binding is bound.
func (c *Controller) predecessor(ctx context.Context, b *catalog.Binding) (id string, wait bool, err error) {
	ref := b.Spec.PredecessorBindingRef
	if ref == nil {
		return "", false, nil
	}
	pred, err := c.store.GetBindingByName(ctx, b.Namespace, ref.Name)
	if err != nil {
		return "", false, fmt.Errorf("predecessor binding %s/%s: %w", b.Namespace, ref.Name, err)
	}
	if !ready(pred.Status.Conditions) || pred.Status.ReconciledGeneration != pred.Generation {
		return "", true, nil
	}
	return pred.Spec.ExternalID, false, nil
}

func (c *Controller) bind(ctx context.Context, env *bindingEnv) (result, error) {
	b, in := env.b, env.in
	// The binding may have been recorded before its instance (or its
	// instance's plan): what its creation checks then is checked now.
	if !bindable(env.class, env.plan) {
		msg := fmt.Sprintf("References a non-bindable %s and Plan (%q) combination", className(env.class), env.plan.Spec.ExternalName)
		return result{}, c.bindingFailed(ctx, b, reasonNonbindable, msg, reasonNonbindable)
	}
	if err := c.store.CheckBindable(ctx, b, in, env.class, env.plan); errors.Is(err, catalog.ErrUnprocessable) {
		return result{}, c.bindingFailed(ctx, b, reasonNonbindable, err.Error(), reasonNonbindable)
	} else if v, ok := catalog.AsValidation(err); ok {
		reason := reasonWithParameters
		if slices.ContainsFunc(v.Errors, func(e *field.Error) bool { return strings.HasPrefix(e.Field, "spec.predecessorBindingRef") }) {
			reason = reasonNonexistentBinding
		}
		return result{}, c.bindingFailed(ctx, b, reason, v.Error(), reason)
	} else if err != nil {
		return result{}, err
	}
	params, err := c.parameters(ctx, b.Namespace, b.Spec.Parameters, b.Spec.ParametersFrom)
	if err != nil {
		return result{}, c.bindingFailed(ctx, b, reasonWithParameters, err.Error(), permanentUnless(errors.Is(err, errKube), reasonWithParameters))
	}
	predecessor, wait, err := c.predecessor(ctx, b)
	if err != nil {
		return result{}, c.bindingFailed(ctx, b, reasonNonexistentBinding, err.Error(), permanentUnless(!errors.Is(err, catalog.ErrNotFound), reasonNonexistentBinding))
	}
	if wait {
		// The predecessor's change to Ready wakes this binding up through
		// their instance; poll meanwhile in case it never comes.
		return after(time.Second), nil
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.bindingParked(ctx, b, err)
	}
	now := c.now().UTC()
	earlier := b.Status.UnbindStatus == catalog.UnbindRequired
	b, err = c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.CurrentOperation, st.OperationStartTime, st.UnbindStatus = catalog.OperationBind, &now, catalog.UnbindRequired
		st.ObservedGeneration = b.Generation
		removeCondition(&st.Conditions, catalog.ConditionFailed)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonBindInFlight, msgBindInFlight, now)
		return nil
	}, nil)
	if err != nil {
		return result{}, err
	}
	env.b = b
	cctx, done := c.brokerCall(ctx, "bind")
	res, err := env.client.Bind(cctx, &osb.BindRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID, AcceptsIncomplete: true,
		Identity:  identity(b.Spec.UserInfo),
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID,
		BindResource:         map[string]any{"app_guid": b.Namespace},
		Parameters:           params,
		PredecessorBindingID: predecessor,
		Context:              map[string]any{"platform": "kubernetes", "namespace": b.Namespace, "clusterid": c.clusterID},
	})
	if err = done(err); err != nil {
		return c.bindFailed(ctx, env, err, earlier)
	}
	c.metrics.brokerCalls.WithLabelValues("bind", "ok").Inc()
	if res.Async {
		_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
			b.Status.AsyncOpInProgress, b.Status.LastOperation = true, res.Operation
			setReady(&b.Status.Conditions, catalog.ConditionFalse, reasonBinding, msgBinding, c.now().UTC())
			return nil
		}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonBinding, Message: msgBinding, Operation: catalog.OperationBind})
		return after(c.accepted(b.ID, c.pollDelay(b.Status.OperationStartTime, 0, attemptWeight(b.Status.Retries, catalog.OperationBind, b.Generation)))), err
	}
	return result{}, c.bound(ctx, env, &res.Binding)
}

// bindFailed applies OSB 2.17's orphan-mitigation table to a failed bind
// request, as provisionFailed does to a provision; earlier says an
// earlier attempt may have left a binding at the broker.
func (c *Controller) bindFailed(ctx context.Context, env *bindingEnv, err error, earlier bool) (result, error) {
	b := env.b
	c.metrics.brokerCalls.WithLabelValues("bind", "error").Inc()
	var he *osb.HTTPError
	switch {
	case needsOrphanMitigation(err):
		return c.startBindingOrphanMitigation(ctx, b, bindFailure(env, err, true), err, 2)
	case malformed200(err):
		// "200 with malformed response": a failure without orphan
		// mitigation; the binding's deletion still unbinds.
		return c.bindingRetryable(ctx, b, catalog.OperationBind, reasonBindFailed, bindFailure(env, err, true), err)
	case errors.As(err, &he) && !refusedForNow(err):
		return result{}, c.bindingFailed(ctx, b, reasonBindFailed, bindFailure(env, err, false), reasonBindRefused, func(st *catalog.BindingStatus) {
			if refusalLeavesNothing(earlier) {
				st.UnbindStatus = catalog.UnbindNotRequired
			}
		})
	default:
		return c.bindingRetryable(ctx, b, catalog.OperationBind, reasonBindFailed, bindFailure(env, err, true), err)
	}
}

// bound writes the Secret when there is a cluster, then stores the
// credentials and marks the binding Ready in one write. A crash between
// the two leaves the bind in flight: it is sent again, and OSB has a
// broker answer a bind it already made with the same binding.
// Without a Secret, the credentials are stored all the same, and the
// binding is not Ready.
func (c *Controller) bound(ctx context.Context, env *bindingEnv, result *osb.Binding) error {
	b := env.b
	creds := result.Credentials
	if creds == nil {
		creds = map[string]any{}
	}
	secretErr := c.ensureSecret(ctx, env, creds)
	var problem *secretProblem
	if secretErr != nil && !errors.As(secretErr, &problem) && !errors.Is(secretErr, errNamespaceTerminating) {
		// The cluster refused the Secret (RBAC, a quota, an admission
		// policy) or did not answer: the binding says so, rather than
		// that its bind is still in flight.
		problem = &secretProblem{reason: reasonSecretFailed, msg: "Error injecting bind result: " + secretErr.Error()}
	}
	now := c.now().UTC()
	// One entry in the history for a bind that ended well (its Secret is
	// made from the credentials it stored): each entry is a row and a
	// Kubernetes Event.
	var events []catalog.EventRecord
	switch {
	case secretErr == nil:
		events = append(events, catalog.EventRecord{Type: "Normal", Reason: reasonBound, Message: msgBound, Operation: catalog.OperationBind})
	case problem != nil:
		events = append(events, catalog.EventRecord{Type: "Normal", Reason: "CredentialsStored", Message: "The broker returned credentials; they are stored encrypted.", Operation: catalog.OperationBind},
			problem.event())
	default:
		events = append(events, catalog.EventRecord{Type: "Normal", Reason: "CredentialsStored", Message: "The broker returned credentials; they are stored encrypted.", Operation: catalog.OperationBind})
	}
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.AsyncOpInProgress, st.CurrentOperation, st.OperationStartTime, st.LastError = false, "", nil, ""
		st.ExternalProperties = &catalog.BindingProperties{UserInfo: b.Spec.UserInfo}
		if problem != nil {
			// The next attempt waits its backoff, as after any failed
			// bind: this write's news would otherwise wake the binding at
			// once, to bind again, as often as the broker answers.
			c.failed(&st.Retries, catalog.OperationBind, b.Generation, nil)
		} else {
			delete(st.Retries, catalog.OperationBind)
		}
		st.Endpoints = nil
		for _, e := range result.Endpoints {
			st.Endpoints = append(st.Endpoints, catalog.Endpoint{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol})
		}
		switch {
		case secretErr == nil:
			st.ReconciledGeneration = b.Generation
			st.Binding = c.secretRef(b)
			setReady(&st.Conditions, catalog.ConditionTrue, reasonBound, msgBound, now)
			removeCondition(&st.Conditions, catalog.ConditionFailed)
		case problem != nil:
			problem.record(st, now)
		}
		return nil
	}, creds, events...)
	switch {
	case err != nil:
		return err
	case errors.Is(secretErr, errNamespaceTerminating):
		// Bound at the broker, credentials stored, but no Secret: not
		// Ready. The namespace's deletion unbinds it.
		return nil
	}
	return secretErr
}

// startBindingOrphanMitigation records a failed bind that needs cleaning
// up: the unbind follows at once, the bind again after the backoff. A
// binding has no OrphanMitigation condition in Service Catalog's API:
// Ready says so, and the failure is in lastError and the history.
// cost is what the failed attempt cost the broker (recordFailure).
func (c *Controller) startBindingOrphanMitigation(ctx context.Context, b *catalog.Binding, msg string, cause error, cost int) (result, error) {
	now := c.now().UTC()
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress, st.LastError = true, false, msg
		c.recordFailure(&st.Retries, catalog.OperationBind, b.Generation, cause, cost)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonBindingOrphan, msgBindingOrphan, now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonBindFailed, Message: msg, Operation: catalog.OperationBind},
		catalog.EventRecord{Type: "Warning", Reason: reasonBindingOrphan, Message: msgBindingOrphan, Operation: catalog.OperationBind})
	return result{}, err
}

// bindingRetryable records a failure of op that is retried after the
// backoff, and looks again once it is over.
func (c *Controller) bindingRetryable(ctx context.Context, b *catalog.Binding, op, reason, msg string, cause error) (result, error) {
	now := c.now().UTC()
	var wait time.Duration
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.LastError = msg
		if op == catalog.OperationBind {
			st.CurrentOperation, st.OperationStartTime = "", nil
		}
		wait = c.failed(&st.Retries, op, b.Generation, cause)
		status := catalog.ConditionFalse
		if op == catalog.OperationUnbind {
			status = catalog.ConditionUnknown // the binding may still exist at the broker
		}
		setReady(&st.Conditions, status, reason, msg+retrying(st.Retries, op), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: op})
	if err != nil {
		return result{}, err
	}
	c.logger(ctx).Warn("broker call failed; retrying after backoff", "operation", op, "wait", wait, "error", cause)
	return after(wait), nil
}

// bindingFailed is instanceFailed for a binding.
func (c *Controller) bindingFailed(ctx context.Context, b *catalog.Binding, reason, msg, failedReason string, extra ...func(*catalog.BindingStatus)) error {
	now := c.now().UTC()
	permanent := failedReason != ""
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.LastError, st.CurrentOperation, st.AsyncOpInProgress, st.OperationStartTime = msg, "", false, nil
		setReady(&st.Conditions, catalog.ConditionFalse, reason, msg, now)
		if permanent {
			st.ObservedGeneration = b.Generation
			setFailed(&st.Conditions, failedReason, msg, now)
		}
		for _, f := range extra {
			f(st)
		}
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg, Operation: b.Status.CurrentOperation})
	if err != nil || permanent {
		return err
	}
	return errors.New(msg)
}

func (c *Controller) unbind(ctx context.Context, env *bindingEnv) (result, error) {
	b, in := env.b, env.in
	orphan := b.Status.OrphanMitigationInProgress && b.DeletionTimestamp == nil
	if !orphan && b.Status.UnbindStatus != catalog.UnbindRequired {
		if err := c.deleteSecret(ctx, b); err != nil {
			return result{}, err
		}
		return result{}, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound at the broker."})
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.bindingParked(ctx, b, err)
	}
	now := c.now().UTC()
	if b.Status.CurrentOperation != catalog.OperationUnbind {
		// A retry leaves status as the failure left it until the broker
		// answers (see deprovision).
		var err error
		b, err = c.writeBinding(ctx, b, func(b *catalog.Binding) error {
			st := &b.Status
			st.CurrentOperation, st.OperationStartTime = catalog.OperationUnbind, &now
			if !orphan {
				// Orphan mitigation keeps saying so in Ready.
				setReady(&st.Conditions, catalog.ConditionFalse, reasonUnbindInFlight, msgUnbindInFlight, now)
			}
			return nil
		}, nil)
		if err != nil {
			return result{}, err
		}
	}
	env.b = b
	cctx, done := c.brokerCall(ctx, "unbind")
	res, err := env.client.Unbind(cctx, &osb.UnbindRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID,
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID,
		AcceptsIncomplete: true, Identity: identity(b.Spec.UserInfo),
	})
	err = done(err)
	if err != nil {
		// Never forgotten: retried after the backoff.
		c.metrics.brokerCalls.WithLabelValues("unbind", "error").Inc()
		return c.bindingRetryable(ctx, b, catalog.OperationUnbind, reasonUnbindFailed, unbindFailure(env, err), err)
	}
	c.metrics.brokerCalls.WithLabelValues("unbind", "ok").Inc()
	if res.Gone {
		return c.unbound(ctx, b, true)
	}
	if res.Async {
		_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
			st := &b.Status
			// The polling duration counts from this request.
			st.AsyncOpInProgress, st.LastOperation, st.OperationStartTime = true, res.Operation, &now
			setReady(&st.Conditions, catalog.ConditionFalse, reasonUnbinding, msgUnbinding, now)
			return nil
		}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonUnbinding, Message: msgUnbinding, Operation: catalog.OperationUnbind})
		return after(c.accepted(b.ID, c.pollDelay(&now, 0, attemptWeight(b.Status.Retries, catalog.OperationUnbind, b.Generation)))), err
	}
	return c.unbound(ctx, b, false)
}

// unbound finishes an unbind — gone: the broker answered 410 Gone — the
// Secret goes (a bare kube-apiserver collects no garbage), then the
// binding; or, after orphan mitigation, the bind is tried again after its
// backoff.
func (c *Controller) unbound(ctx context.Context, b *catalog.Binding, gone bool) (result, error) {
	if err := c.deleteSecret(ctx, b); err != nil {
		return result{}, err
	}
	msg, reason := "The binding was deleted at the broker.", "Unbound"
	if gone {
		msg, reason = fmt.Sprintf(goneMessage, "binding"), "UnboundGone"
	}
	if b.DeletionTimestamp != nil {
		return result{}, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: reason, Message: msg, Operation: catalog.OperationUnbind})
	}
	now := c.now().UTC()
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress, st.CurrentOperation = false, false, ""
		st.UnbindStatus, st.OperationStartTime = catalog.UnbindSucceeded, nil
		delete(st.Retries, catalog.OperationUnbind)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonOrphanMitigated, orphanMitigated(st.LastError, st.Retries, catalog.OperationBind), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonOrphanMitigated, Message: "Orphan mitigation finished; the bind will be retried. " + msg, Operation: catalog.OperationUnbind})
	// The bind is tried again once its backoff allows.
	return result{}, err
}

func (c *Controller) finalizeBinding(ctx context.Context, b *catalog.Binding, e catalog.EventRecord) error {
	if err := c.store.FinalizeBinding(ctx, b.ID, e); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	return nil
}

func (c *Controller) pollBinding(ctx context.Context, env *bindingEnv) (result, error) {
	b, in := env.b, env.in
	st := b.Status
	if wait, due := c.pollDue(b.ID); !due {
		return after(wait), nil
	}
	if err := c.enter(ctx, env.broker, env.client); err != nil {
		return c.bindingParked(ctx, b, err)
	}
	if d, expired := c.pollExpired(env.plan, st.OperationStartTime); expired {
		return c.bindingAsyncFailed(ctx, env, fmt.Sprintf("The operation did not finish within the maximum polling duration (%s).", d), false)
	}
	keepSlot(ctx) // for the fetch, if the bind succeeded
	cctx, done := c.brokerCall(ctx, "last_operation")
	res, err := env.client.LastOperation(cctx, &osb.LastOperationRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID,
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID, Operation: st.LastOperation,
	})
	err = done(err)
	if err != nil {
		c.metrics.brokerCalls.WithLabelValues("binding_last_operation", "error").Inc()
		return c.bindingPollFailed(ctx, b, err)
	}
	c.metrics.brokerCalls.WithLabelValues("binding_last_operation", "ok").Inc()
	if res.Gone || res.State == osb.StateInProgress {
		if reason, msg, ok := c.progress(b.ID, st.Conditions, st.Retries, st.CurrentOperation, res.Description); ok {
			now := c.now().UTC()
			if _, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
				delete(b.Status.Retries, retryPoll)
				setReady(&b.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
				return nil
			}, nil); err != nil {
				return result{}, err
			}
		}
	}
	switch {
	case res.Gone && st.CurrentOperation == catalog.OperationUnbind:
		return c.unbound(ctx, b, true)
	case res.Gone, res.State == osb.StateInProgress:
		next := c.pollDelay(st.OperationStartTime, res.RetryAfter, attemptWeight(st.Retries, st.CurrentOperation, b.Generation))
		return after(c.polled(b.ID, c.untilExpiry(env.plan, st.OperationStartTime, next))), nil
	case res.State == osb.StateSucceeded && st.CurrentOperation == catalog.OperationUnbind:
		return c.unbound(ctx, b, false)
	case res.State == osb.StateSucceeded:
		// In the poll's slot, which it kept.
		cctx, done := c.brokerCall(ctx, "fetch_binding")
		got, err := env.client.GetBinding(cctx, in.Spec.ExternalID, b.Spec.ExternalID)
		err = done(err)
		if err != nil {
			// Seen, counted and retried after the backoff, as a failed poll.
			return c.bindingPollFailed(ctx, b, fmt.Errorf("fetch the binding after its asynchronous bind: %w", err))
		}
		return result{}, c.bound(ctx, env, got)
	default:
		return c.bindingAsyncFailed(ctx, env, res.Description, true)
	}
}

// bindingPollFailed makes a failed poll of a binding's operation visible
// (condition, folded history, metric, log) and polls again after the
// backoff.
func (c *Controller) bindingPollFailed(ctx context.Context, b *catalog.Binding, cause error) (result, error) {
	op := b.Status.CurrentOperation
	c.metrics.pollErrors.WithLabelValues("binding", op).Inc()
	c.logger(ctx).Warn("poll binding last operation", "operation", op, "error", cause)
	msg := fmt.Sprintf("Error polling last operation: %v", cause)
	now := c.now().UTC()
	var wait time.Duration
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		wait = max(c.failed(&st.Retries, retryPoll, b.Generation, cause), c.pollDelay(st.OperationStartTime, 0, attemptWeight(st.Retries, op, b.Generation)))
		setReady(&st.Conditions, catalog.ConditionFalse, reasonPollFailed, msg+retrying(st.Retries, retryPoll), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonPollFailed, Message: msg, Operation: op})
	return after(c.polled(b.ID, wait)), err
}

// bindingAsyncFailed handles an asynchronous bind or unbind that ended
// "failed" or ran past its maximum polling duration: a bind is
// orphan-mitigated, an unbind sent again after the backoff.
// polled says whether a poll said so (and counts among the requests).
func (c *Controller) bindingAsyncFailed(ctx context.Context, env *bindingEnv, description string, polled bool) (result, error) {
	b := env.b
	if description == "" {
		description = "The broker reported the operation as failed."
	}
	polls := c.pollsMade(b.ID)
	if polled {
		polls++
	}
	if b.Status.CurrentOperation == catalog.OperationBind {
		return c.startBindingOrphanMitigation(ctx, b, "Bind call failed: "+description, nil, 2*(1+polls))
	}
	now := c.now().UTC()
	msg := "Unbind call failed: " + description
	var wait time.Duration
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		st := &b.Status
		st.AsyncOpInProgress, st.LastError = false, msg
		wait = c.failedAsync(&st.Retries, catalog.OperationUnbind, b.Generation, polls, false)
		setReady(&st.Conditions, catalog.ConditionUnknown, reasonUnbindFailed, msg+retrying(st.Retries, catalog.OperationUnbind), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonUnbindFailed, Message: msg, Operation: catalog.OperationUnbind})
	return after(wait), err
}

// keepBound makes sure a bound binding's Secret is still as it should be
// (or absent, if it asks for none) and that status.binding says so.
func (c *Controller) keepBound(ctx context.Context, env *bindingEnv) error {
	err := c.ensureSecret(ctx, env, nil)
	var p *secretProblem
	switch {
	case errors.As(err, &p):
		return c.secretFailed(ctx, env.b, p)
	case errors.Is(err, errNamespaceTerminating):
		return nil
	case err != nil:
		return err
	}
	return c.syncSecretRef(ctx, env.b)
}

// secretRef is what status.binding says of a bound binding: its Secret,
// or nothing without a cluster or when it asks for no Secret (the
// servicebinding.io projection then has nothing to project).
func (c *Controller) secretRef(b *catalog.Binding) *catalog.SecretReference {
	if c.kube == nil || catalog.NoSecret(&b.Meta) {
		return nil
	}
	return &catalog.SecretReference{Name: b.Spec.SecretName}
}

// syncSecretRef brings status.binding of a bound binding in line with
// secretRef, after its no-Secret annotation was added or removed.
func (c *Controller) syncSecretRef(ctx context.Context, b *catalog.Binding) error {
	want := c.secretRef(b)
	if (want == nil) == (b.Status.Binding == nil) && (want == nil || *want == *b.Status.Binding) {
		return nil
	}
	_, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		b.Status.Binding = c.secretRef(b)
		return nil
	}, nil)
	return err
}
