package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// BindingsToWake lists, for changes of the instances ids (each with its
// namespace and name at the same index), the bindings those changes may
// concern, in one round trip: the bindings linked to one of them that are
// not Ready or are being deleted, and those that name one of them and are
// not linked yet (recorded before it, or left by an instance of that
// name). The engine reads them once per page of the change feed.
func (s *Store) BindingsToWake(ctx context.Context, ids, namespaces, names []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT b.id FROM catalog.bindings b
		WHERE b.instance_id = ANY($1::uuid[]) AND (b.deletion_timestamp IS NOT NULL
			OR NOT coalesce((SELECT c->>'status' = 'True' FROM jsonb_array_elements(b.status->'conditions') c WHERE c->>'type' = 'Ready'), false))
		UNION
		SELECT b.id FROM unnest($2::text[], $3::text[]) AS n(namespace, name)
			JOIN catalog.bindings b ON b.namespace = n.namespace AND b.spec->'instanceRef'->>'name' = n.name
		WHERE b.instance_id IS NULL`, ids, namespaces, names)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
