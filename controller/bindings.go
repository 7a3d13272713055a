package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

func (c *Controller) reconcileBinding(ctx context.Context, id string) (time.Duration, error) {
	b, in, inErr, err := c.store.GetBindingLinked(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if b.DeletionTimestamp != nil && b.Annotations[AbandonAnnotation] == "true" {
		// The broker is not asked, whatever the binding is waiting for.
		if err := c.deleteSecret(ctx, b); err != nil {
			return 0, err
		}
		return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Warning", Reason: reasonAbandoned,
			Message: "Removed without unbinding: the binding was abandoned."})
	}
	// The instance, which the binding may have been recorded before (it is
	// linked to it now if it exists).
	err = inErr
	if errors.Is(err, catalog.ErrNotFound) {
		in, err = c.store.LinkBinding(ctx, b.ID)
	}
	if r, ok := catalog.AsReference(err); ok {
		if b.DeletionTimestamp != nil {
			// Nothing can be unbound without the instance (one that was
			// abandoned leaves its bindings so).
			if err := c.deleteSecret(ctx, b); err != nil {
				return 0, err
			}
			return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "The instance does not exist: nothing to unbind."})
		}
		// The instance's creation wakes the binding up.
		return 0, c.bindingWaiting(ctx, b, r.Reason, r.Message)
	}
	if err != nil {
		return 0, fmt.Errorf("instance of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	env := &bindingEnv{b: b, instanceEnv: instanceEnv{in: in}}
	if !resolved(in) {
		if b.DeletionTimestamp != nil && b.Status.UnbindStatus != catalog.UnbindRequired {
			return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound."})
		}
		// The instance's resolution wakes the binding up.
		return 0, c.bindingWaiting(ctx, b, reasonInstanceUnresolved, fmt.Sprintf(
			"Binding cannot begin because ClusterServiceClass and ClusterServicePlan references for %s have not been resolved yet", instanceName(in)))
	}
	if err := c.load(ctx, &env.instanceEnv); err != nil {
		if b.DeletionTimestamp != nil && b.Status.UnbindStatus != catalog.UnbindRequired {
			return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound."})
		}
		if r, ok := catalog.AsReference(err); ok {
			// Gone since the instance was resolved: looked for again after
			// the backoff.
			if werr := c.bindingWaiting(ctx, b, r.Reason, r.Message); werr != nil {
				return 0, werr
			}
		}
		return 0, err
	}
	st := &b.Status
	switch {
	case st.AsyncOpInProgress:
		if wait := c.retryWait(st.Retries, retryPoll, b.Generation); wait > 0 {
			return wait, nil
		}
		return c.pollBinding(ctx, env)
	case b.DeletionTimestamp != nil || st.OrphanMitigationInProgress:
		if wait := c.retryWait(st.Retries, catalog.OperationUnbind, b.Generation); wait > 0 {
			return wait, nil
		}
		return c.unbind(ctx, env)
	case st.ReconciledGeneration == b.Generation && ready(st.Conditions):
		return 0, c.keepBound(ctx, env)
	case terminal(st.Conditions, st.ObservedGeneration, b.Generation):
		return 0, nil
	}
	if !ready(in.Status.Conditions) || in.DeletionTimestamp != nil || in.Status.ProvisionStatus != catalog.ProvisionStatusProvisioned {
		// The instance's change wakes the binding up.
		return 0, c.bindingWaiting(ctx, b, reasonWaitInstance, fmt.Sprintf("Binding cannot begin because referenced %s is not ready", instanceName(in)))
	}
	if wait := c.retryWait(st.Retries, catalog.OperationBind, b.Generation); wait > 0 {
		return wait, nil
	}
	return c.bind(ctx, env)
}

// bindingWaiting says in the Ready condition what the binding waits for.
func (c *Controller) bindingWaiting(ctx context.Context, b *catalog.Binding, reason, msg string) error {
	now := c.now().UTC()
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		setReady(&b.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reason, Message: msg})
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

func (c *Controller) bind(ctx context.Context, env *bindingEnv) (time.Duration, error) {
	b, in := env.b, env.in
	// The binding may have been recorded before its instance (or its
	// instance's plan): what its creation checks then is checked now.
	if !bindable(env.class, env.plan) {
		msg := fmt.Sprintf("References a non-bindable %s and Plan (%q) combination", className(env.class), env.plan.Spec.ExternalName)
		return 0, c.bindingFailed(ctx, b, reasonNonbindable, msg, reasonNonbindable)
	}
	if err := c.store.CheckBindable(ctx, b, in, env.class, env.plan); errors.Is(err, catalog.ErrUnprocessable) {
		return 0, c.bindingFailed(ctx, b, reasonNonbindable, err.Error(), reasonNonbindable)
	} else if v, ok := catalog.AsValidation(err); ok {
		reason := reasonWithParameters
		if slices.ContainsFunc(v.Errors, func(e *field.Error) bool { return strings.HasPrefix(e.Field, "spec.predecessorBindingRef") }) {
			reason = reasonNonexistentBinding
		}
		return 0, c.bindingFailed(ctx, b, reason, v.Error(), reason)
	} else if err != nil {
		return 0, err
	}
	params, err := c.parameters(ctx, b.Namespace, b.Spec.Parameters, b.Spec.ParametersFrom)
	if err != nil {
		return 0, c.bindingFailed(ctx, b, reasonWithParameters, err.Error(), permanentUnless(errors.Is(err, errKube), reasonWithParameters))
	}
	predecessor, wait, err := c.predecessor(ctx, b)
	if err != nil {
		return 0, c.bindingFailed(ctx, b, reasonNonexistentBinding, err.Error(), permanentUnless(!errors.Is(err, catalog.ErrNotFound), reasonNonexistentBinding))
	}
	if wait {
		// The predecessor's change to Ready wakes this binding up through
		// their instance; poll meanwhile in case it never comes.
		return time.Second, nil
	}
	now := c.now().UTC()
	b, err = c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		st.CurrentOperation, st.OperationStartTime, st.UnbindStatus = catalog.OperationBind, &now, catalog.UnbindRequired
		st.ObservedGeneration = b.Generation
		removeCondition(&st.Conditions, catalog.ConditionFailed)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonBindInFlight, msgBindInFlight, now)
		return nil
	}, nil)
	if err != nil {
		return 0, err
	}
	env.b = b
	cctx, cancel := c.brokerCall(ctx)
	res, err := env.client.Bind(cctx, &osb.BindRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID, AcceptsIncomplete: true,
		Identity:  identity(b.Spec.UserInfo),
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID,
		BindResource:         map[string]any{"app_guid": b.Namespace},
		Parameters:           params,
		PredecessorBindingID: predecessor,
		Context:              map[string]any{"platform": "kubernetes", "namespace": b.Namespace, "clusterid": c.clusterID},
	})
	cancel()
	if err != nil {
		c.metrics.brokerCalls.WithLabelValues("bind", "error").Inc()
		var he *osb.HTTPError
		// OSB 2.17's orphan-mitigation table, as for a provision.
		switch {
		case needsOrphanMitigation(err):
			return c.startBindingOrphanMitigation(ctx, b, bindFailure(env, err, true), err)
		case malformed200(err):
			// "200 with malformed response": a failure without orphan
			// mitigation; the binding's deletion still unbinds.
			return c.bindingRetryable(ctx, b, catalog.OperationBind, reasonBindFailed, bindFailure(env, err, true), err)
		case errors.As(err, &he) && he.Status != http.StatusRequestTimeout && he.Code != "ConcurrencyError":
			return 0, c.bindingFailed(ctx, b, reasonBindFailed, bindFailure(env, err, false), reasonBindRefused, func(st *catalog.BindingStatus) {
				st.UnbindStatus = catalog.UnbindNotRequired
			})
		default:
			return c.bindingRetryable(ctx, b, catalog.OperationBind, reasonBindFailed, bindFailure(env, err, true), err)
		}
	}
	c.metrics.brokerCalls.WithLabelValues("bind", "ok").Inc()
	if res.Async {
		_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
			b.Status.AsyncOpInProgress, b.Status.LastOperation = true, res.Operation
			setReady(&b.Status.Conditions, catalog.ConditionFalse, reasonBinding, msgBinding, c.now().UTC())
			return nil
		}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonBinding, Message: msgBinding, Operation: catalog.OperationBind})
		return c.pollDelay(b.Status.OperationStartTime, 0), err
	}
	return 0, c.bound(ctx, env, &res.Binding)
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
	errors.As(secretErr, &problem)
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
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		st.AsyncOpInProgress, st.CurrentOperation, st.OperationStartTime, st.LastError = false, "", nil, ""
		st.ExternalProperties = &catalog.BindingProperties{UserInfo: b.Spec.UserInfo}
		delete(st.Retries, catalog.OperationBind)
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
func (c *Controller) startBindingOrphanMitigation(ctx context.Context, b *catalog.Binding, msg string, cause error) (time.Duration, error) {
	now := c.now().UTC()
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress, st.LastError = true, false, msg
		c.failedMitigated(&st.Retries, catalog.OperationBind, b.Generation, cause)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonBindingOrphan, msgBindingOrphan, now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonBindFailed, Message: msg, Operation: catalog.OperationBind},
		catalog.EventRecord{Type: "Warning", Reason: reasonBindingOrphan, Message: msgBindingOrphan, Operation: catalog.OperationBind})
	return 0, err
}

// bindingRetryable records a failure of op that is retried after the
// backoff, and returns the wait.
func (c *Controller) bindingRetryable(ctx context.Context, b *catalog.Binding, op, reason, msg string, cause error) (time.Duration, error) {
	now := c.now().UTC()
	var wait time.Duration
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
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
		return 0, err
	}
	c.log.Warn("broker call failed; retrying after backoff", "binding", b.Namespace+"/"+b.Name, "operation", op, "wait", wait, "error", cause)
	return wait, nil
}

// bindingFailed is instanceFailed for a binding.
func (c *Controller) bindingFailed(ctx context.Context, b *catalog.Binding, reason, msg, failedReason string, extra ...func(*catalog.BindingStatus)) error {
	now := c.now().UTC()
	permanent := failedReason != ""
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
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

func (c *Controller) unbind(ctx context.Context, env *bindingEnv) (time.Duration, error) {
	b, in := env.b, env.in
	orphan := b.Status.OrphanMitigationInProgress && b.DeletionTimestamp == nil
	if !orphan && b.Status.UnbindStatus != catalog.UnbindRequired {
		if err := c.deleteSecret(ctx, b); err != nil {
			return 0, err
		}
		return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "Nothing was bound at the broker."})
	}
	now := c.now().UTC()
	if b.Status.CurrentOperation != catalog.OperationUnbind {
		// A retry leaves status as the failure left it until the broker
		// answers (see deprovision).
		var err error
		b, err = c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
			st := &b.Status
			st.CurrentOperation, st.OperationStartTime = catalog.OperationUnbind, &now
			if !orphan {
				// Orphan mitigation keeps saying so in Ready.
				setReady(&st.Conditions, catalog.ConditionFalse, reasonUnbindInFlight, msgUnbindInFlight, now)
			}
			return nil
		}, nil)
		if err != nil {
			return 0, err
		}
	}
	env.b = b
	cctx, cancel := c.brokerCall(ctx)
	res, err := env.client.Unbind(cctx, &osb.UnbindRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID,
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID,
		AcceptsIncomplete: true, Identity: identity(b.Spec.UserInfo),
	})
	cancel()
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
		_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
			st := &b.Status
			// The polling duration counts from this request.
			st.AsyncOpInProgress, st.LastOperation, st.OperationStartTime = true, res.Operation, &now
			setReady(&st.Conditions, catalog.ConditionFalse, reasonUnbinding, msgUnbinding, now)
			return nil
		}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonUnbinding, Message: msgUnbinding, Operation: catalog.OperationUnbind})
		return c.pollDelay(&now, 0), err
	}
	return c.unbound(ctx, b, false)
}

// unbound finishes an unbind — gone: the broker answered 410 Gone — the
// Secret goes (a bare kube-apiserver collects no garbage), then the
// binding; or, after orphan mitigation, the bind is tried again after its
// backoff.
func (c *Controller) unbound(ctx context.Context, b *catalog.Binding, gone bool) (time.Duration, error) {
	if err := c.deleteSecret(ctx, b); err != nil {
		return 0, err
	}
	msg, reason := "The binding was deleted at the broker.", "Unbound"
	if gone {
		msg, reason = fmt.Sprintf(goneMessage, "binding"), "UnboundGone"
	}
	if b.DeletionTimestamp != nil {
		return 0, c.finalizeBinding(ctx, b, catalog.EventRecord{Type: "Normal", Reason: reason, Message: msg, Operation: catalog.OperationUnbind})
	}
	now := c.now().UTC()
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		st.OrphanMitigationInProgress, st.AsyncOpInProgress, st.CurrentOperation = false, false, ""
		st.UnbindStatus, st.OperationStartTime = catalog.UnbindSucceeded, nil
		delete(st.Retries, catalog.OperationUnbind)
		setReady(&st.Conditions, catalog.ConditionFalse, reasonOrphanMitigated, msgOrphanMitigated, now)
		return nil
	}, nil, catalog.EventRecord{Type: "Normal", Reason: reasonOrphanMitigated, Message: "Orphan mitigation finished; the bind will be retried. " + msg, Operation: catalog.OperationUnbind})
	// The bind is tried again once its backoff allows.
	return 0, err
}

func (c *Controller) finalizeBinding(ctx context.Context, b *catalog.Binding, e catalog.EventRecord) error {
	if err := c.store.FinalizeBinding(ctx, b.ID, e); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	return nil
}

func (c *Controller) pollBinding(ctx context.Context, env *bindingEnv) (time.Duration, error) {
	b, in := env.b, env.in
	st := b.Status
	if wait, due := c.pollDue(b.ID); !due {
		return wait, nil
	}
	if d, expired := c.pollExpired(env.plan, st.OperationStartTime); expired {
		return c.bindingAsyncFailed(ctx, env, fmt.Sprintf("The operation did not finish within the maximum polling duration (%s).", d))
	}
	cctx, cancel := c.brokerCall(ctx)
	res, err := env.client.LastOperation(cctx, &osb.LastOperationRequest{
		InstanceID: in.Spec.ExternalID, BindingID: b.Spec.ExternalID,
		ServiceID: env.class.Spec.ExternalID, PlanID: env.plan.Spec.ExternalID, Operation: st.LastOperation,
	})
	cancel()
	if err != nil {
		c.metrics.brokerCalls.WithLabelValues("binding_last_operation", "error").Inc()
		return c.bindingPollFailed(ctx, b, err)
	}
	c.metrics.brokerCalls.WithLabelValues("binding_last_operation", "ok").Inc()
	_, pollFailed := st.Retries[retryPoll]
	inProg := res.State == osb.StateInProgress
	if (pollFailed && (res.Gone || inProg)) || (inProg && res.Description != "") {
		// Polling works again, or the broker's word on progress: say so.
		now := c.now().UTC()
		reason, msg := inProgress(st.CurrentOperation, res.Description)
		if _, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
			delete(b.Status.Retries, retryPoll)
			setReady(&b.Status.Conditions, catalog.ConditionFalse, reason, msg, now)
			return nil
		}, nil); err != nil {
			return 0, err
		}
	}
	switch {
	case res.Gone && st.CurrentOperation == catalog.OperationUnbind:
		return c.unbound(ctx, b, true)
	case res.Gone, res.State == osb.StateInProgress:
		return c.polled(b.ID, c.pollDelay(b.Status.OperationStartTime, res.RetryAfter)), nil
	case res.State == osb.StateSucceeded && st.CurrentOperation == catalog.OperationUnbind:
		return c.unbound(ctx, b, false)
	case res.State == osb.StateSucceeded:
		cctx, cancel := c.brokerCall(ctx)
		result, err := env.client.GetBinding(cctx, in.Spec.ExternalID, b.Spec.ExternalID)
		cancel()
		if err != nil {
			// Seen, counted and retried after the backoff, as a failed poll.
			return c.bindingPollFailed(ctx, b, fmt.Errorf("fetch the binding after its asynchronous bind: %w", err))
		}
		return 0, c.bound(ctx, env, result)
	default:
		return c.bindingAsyncFailed(ctx, env, res.Description)
	}
}

// bindingPollFailed makes a failed poll of a binding's operation visible
// (condition, folded history, metric, log) and polls again after the
// backoff.
func (c *Controller) bindingPollFailed(ctx context.Context, b *catalog.Binding, cause error) (time.Duration, error) {
	op := b.Status.CurrentOperation
	c.metrics.pollErrors.WithLabelValues("binding", op).Inc()
	c.log.Warn("poll binding last operation", "binding", b.Namespace+"/"+b.Name, "operation", op, "error", cause)
	msg := fmt.Sprintf("Error polling last operation: %v", cause)
	now := c.now().UTC()
	// Service Catalog left Ready as it was and recorded an Event: the
	// reason stays the operation's, the message says why it is stuck.
	reason, _ := inProgress(op, "")
	var wait time.Duration
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		wait = max(c.failed(&st.Retries, retryPoll, b.Generation, cause), c.pollDelay(st.OperationStartTime, 0))
		setReady(&st.Conditions, catalog.ConditionFalse, reason, msg+retrying(st.Retries, retryPoll), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonPollFailed, Message: msg, Operation: op})
	return c.polled(b.ID, wait), err
}

// bindingAsyncFailed handles an asynchronous bind or unbind that ended
// "failed" or ran past its maximum polling duration: a bind is
// orphan-mitigated, an unbind sent again after the backoff.
func (c *Controller) bindingAsyncFailed(ctx context.Context, env *bindingEnv, description string) (time.Duration, error) {
	b := env.b
	if description == "" {
		description = "The broker reported the operation as failed."
	}
	if b.Status.CurrentOperation == catalog.OperationBind {
		return c.startBindingOrphanMitigation(ctx, b, "Bind call failed: "+description, nil)
	}
	now := c.now().UTC()
	msg := "Unbind call failed: " + description
	var wait time.Duration
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		st := &b.Status
		st.AsyncOpInProgress, st.LastError = false, msg
		wait = c.failed(&st.Retries, catalog.OperationUnbind, b.Generation, nil)
		setReady(&st.Conditions, catalog.ConditionUnknown, reasonUnbindFailed, msg+retrying(st.Retries, catalog.OperationUnbind), now)
		return nil
	}, nil, catalog.EventRecord{Type: "Warning", Reason: reasonUnbindFailed, Message: msg, Operation: catalog.OperationUnbind})
	return wait, err
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
	_, err := c.writeBinding(ctx, b.ID, func(b *catalog.Binding) error {
		b.Status.Binding = c.secretRef(b)
		return nil
	}, nil)
	return err
}
