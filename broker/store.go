package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is the only one in the broker that holds SQL. pgx errors are
// mapped here: pgx.ErrNoRows becomes errNoRow, unique violations errDuplicate.

var (
	errNoRow     = errors.New("no such row")
	errDuplicate = errors.New("duplicate row")
)

// Operation states, as OSB last_operation reports them.
const (
	stateInProgress = "in progress"
	stateSucceeded  = "succeeded"
	stateFailed     = "failed"
)

// Operation kinds.
const (
	kindProvision   = "provision"
	kindUpdate      = "update"
	kindDeprovision = "deprovision"
	kindBind        = "bind"
	kindUnbind      = "unbind"
)

// Instance and binding states.
const (
	instProvisioning = "provisioning"
	instReady        = "ready"
	// instFailed marks an instance whose provision failed and whose clean-up
	// failed too: the record stays so that a deprovision can finish it.
	instFailed = "failed"

	bindBinding = "binding"
	bindBound   = "bound"
	bindFailed  = "failed"
)

type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRow
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("%w: %s", errDuplicate, pgErr.ConstraintName)
	}
	return err
}

type instance struct {
	ID                 string
	ServiceID          string
	PlanID             string
	State              string
	Parameters         map[string]any
	Context            json.RawMessage
	OrganizationGUID   string
	SpaceGUID          string
	MaintenanceVersion string
	DashboardURL       string
}

type binding struct {
	ID                   string
	InstanceID           string
	ServiceID            string
	PlanID               string
	State                string
	Parameters           map[string]any
	Context              json.RawMessage
	BindResource         json.RawMessage
	AppGUID              string
	PredecessorBindingID string
	Credentials          []byte // sealed
	Endpoints            []Endpoint
}

// opRequest is what an operation was asked to do, kept with it so that a
// resumed operation does the same.
type opRequest struct {
	PlanID             string         `json:"plan_id,omitempty"`
	Parameters         map[string]any `json:"parameters,omitempty"`
	MaintenanceVersion string         `json:"maintenance_version,omitempty"`
}

type operation struct {
	ID               string
	InstanceID       string
	BindingID        string
	Kind             string
	State            string
	Async            bool
	Description      string
	Request          opRequest
	InstanceUsable   *bool
	UpdateRepeatable *bool
	Platform         string
	Identity         json.RawMessage
	RequestIdentity  string
	RiverJobID       int64
	CreatedAt        time.Time
}

func jsonb(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		if len(v) == 0 {
			return nil, nil
		}
		return v, nil
	case map[string]any:
		if v == nil {
			return nil, nil
		}
	case []Endpoint:
		if v == nil {
			return nil, nil
		}
	}
	return json.Marshal(v)
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Catalog.

func saveCatalog(ctx context.Context, q querier, doc []byte, etag string) error {
	_, err := q.Exec(ctx, `INSERT INTO broker.catalog (id, document, etag) VALUES (true, $1, $2)
		ON CONFLICT (id) DO UPDATE SET document = excluded.document, etag = excluded.etag, updated_at = now()
		WHERE broker.catalog.etag <> excluded.etag`, doc, etag)
	return mapErr(err)
}

// Instances.

const instanceColumns = `id, service_id, plan_id, state, parameters, context,
	coalesce(organization_guid, ''), coalesce(space_guid, ''), coalesce(maintenance_version, ''), coalesce(dashboard_url, '')`

func scanInstance(row pgx.Row) (*instance, error) {
	var in instance
	var params, ctxDoc []byte
	if err := row.Scan(&in.ID, &in.ServiceID, &in.PlanID, &in.State, &params, &ctxDoc,
		&in.OrganizationGUID, &in.SpaceGUID, &in.MaintenanceVersion, &in.DashboardURL); err != nil {
		return nil, mapErr(err)
	}
	if params != nil {
		if err := json.Unmarshal(params, &in.Parameters); err != nil {
			return nil, fmt.Errorf("decode parameters of instance %s: %w", in.ID, err)
		}
	}
	if ctxDoc != nil {
		in.Context = ctxDoc
	}
	return &in, nil
}

func getInstance(ctx context.Context, q querier, id string) (*instance, error) {
	return scanInstance(q.QueryRow(ctx, `SELECT `+instanceColumns+` FROM broker.instances WHERE id = $1`, id))
}

func lockInstance(ctx context.Context, q querier, id string) (*instance, error) {
	return scanInstance(q.QueryRow(ctx, `SELECT `+instanceColumns+` FROM broker.instances WHERE id = $1 FOR UPDATE`, id))
}

// insertInstance inserts in unless a row with its id exists; it reports
// whether it inserted.
func insertInstance(ctx context.Context, q querier, in *instance) (bool, error) {
	params, err := jsonb(in.Parameters)
	if err != nil {
		return false, err
	}
	ctxDoc, _ := jsonb(in.Context)
	tag, err := q.Exec(ctx, `INSERT INTO broker.instances
		(id, service_id, plan_id, state, parameters, context, organization_guid, space_guid, maintenance_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
		in.ID, in.ServiceID, in.PlanID, in.State, params, ctxDoc,
		nullIfEmpty(in.OrganizationGUID), nullIfEmpty(in.SpaceGUID), nullIfEmpty(in.MaintenanceVersion))
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

func setInstanceProvisioned(ctx context.Context, q querier, id, state, dashboardURL string) error {
	_, err := q.Exec(ctx, `UPDATE broker.instances SET state = $2, dashboard_url = $3, updated_at = now() WHERE id = $1`,
		id, state, nullIfEmpty(dashboardURL))
	return mapErr(err)
}

func setInstanceUpdated(ctx context.Context, q querier, id string, req opRequest) error {
	params, err := jsonb(req.Parameters)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE broker.instances SET plan_id = $2, parameters = $3,
		maintenance_version = $4, updated_at = now() WHERE id = $1`,
		id, req.PlanID, params, nullIfEmpty(req.MaintenanceVersion))
	return mapErr(err)
}

func setInstanceContext(ctx context.Context, q querier, id string, doc json.RawMessage) error {
	_, err := q.Exec(ctx, `UPDATE broker.instances SET context = $2, updated_at = now() WHERE id = $1`, id, []byte(doc))
	return mapErr(err)
}

func deleteInstance(ctx context.Context, q querier, id string) error {
	_, err := q.Exec(ctx, `DELETE FROM broker.instances WHERE id = $1`, id)
	return mapErr(err)
}

// Bindings.

const bindingColumns = `id, instance_id, service_id, plan_id, state, parameters, context, bind_resource,
	coalesce(app_guid, ''), coalesce(predecessor_binding_id, ''), credentials, endpoints`

func scanBinding(row pgx.Row) (*binding, error) {
	var b binding
	var params, ctxDoc, res, endpoints []byte
	if err := row.Scan(&b.ID, &b.InstanceID, &b.ServiceID, &b.PlanID, &b.State, &params, &ctxDoc, &res,
		&b.AppGUID, &b.PredecessorBindingID, &b.Credentials, &endpoints); err != nil {
		return nil, mapErr(err)
	}
	if params != nil {
		if err := json.Unmarshal(params, &b.Parameters); err != nil {
			return nil, fmt.Errorf("decode parameters of binding %s: %w", b.ID, err)
		}
	}
	if endpoints != nil {
		if err := json.Unmarshal(endpoints, &b.Endpoints); err != nil {
			return nil, fmt.Errorf("decode endpoints of binding %s: %w", b.ID, err)
		}
	}
	b.Context, b.BindResource = ctxDoc, res
	return &b, nil
}

func getBinding(ctx context.Context, q querier, id string) (*binding, error) {
	return scanBinding(q.QueryRow(ctx, `SELECT `+bindingColumns+` FROM broker.bindings WHERE id = $1`, id))
}

func lockBinding(ctx context.Context, q querier, id string) (*binding, error) {
	return scanBinding(q.QueryRow(ctx, `SELECT `+bindingColumns+` FROM broker.bindings WHERE id = $1 FOR UPDATE`, id))
}

func insertBinding(ctx context.Context, q querier, b *binding) (bool, error) {
	params, err := jsonb(b.Parameters)
	if err != nil {
		return false, err
	}
	ctxDoc, _ := jsonb(b.Context)
	res, _ := jsonb(b.BindResource)
	tag, err := q.Exec(ctx, `INSERT INTO broker.bindings
		(id, instance_id, service_id, plan_id, state, parameters, context, bind_resource, app_guid, predecessor_binding_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`,
		b.ID, b.InstanceID, b.ServiceID, b.PlanID, b.State, params, ctxDoc, res,
		nullIfEmpty(b.AppGUID), nullIfEmpty(b.PredecessorBindingID))
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

func setBindingBound(ctx context.Context, q querier, id string, sealed []byte, endpoints []Endpoint) error {
	eps, err := jsonb(endpoints)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE broker.bindings SET state = $2, credentials = $3, endpoints = $4, updated_at = now() WHERE id = $1`,
		id, bindBound, sealed, eps)
	return mapErr(err)
}

func setBindingState(ctx context.Context, q querier, id, state string) error {
	_, err := q.Exec(ctx, `UPDATE broker.bindings SET state = $2, updated_at = now() WHERE id = $1`, id, state)
	return mapErr(err)
}

func deleteBinding(ctx context.Context, q querier, id string) error {
	_, err := q.Exec(ctx, `DELETE FROM broker.bindings WHERE id = $1`, id)
	return mapErr(err)
}

// Operations.

const operationColumns = `id, instance_id, coalesce(binding_id, ''), kind, state, async, coalesce(description, ''),
	request, instance_usable, update_repeatable, coalesce(originating_platform, ''), originating_identity,
	coalesce(request_identity, ''), coalesce(river_job_id, 0), created_at`

func scanOperation(row pgx.Row) (*operation, error) {
	var op operation
	var req, identity []byte
	if err := row.Scan(&op.ID, &op.InstanceID, &op.BindingID, &op.Kind, &op.State, &op.Async, &op.Description,
		&req, &op.InstanceUsable, &op.UpdateRepeatable, &op.Platform, &identity, &op.RequestIdentity, &op.RiverJobID, &op.CreatedAt); err != nil {
		return nil, mapErr(err)
	}
	if err := json.Unmarshal(req, &op.Request); err != nil {
		return nil, fmt.Errorf("decode request of operation %s: %w", op.ID, err)
	}
	op.Identity = identity
	return &op, nil
}

func getOperation(ctx context.Context, q querier, id string) (*operation, error) {
	return scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM broker.operations WHERE id = $1`, id))
}

// lastOperation is the newest operation of an instance (bindingID "") or of
// a binding.
func lastOperation(ctx context.Context, q querier, instanceID, bindingID string) (*operation, error) {
	if bindingID == "" {
		return scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM broker.operations
			WHERE instance_id = $1 AND binding_id IS NULL ORDER BY created_at DESC, id LIMIT 1`, instanceID))
	}
	return scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM broker.operations
		WHERE binding_id = $1 AND instance_id = $2 ORDER BY created_at DESC, id LIMIT 1`, bindingID, instanceID))
}

// runningOperation is the operation in progress on an instance (bindingID
// "") or a binding, if any.
func runningOperation(ctx context.Context, q querier, instanceID, bindingID string) (*operation, error) {
	if bindingID == "" {
		return scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM broker.operations
			WHERE instance_id = $1 AND binding_id IS NULL AND state = 'in progress'`, instanceID))
	}
	return scanOperation(q.QueryRow(ctx, `SELECT `+operationColumns+` FROM broker.operations
		WHERE binding_id = $1 AND state = 'in progress'`, bindingID))
}

// bindingsBusy reports whether any binding of the instance has an
// operation in progress.
func bindingsBusy(ctx context.Context, q querier, instanceID string) (bool, error) {
	var busy bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM broker.operations
		WHERE instance_id = $1 AND binding_id IS NOT NULL AND state = 'in progress')`, instanceID).Scan(&busy)
	return busy, mapErr(err)
}

func insertOperation(ctx context.Context, q querier, op *operation) error {
	req, err := json.Marshal(op.Request)
	if err != nil {
		return err
	}
	identity, _ := jsonb(op.Identity)
	_, err = q.Exec(ctx, `INSERT INTO broker.operations
		(id, instance_id, binding_id, kind, state, async, request, originating_platform, originating_identity, request_identity, river_job_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		op.ID, op.InstanceID, nullIfEmpty(op.BindingID), op.Kind, op.State, op.Async, req,
		nullIfEmpty(op.Platform), identity, nullIfEmpty(op.RequestIdentity), op.RiverJobID)
	return mapErr(err)
}

// finishOperation records the end of an operation that is still in
// progress; it reports false when another process finished it first.
func finishOperation(ctx context.Context, q querier, op *operation) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE broker.operations SET state = $2, description = $3, instance_usable = $4,
		update_repeatable = $5, updated_at = now() WHERE id = $1 AND state = 'in progress'`,
		op.ID, op.State, nullIfEmpty(op.Description), op.InstanceUsable, op.UpdateRepeatable)
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// pruneOperations removes at most limit finished operations: those past
// the newest kept of their instance or binding, and those finished before
// retention ago, unless one is the newest of an instance or binding that
// still exists (last_operation answers from it). The newest are in the
// order lastOperation reads them.
func pruneOperations(ctx context.Context, q querier, retention time.Duration, kept, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM broker.operations WHERE id IN (
		SELECT id FROM (
			SELECT o.id, o.state, o.updated_at, o.instance_id, o.binding_id,
				row_number() OVER (PARTITION BY o.instance_id, o.binding_id ORDER BY o.created_at DESC, o.id) AS newest
			FROM broker.operations o) f
		WHERE f.state <> 'in progress' AND (f.newest > $2
			OR (f.updated_at < now() - make_interval(secs => $1) AND NOT (f.newest = 1 AND CASE
				WHEN f.binding_id IS NULL THEN EXISTS (SELECT FROM broker.instances i WHERE i.id = f.instance_id)
				ELSE EXISTS (SELECT FROM broker.bindings b WHERE b.id = f.binding_id) END)))
		LIMIT $3)`, retention.Seconds(), kept, limit)
	if err != nil {
		return 0, mapErr(err)
	}
	return tag.RowsAffected(), nil
}
