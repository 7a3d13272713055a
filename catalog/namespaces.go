package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// NamespacesAmong is Namespaces for a reader of some namespaces only: those
// of among that hold instances, bindings or brokers of their own, in
// order. Namespaces' limit would cut the list before a reader's own.
func (s *Store) NamespacesAmong(ctx context.Context, among []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ns FROM unnest($1::text[]) AS u(ns)
		WHERE EXISTS (SELECT 1 FROM catalog.instances WHERE namespace = u.ns)
			OR EXISTS (SELECT 1 FROM catalog.bindings WHERE namespace = u.ns)
			OR EXISTS (SELECT 1 FROM catalog.brokers WHERE namespace = u.ns)
		ORDER BY 1`, among)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}

// Namespaces lists, in order, the namespaces that hold instances, bindings
// or brokers of their own (at most limit), for completing a namespace on a
// command line. Each table's distinct namespaces are read by skipping
// along its (namespace, name) index, one probe per namespace, so the cost
// follows the number of namespaces, not of objects.
func (s *Store) Namespaces(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE i(ns) AS (
			(SELECT namespace FROM catalog.instances ORDER BY namespace LIMIT 1)
			UNION ALL
			SELECT (SELECT namespace FROM catalog.instances WHERE namespace > i.ns ORDER BY namespace LIMIT 1) FROM i WHERE i.ns IS NOT NULL
		), b(ns) AS (
			(SELECT namespace FROM catalog.bindings ORDER BY namespace LIMIT 1)
			UNION ALL
			SELECT (SELECT namespace FROM catalog.bindings WHERE namespace > b.ns ORDER BY namespace LIMIT 1) FROM b WHERE b.ns IS NOT NULL
		)
		SELECT ns FROM i WHERE ns IS NOT NULL
		UNION SELECT ns FROM b WHERE ns IS NOT NULL
		UNION SELECT namespace FROM catalog.brokers WHERE namespace <> ''
		ORDER BY 1 LIMIT $1`, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
