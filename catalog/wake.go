package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ReasonInstanceNotReady is the reason of a binding's Ready condition
// while it waits for its instance to be Ready (Service Catalog's).
const ReasonInstanceNotReady = "ErrorInstanceNotReady"

// BindingsToWake lists, for changes of the instances ids (each with its
// namespace and name at the same index), the bindings those changes may
// concern, in one round trip: the bindings linked to one of them that are
// not Ready or are being deleted — but not those that wait for their
// instance to be Ready (ReasonInstanceNotReady) while it is still not —
// and those that name one of them and are not linked yet (recorded
// before it, or left by an instance of that name). The engine reads them
// once per page of the change feed.
//
// The conditions are tested by containment, and a binding's instance is
// looked up by its key, and only for a binding that waits for it: joined,
// the instances were hash-joined from a sequential scan of all of them
// whenever the statistics were those of a smaller table (a bulk creation
// before autovacuum caught up: 6-8 ms a call at 3,000 + 3,000 objects, a
// quarter of PostgreSQL's time for the engine). It is planned for its
// arguments at each call: a cached statement's generic plan, made while
// the tables were small, did the same.
func (s *Store) BindingsToWake(ctx context.Context, ids, namespaces, names []string) ([]Key, error) {
	return s.queryKeys(ctx, `SELECT b.namespace, b.id FROM catalog.bindings b
		WHERE b.instance_id = ANY($1::uuid[]) AND (b.deletion_timestamp IS NOT NULL
			OR NOT coalesce(b.status->'conditions' @> '[{"type": "Ready", "status": "True"}]', false)
			AND (NOT coalesce(b.status->'conditions' @> jsonb_build_array(jsonb_build_object('type', 'Ready', 'reason', $4::text)), false)
				OR coalesce((SELECT i.status->'conditions' @> '[{"type": "Ready", "status": "True"}]'
					FROM catalog.instances i WHERE i.id = b.instance_id), false)))
		UNION
		SELECT b.namespace, b.id FROM unnest($2::text[], $3::text[]) AS n(namespace, name)
			JOIN catalog.bindings b ON b.namespace = n.namespace AND b.spec->'instanceRef'->>'name' = n.name
		WHERE b.instance_id IS NULL`, pgx.QueryExecModeExec, ids, namespaces, names, ReasonInstanceNotReady)
}

// Key names an object for the engine's queue: its id, with the namespace
// the engine's lines take turns by.
type Key struct {
	Namespace string
	ID        string
}

// queryKeys runs a query whose rows are a namespace and an id.
func (s *Store) queryKeys(ctx context.Context, sql string, args ...any) ([]Key, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
	return out, mapErr(err)
}
