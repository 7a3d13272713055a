package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// operationArgs is the River job that runs (or finishes) one operation.
type operationArgs struct {
	OperationID string `json:"operation_id"`
	// Deadline is when the broker gives the operation up. Jobs queued
	// before it was recorded have none: theirs is their creation plus the
	// broker's operation deadline.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Kind names the job in River's tables.
func (operationArgs) Kind() string { return "bindery_broker_operation" }

type operationWorker struct {
	river.WorkerDefaults[operationArgs]
	b *Broker
}

// Work runs the operation. An error (the database went away, the attempt
// timed out) makes River retry it with backoff; a driver failure is not an
// error here, it is the operation's result. On the job's last attempt, and
// once the operation's deadline has passed, an error ends the operation as
// failed instead, so that last_operation never says "in progress" for an
// operation nobody works on any more.
func (w *operationWorker) Work(ctx context.Context, job *river.Job[operationArgs]) error {
	op, err := getOperation(ctx, w.b.pool, job.Args.OperationID)
	if errors.Is(err, errNoRow) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline := w.b.jobDeadline(job.JobRow, job.Args)
	var reason string
	switch {
	case !time.Now().Before(deadline):
		reason = fmt.Sprintf("it did not finish within %s", deadline.Sub(op.CreatedAt).Round(time.Second))
	case job.Attempt >= job.MaxAttempts:
		reason = fmt.Sprintf("the broker gave up after %d attempts", job.Attempt)
	}
	_, err = w.b.execute(ctx, op, true)
	if err == nil || reason == "" {
		return err
	}
	return w.b.giveUp(ctx, op, reason, err)
}

// NextRetry is River's own schedule, but never past the operation's
// deadline: the attempt at the deadline is the last.
func (w *operationWorker) NextRetry(job *river.Job[operationArgs]) time.Time {
	next := (&river.DefaultClientRetryPolicy{}).NextRetry(job.JobRow)
	if deadline := w.b.jobDeadline(job.JobRow, job.Args); next.After(deadline) {
		return deadline
	}
	return next
}

// jobDeadline is when the operation of a job is given up.
func (b *Broker) jobDeadline(job *rivertype.JobRow, args operationArgs) time.Time {
	if !args.Deadline.IsZero() {
		return args.Deadline
	}
	return job.CreatedAt.Add(b.opDeadline)
}

// deadline is how long an operation of the plan may take in all: the
// broker's operation deadline, or the plan's maximum_polling_duration when
// that is shorter, since platforms stop polling then.
func (b *Broker) deadline(plan *Plan) time.Duration {
	d := b.opDeadline
	if plan != nil && plan.MaximumPollingDuration != nil {
		d = min(d, time.Duration(*plan.MaximumPollingDuration)*time.Second)
	}
	return d
}

// enqueue records op and its River job in tx, so that the operation cannot
// be lost: an asynchronous one runs as soon as a worker is free; a
// synchronous one runs in the request, and its job, due only after the
// operation timeout, finishes it if the process died first. plan sets the
// operation's deadline.
func (b *Broker) enqueue(ctx context.Context, tx pgx.Tx, op *operation, plan *Plan) error {
	now := time.Now()
	var opts river.InsertOpts
	if !op.Async {
		opts.ScheduledAt = now.Add(b.rescueAfter())
	}
	args := operationArgs{OperationID: op.ID, Deadline: now.Add(b.deadline(plan)).UTC()}
	res, err := b.river.InsertTx(ctx, tx, args, &opts)
	if err != nil {
		return fmt.Errorf("queue operation %s: %w", op.ID, err)
	}
	op.RiverJobID = res.Job.ID
	return insertOperation(ctx, tx, op)
}

// failedPrefix starts the description of a failed operation, by kind.
var failedPrefix = map[string]string{
	kindProvision: "Provisioning", kindUpdate: "Update", kindDeprovision: "Deprovisioning",
	kindBind: "Binding", kindUnbind: "Unbinding",
}

// giveUp ends an operation that is still in progress as failed, with why
// and the last error; a provision or bind leaves its record marked failed,
// for a deprovision or unbind to remove. It runs even when the attempt's
// context has ended.
func (b *Broker) giveUp(ctx context.Context, op *operation, reason string, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	op.State = stateFailed
	op.Description = failedPrefix[op.Kind] + " failed: " + reason
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		op.Description += fmt.Sprintf("; the last attempt was cut off after %s (--operation-timeout)", b.opTimeout)
	case cause != nil:
		op.Description += "; the last attempt ended with: " + cause.Error()
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		ok, err := finishOperation(ctx, tx, op)
		if err != nil || !ok {
			return err
		}
		switch op.Kind {
		case kindProvision:
			return setInstanceProvisioned(ctx, tx, op.InstanceID, instFailed, "")
		case kindBind:
			return setBindingState(ctx, tx, op.BindingID, bindFailed)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record operation %s as failed: %w", op.ID, err)
	}
	b.metrics.operations.WithLabelValues(op.Kind, op.State).Observe(time.Since(op.CreatedAt).Seconds())
	b.log.WarnContext(ctx, "operation given up", "operation", op.ID, "kind", op.Kind, "instance", op.InstanceID, "reason", reason, "error", cause)
	return nil
}

// settleStranded ends an operation in progress whose job no longer exists
// or has finished (River discarded it after an error that even recording
// the failure met, or it was removed by hand): nobody would ever finish it.
// It returns the operation as it now stands.
func (b *Broker) settleStranded(ctx context.Context, op *operation) (*operation, error) {
	if op.State != stateInProgress || op.RiverJobID == 0 {
		return op, nil
	}
	job, err := b.river.JobGet(ctx, op.RiverJobID)
	switch {
	case errors.Is(err, rivertype.ErrNotFound):
	case err != nil:
		return nil, err
	case job.FinalizedAt == nil:
		return op, nil
	}
	if err := b.giveUp(ctx, op, "the broker stopped working on it", nil); err != nil {
		return nil, err
	}
	return getOperation(ctx, b.pool, op.ID)
}

// runSync runs a synchronous operation in the request. The work goes on
// even if the client hangs up, bounded by the operation timeout. A failed
// operation becomes the OSB error of the response.
func (b *Broker) runSync(ctx context.Context, op *operation) (*outcome, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opTimeout)
	defer cancel()
	out, err := b.execute(ctx, op, false)
	if err != nil {
		return nil, err
	}
	done := op
	if out == nil {
		// Another process finished it first: its record says how.
		if done, err = getOperation(ctx, b.pool, op.ID); err != nil {
			return nil, err
		}
		out = &outcome{}
	}
	switch done.State {
	case stateSucceeded:
		return out, nil
	case stateFailed:
		e := errOperationFailed(done.Description)
		if done.Kind == kindUpdate || done.Kind == kindDeprovision {
			e.InstanceUsable = done.InstanceUsable
		}
		if done.Kind == kindUpdate {
			e.UpdateRepeatable = done.UpdateRepeatable
		}
		return nil, e
	default:
		return nil, errOperationFailed("The operation did not finish in time; the broker finishes it in the background.")
	}
}

// errFinished says another process finished the operation first.
var errFinished = errors.New("operation already finished")

// outcome is what a finished operation produced for the response.
type outcome struct {
	dashboardURL string
	credentials  json.RawMessage
	endpoints    []Endpoint
}

// execute does an operation's work through its driver and records the
// result, with the records it changes, in one transaction; op's state and
// description are set to the result. Returning an error leaves the
// operation in progress, to be tried again; a nil outcome without error
// means another process had finished it.
func (b *Broker) execute(ctx context.Context, op *operation, fromJob bool) (*outcome, error) {
	if op.State != stateInProgress {
		return nil, nil
	}
	log := b.log.With("operation", op.ID, "kind", op.Kind, "instance", op.InstanceID)
	if op.BindingID != "" {
		log = log.With("binding", op.BindingID)
	}
	start := time.Now()
	out := &outcome{}
	finish, err := b.work(ctx, op, out)
	if err != nil {
		log.WarnContext(ctx, "operation interrupted; it will be retried", "error", err)
		return nil, err
	}
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		ok, err := finishOperation(ctx, tx, op)
		if err != nil {
			return err
		}
		if !ok {
			return errFinished
		}
		if err := finish(ctx, tx); err != nil {
			return err
		}
		if !fromJob && op.RiverJobID != 0 {
			if _, err := b.river.JobDeleteTx(ctx, tx, op.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
				return fmt.Errorf("delete safety job: %w", err)
			}
		}
		return nil
	})
	if errors.Is(err, errFinished) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record result of operation %s: %w", op.ID, err)
	}
	b.metrics.operations.WithLabelValues(op.Kind, op.State).Observe(time.Since(start).Seconds())
	if op.State == stateFailed {
		log.WarnContext(ctx, "operation failed", "description", op.Description)
	} else {
		log.InfoContext(ctx, "operation succeeded", "duration", time.Since(start))
	}
	return out, nil
}

// finisher records an operation's effect on its instance or binding.
type finisher func(ctx context.Context, tx pgx.Tx) error

// noChange is the finisher of an operation that changes no record.
func noChange(context.Context, pgx.Tx) error { return nil }

// attempt is one try at an operation: its records, its driver, and the
// outcome for the response. Each kind of operation has its method; all
// run under the one River job kind, so jobs queued by an older version
// still run.
type attempt struct {
	b      *Broker
	op     *operation
	in     *instance
	driver Driver
	req    InstanceRequest
	out    *outcome
}

// work calls the driver for op and sets op's result fields. It returns an
// error only when the attempt must be retried.
func (b *Broker) work(ctx context.Context, op *operation, out *outcome) (finisher, error) {
	in, err := getInstance(ctx, b.pool, op.InstanceID)
	if errors.Is(err, errNoRow) {
		return b.fail(op, "The service instance no longer exists."), nil
	}
	if err != nil {
		return nil, err
	}
	plan, _ := b.catalog.Plan(in.PlanID)
	// An update may take an instance off a plan that has left the
	// catalogue: it needs the plan it moves to, which update checks.
	if plan == nil && (op.Kind == kindProvision || op.Kind == kindBind) {
		return b.fail(op, fmt.Sprintf("Plan %s is no longer in the broker's catalog.", in.PlanID)), nil
	}
	driver, ok := b.driverFor(in.ServiceID)
	if !ok {
		return b.fail(op, fmt.Sprintf("Service %s is no longer in the broker's catalog.", in.ServiceID)), nil
	}
	a := &attempt{b: b, op: op, in: in, driver: driver, req: instanceRequest(in, plan), out: out}
	switch op.Kind {
	case kindProvision:
		return a.provision(ctx)
	case kindUpdate:
		return a.update(ctx)
	case kindDeprovision:
		return a.deprovision(ctx)
	case kindBind, kindUnbind:
		bnd, err := getBinding(ctx, b.pool, op.BindingID)
		if errors.Is(err, errNoRow) {
			return b.fail(op, "The service binding no longer exists."), nil
		}
		if err != nil {
			return nil, err
		}
		breq := BindRequest{Instance: a.req, BindingID: bnd.ID, PredecessorBindingID: bnd.PredecessorBindingID, Parameters: bnd.Parameters}
		if op.Kind == kindUnbind {
			return a.unbind(ctx, breq)
		}
		return a.bind(ctx, bnd, breq)
	}
	return b.fail(op, "unknown operation kind "+op.Kind), nil
}

// interrupted reports a driver error caused by the attempt's context
// ending: the work is retried rather than recorded as failed.
func interrupted(ctx context.Context) bool { return ctx.Err() != nil }

func (a *attempt) failed(description string) {
	a.op.State, a.op.Description = stateFailed, description
}

// provision creates the instance. On failure, whatever the driver left
// behind goes at once, so that no database outlives its record; if that
// fails too, the record stays, marked failed, for a deprovision to finish.
func (a *attempt) provision(ctx context.Context) (finisher, error) {
	res, err := a.driver.Provision(ctx, a.req)
	if err == nil {
		a.op.State, a.out.dashboardURL = stateSucceeded, res.DashboardURL
		return func(ctx context.Context, tx pgx.Tx) error {
			return setInstanceProvisioned(ctx, tx, a.in.ID, instReady, res.DashboardURL)
		}, nil
	}
	if interrupted(ctx) {
		return nil, err
	}
	if cerr := a.driver.Deprovision(ctx, a.req); cerr != nil {
		if interrupted(ctx) {
			return nil, cerr
		}
		a.failed("Provisioning failed: " + err.Error() +
			"; removing what was created failed too (" + cerr.Error() + "): deprovision the instance to finish.")
		return func(ctx context.Context, tx pgx.Tx) error {
			return setInstanceProvisioned(ctx, tx, a.in.ID, instFailed, "")
		}, nil
	}
	a.failed("Provisioning failed: " + err.Error())
	return func(ctx context.Context, tx pgx.Tx) error { return deleteInstance(ctx, tx, a.in.ID) }, nil
}

// update applies the operation's plan, parameters and maintenance
// version; a failed update leaves the instance usable, and repeatable.
func (a *attempt) update(ctx context.Context) (finisher, error) {
	op := a.op
	target, ok := a.b.catalog.Plan(op.Request.PlanID)
	if !ok {
		return a.b.fail(op, fmt.Sprintf("Plan %s is no longer in the broker's catalog.", op.Request.PlanID)), nil
	}
	desired := a.req
	desired.PlanID, desired.PlanConfig = target.ID, target.Config
	desired.Parameters, desired.MaintenanceVersion = op.Request.Parameters, op.Request.MaintenanceVersion
	if err := a.driver.Update(ctx, UpdateRequest{Previous: a.req, Desired: desired}); err != nil {
		if interrupted(ctx) {
			return nil, err
		}
		yes := true
		a.failed("Update failed: " + err.Error())
		op.InstanceUsable, op.UpdateRepeatable = &yes, &yes
		return noChange, nil
	}
	op.State = stateSucceeded
	return func(ctx context.Context, tx pgx.Tx) error { return setInstanceUpdated(ctx, tx, a.in.ID, op.Request) }, nil
}

// deprovision removes the instance and, once that succeeded, its record.
func (a *attempt) deprovision(ctx context.Context) (finisher, error) {
	if err := a.driver.Deprovision(ctx, a.req); err != nil {
		if interrupted(ctx) {
			return nil, err
		}
		a.failed("Deprovisioning failed: " + err.Error())
		return noChange, nil
	}
	a.op.State = stateSucceeded
	return func(ctx context.Context, tx pgx.Tx) error { return deleteInstance(ctx, tx, a.in.ID) }, nil
}

// bind creates the binding's credentials and seals them for the record.
// On failure it unbinds at once, as provision deprovisions.
func (a *attempt) bind(ctx context.Context, bnd *binding, breq BindRequest) (finisher, error) {
	res, err := a.driver.Bind(ctx, breq)
	if err != nil {
		if interrupted(ctx) {
			return nil, err
		}
		if cerr := a.driver.Unbind(ctx, breq); cerr != nil {
			if interrupted(ctx) {
				return nil, cerr
			}
			a.failed("Binding failed: " + err.Error() +
				"; removing what was created failed too (" + cerr.Error() + "): unbind to finish.")
			return func(ctx context.Context, tx pgx.Tx) error { return setBindingState(ctx, tx, bnd.ID, bindFailed) }, nil
		}
		a.failed("Binding failed: " + err.Error())
		return func(ctx context.Context, tx pgx.Tx) error { return deleteBinding(ctx, tx, bnd.ID) }, nil
	}
	creds, err := json.Marshal(res.Credentials)
	if err != nil {
		return nil, fmt.Errorf("encode credentials: %w", err)
	}
	sealed := a.b.keys.Seal(creds, []byte(bnd.ID))
	a.op.State, a.out.credentials, a.out.endpoints = stateSucceeded, creds, res.Endpoints
	return func(ctx context.Context, tx pgx.Tx) error {
		return setBindingBound(ctx, tx, bnd.ID, sealed, res.Endpoints)
	}, nil
}

// unbind revokes the binding's credentials and, once that succeeded,
// removes its record.
func (a *attempt) unbind(ctx context.Context, breq BindRequest) (finisher, error) {
	if err := a.driver.Unbind(ctx, breq); err != nil {
		if interrupted(ctx) {
			return nil, err
		}
		a.failed("Unbinding failed: " + err.Error())
		return noChange, nil
	}
	a.op.State = stateSucceeded
	return func(ctx context.Context, tx pgx.Tx) error { return deleteBinding(ctx, tx, breq.BindingID) }, nil
}

// fail records op as failed with nothing else to change.
func (b *Broker) fail(op *operation, description string) finisher {
	op.State, op.Description = stateFailed, description
	return noChange
}

// capacityCheckTimeout bounds the capacity check of a provision or plan
// change. The check reads the service (the target cluster), which may
// hang; every such request, an asynchronous one included, waits on it, so
// past this the broker cannot tell, and lets the request through.
const capacityCheckTimeout = 2 * time.Second

// checkCapacity asks the service's driver, when it can tell, whether req
// fits; a *CapacityError becomes the OSB refusal. A driver that cannot
// tell within capacityCheckTimeout lets the request through: its
// operation decides.
func (b *Broker) checkCapacity(ctx context.Context, req InstanceRequest) error {
	driver, _ := b.driverFor(req.ServiceID)
	checker, ok := driver.(CapacityChecker)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, capacityCheckTimeout)
	defer cancel()
	err := checker.CheckCapacity(cctx, req)
	var ce *CapacityError
	switch {
	case errors.As(err, &ce):
		return errCapacity(ce)
	case err != nil:
		b.log.WarnContext(ctx, "cannot check capacity; the request goes on", "instance", req.InstanceID, "plan", req.PlanID, "error", err)
	}
	return nil
}

func (b *Broker) driverFor(serviceID string) (Driver, bool) {
	svc, ok := b.catalog.ServiceByID(serviceID)
	if !ok {
		return nil, false
	}
	return b.drivers[svc.Driver], true
}

func instanceRequest(in *instance, plan *Plan) InstanceRequest {
	req := InstanceRequest{
		InstanceID: in.ID, ServiceID: in.ServiceID, PlanID: in.PlanID,
		Parameters: in.Parameters, MaintenanceVersion: in.MaintenanceVersion,
	}
	if plan != nil {
		req.PlanConfig = plan.Config
	}
	return req
}
