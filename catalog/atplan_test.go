package catalog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/catalog"
)

// TestFeedAtPlanReadsByObject: the read of what a few objects were at a
// revision finds each object's changes by its key, also in a cached
// generic plan made while the feed's statistics were those of a few rows:
// filtered through object_id = ANY($3), that plan walked the kind's index
// over every revision up to the bound and dropped all but a few rows
// (49,997 of 50,000 at 100,000 changes).
func TestFeedAtPlanReadsByObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := oneConnStore(t)
	for _, sql := range []string{
		`ALTER TABLE catalog.changes SET (autovacuum_enabled = off)`,
		`INSERT INTO catalog.changes (revision, kind, object_id, namespace, name, type, object)
		SELECT g, CASE WHEN g % 2 = 0 THEN 'ServiceInstance' ELSE 'ServiceBinding' END, gen_random_uuid(), 'team', 'i' || g, 'ADDED', '{}' FROM generate_series(1, 10) g`,
		`ANALYZE catalog.changes`,
		`INSERT INTO catalog.changes (revision, kind, object_id, namespace, name, type, object)
		SELECT g, CASE WHEN g % 2 = 0 THEN 'ServiceInstance' ELSE 'ServiceBinding' END, gen_random_uuid(), 'team', 'i' || g, 'ADDED', '{}' FROM generate_series(11, 100000) g`,
		`PREPARE feed_at(text, bigint, uuid[]) AS ` + catalog.FeedAtSQL,
		`SET plan_cache_mode = force_generic_plan`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var ids []string
	rows, err := pool.Query(ctx, `SELECT object_id::text FROM catalog.changes WHERE revision BETWEEN 10000 AND 10005`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != 6 {
		t.Fatalf("%d ids, %v", len(ids), rows.Err())
	}
	plan := explain(t, pool, `EXECUTE feed_at('ServiceInstance', 100000, $1)`, pgx.QueryExecModeSimpleProtocol, ids)
	text := strings.Join(plan, "\n")
	removed := rowsRemoved(text)
	if !strings.Contains(text, "changes_object_idx") || removed > 100 || strings.Contains(text, "Seq Scan on changes") {
		t.Errorf("the generic plan of a read of 6 objects does not look them up by key:\n%s", text)
	}
}

// explain runs EXPLAIN (ANALYZE) of sql with args on q and returns the
// plan's lines.
func explain(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return plan
}
