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
}

// Kind names the job in River's tables.
func (operationArgs) Kind() string { return "bindery_broker_operation" }

type operationWorker struct {
	river.WorkerDefaults[operationArgs]
	b *Broker
}

// Work runs the operation. An error (the database went away, the attempt
// timed out) makes River retry it with backoff; a driver failure is not an
// error here, it is the operation's result.
func (w *operationWorker) Work(ctx context.Context, job *river.Job[operationArgs]) error {
	op, err := getOperation(ctx, w.b.pool, job.Args.OperationID)
	if errors.Is(err, errNoRow) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = w.b.execute(ctx, op, true)
	return err
}

// enqueue records op and its River job in tx, so that the operation cannot
// be lost: an asynchronous one runs as soon as a worker is free; a
// synchronous one runs in the request, and its job, due only after the
// operation timeout, finishes it if the process died first.
func (b *Broker) enqueue(ctx context.Context, tx pgx.Tx, op *operation) error {
	opts := &river.InsertOpts{MaxAttempts: 25}
	if !op.Async {
		opts.ScheduledAt = time.Now().Add(b.rescueAfter())
	}
	res, err := b.river.InsertTx(ctx, tx, operationArgs{OperationID: op.ID}, opts)
	if err != nil {
		return fmt.Errorf("queue operation %s: %w", op.ID, err)
	}
	op.RiverJobID = res.Job.ID
	return insertOperation(ctx, tx, op)
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
	err = inTx(ctx, b.pool, func(tx pgx.Tx) error {
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
	if plan == nil && (op.Kind == kindProvision || op.Kind == kindUpdate || op.Kind == kindBind) {
		return b.fail(op, fmt.Sprintf("Plan %s is no longer in the broker's catalog.", in.PlanID)), nil
	}
	driver, ok := b.driverFor(in.ServiceID)
	if !ok {
		return b.fail(op, fmt.Sprintf("Service %s is no longer in the broker's catalog.", in.ServiceID)), nil
	}
	req := instanceRequest(in, plan)
	// interrupted reports a driver error caused by the attempt's context
	// ending: the work is retried rather than recorded as failed.
	interrupted := func(error) bool { return ctx.Err() != nil }

	switch op.Kind {
	case kindProvision:
		res, err := driver.Provision(ctx, req)
		if err != nil {
			if interrupted(err) {
				return nil, err
			}
			// Whatever the driver left behind goes now, so that no database
			// outlives its record; if that fails too, the record stays.
			if cerr := driver.Deprovision(ctx, req); cerr != nil {
				if interrupted(cerr) {
					return nil, cerr
				}
				op.State, op.Description = stateFailed, "Provisioning failed: "+err.Error()+
					"; removing what was created failed too ("+cerr.Error()+"): deprovision the instance to finish."
				return func(ctx context.Context, tx pgx.Tx) error {
					return setInstanceProvisioned(ctx, tx, in.ID, instFailed, "")
				}, nil
			}
			op.State, op.Description = stateFailed, "Provisioning failed: "+err.Error()
			return func(ctx context.Context, tx pgx.Tx) error { return deleteInstance(ctx, tx, in.ID) }, nil
		}
		op.State, out.dashboardURL = stateSucceeded, res.DashboardURL
		return func(ctx context.Context, tx pgx.Tx) error {
			return setInstanceProvisioned(ctx, tx, in.ID, instReady, res.DashboardURL)
		}, nil

	case kindUpdate:
		target, ok := b.catalog.Plan(op.Request.PlanID)
		if !ok {
			return b.fail(op, fmt.Sprintf("Plan %s is no longer in the broker's catalog.", op.Request.PlanID)), nil
		}
		desired := req
		desired.PlanID, desired.PlanConfig = target.ID, target.Config
		desired.Parameters, desired.MaintenanceVersion = op.Request.Parameters, op.Request.MaintenanceVersion
		if err := driver.Update(ctx, UpdateRequest{Previous: req, Desired: desired}); err != nil {
			if interrupted(err) {
				return nil, err
			}
			yes := true
			op.State, op.Description = stateFailed, "Update failed: "+err.Error()
			op.InstanceUsable, op.UpdateRepeatable = &yes, &yes
			return func(context.Context, pgx.Tx) error { return nil }, nil
		}
		op.State = stateSucceeded
		return func(ctx context.Context, tx pgx.Tx) error { return setInstanceUpdated(ctx, tx, in.ID, op.Request) }, nil

	case kindDeprovision:
		if err := driver.Deprovision(ctx, req); err != nil {
			if interrupted(err) {
				return nil, err
			}
			op.State, op.Description = stateFailed, "Deprovisioning failed: "+err.Error()
			return func(context.Context, pgx.Tx) error { return nil }, nil
		}
		op.State = stateSucceeded
		return func(ctx context.Context, tx pgx.Tx) error { return deleteInstance(ctx, tx, in.ID) }, nil

	case kindBind, kindUnbind:
		bnd, err := getBinding(ctx, b.pool, op.BindingID)
		if errors.Is(err, errNoRow) {
			return b.fail(op, "The service binding no longer exists."), nil
		}
		if err != nil {
			return nil, err
		}
		breq := BindRequest{Instance: req, BindingID: bnd.ID, PredecessorBindingID: bnd.PredecessorBindingID, Parameters: bnd.Parameters}
		if op.Kind == kindUnbind {
			if err := driver.Unbind(ctx, breq); err != nil {
				if interrupted(err) {
					return nil, err
				}
				op.State, op.Description = stateFailed, "Unbinding failed: "+err.Error()
				return func(context.Context, pgx.Tx) error { return nil }, nil
			}
			op.State = stateSucceeded
			return func(ctx context.Context, tx pgx.Tx) error { return deleteBinding(ctx, tx, bnd.ID) }, nil
		}
		res, err := driver.Bind(ctx, breq)
		if err != nil {
			if interrupted(err) {
				return nil, err
			}
			if cerr := driver.Unbind(ctx, breq); cerr != nil {
				if interrupted(cerr) {
					return nil, cerr
				}
				op.State, op.Description = stateFailed, "Binding failed: "+err.Error()+
					"; removing what was created failed too ("+cerr.Error()+"): unbind to finish."
				return func(ctx context.Context, tx pgx.Tx) error { return setBindingState(ctx, tx, bnd.ID, bindFailed) }, nil
			}
			op.State, op.Description = stateFailed, "Binding failed: "+err.Error()
			return func(ctx context.Context, tx pgx.Tx) error { return deleteBinding(ctx, tx, bnd.ID) }, nil
		}
		creds, err := json.Marshal(res.Credentials)
		if err != nil {
			return nil, fmt.Errorf("encode credentials: %w", err)
		}
		sealed := b.keys.Seal(creds, []byte(bnd.ID))
		op.State, out.credentials, out.endpoints = stateSucceeded, creds, res.Endpoints
		return func(ctx context.Context, tx pgx.Tx) error {
			return setBindingBound(ctx, tx, bnd.ID, sealed, res.Endpoints)
		}, nil
	}
	return b.fail(op, "unknown operation kind "+op.Kind), nil
}

// fail records op as failed with nothing else to change.
func (b *Broker) fail(op *operation, description string) finisher {
	op.State, op.Description = stateFailed, description
	return func(context.Context, pgx.Tx) error { return nil }
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
