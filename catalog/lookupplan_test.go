package catalog_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestCatalogueLookupsByExternalName: a class found by its external name
// (as an instance's spec, svcat and the marketplace name it) and a
// quota's plans found by id or by external names are read by key in a
// catalogue of 100,000 plans, also in cached generic plans made while the
// tables held a few rows. Before, each read every class or plan.
func TestCatalogueLookupsByExternalName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	registerIn(t, s, "", "fake", fake.URL())
	for _, sql := range []string{
		`ALTER TABLE catalog.service_classes SET (autovacuum_enabled = off)`,
		`ALTER TABLE catalog.service_plans SET (autovacuum_enabled = off)`,
		`ANALYZE catalog.service_classes`,
		`ANALYZE catalog.service_plans`,
		`INSERT INTO catalog.service_classes (id, broker_id, name, external_id, external_name, position, spec, osb, resource_version)
		SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, c.broker_id, 'class-' || g, 'class-id-' || g, 'class-' || g, 100 + g, c.spec, c.osb, 1
		FROM (SELECT * FROM catalog.service_classes LIMIT 1) c, generate_series(1, 20000) g`,
		`INSERT INTO catalog.service_plans (id, broker_id, class_id, name, external_id, external_name, position, spec, osb, resource_version)
		SELECT gen_random_uuid(), p.broker_id, ('00000000-0000-4000-8000-' || lpad(to_hex(g / 5 + 1), 12, '0'))::uuid, 'plan-' || g, 'plan-id-' || g, 'plan-' || g % 5, 100 + g, p.spec, p.osb, 1
		FROM (SELECT * FROM catalog.service_plans LIMIT 1) p, generate_series(0, 99999) g`,
		`PREPARE quota_plans(text[], text[], text[]) AS ` + catalog.QuotaPlanIDsSQL,
		`PREPARE class_by_name(text, text) AS SELECT id FROM catalog.service_classes WHERE external_name = $1 AND namespace = $2 AND NOT removed`,
		`PREPARE plan_by_name(text, text) AS SELECT id FROM catalog.service_plans WHERE namespace = $2 AND (external_name = $1 OR name = $1) AND NOT removed`,
		`SET plan_cache_mode = force_generic_plan`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var planID string
	if err := pool.QueryRow(ctx, `SELECT id::text FROM catalog.service_plans WHERE name = 'plan-777'`).Scan(&planID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`EXECUTE quota_plans($1, $2, $3)`, []any{[]string{planID, ""}, []string{"", "class-155"}, []string{"", "plan-3"}}},
		{`EXECUTE class_by_name('class-155', '')`, nil},
		{`EXECUTE plan_by_name('plan-3', '')`, nil},
	} {
		plan := strings.Join(explain(t, pool, q.sql, append([]any{pgx.QueryExecModeSimpleProtocol}, q.args...)...), "\n")
		if removed := rowsRemoved(plan); removed > 100 || strings.Contains(plan, "Seq Scan on service_") {
			t.Errorf("%s reads a whole table (%d rows removed by filter):\n%s", q.sql, removed, plan)
		}
	}
	// The lookups find what they look for.
	var found []*string
	if err := pool.QueryRow(ctx, `EXECUTE quota_plans($1, $2, $3)`, pgx.QueryExecModeSimpleProtocol,
		[]string{planID, "", "6c0a8e2e-0000-4000-8000-000000000000"}, []string{"", "class-155", ""}, []string{"", "plan-3", ""}).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 || found[0] == nil || *found[0] != planID || found[1] == nil || found[2] != nil {
		t.Errorf("quota plans: %v", found)
	}
}

// rowsRemoved is how many rows an EXPLAIN ANALYZE plan read and dropped
// by a filter.
func rowsRemoved(plan string) int {
	removed := 0
	for _, m := range regexp.MustCompile(`Rows Removed by Filter: ([0-9]+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		removed += n
	}
	return removed
}
