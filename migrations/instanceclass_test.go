package migrations

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestInstanceClassFromRef: 0031 gives each instance the class its spec
// refers to, where releases before it had taken its plan's current class
// (another service's, after the broker moved the plan), which let a
// relist delete the class the spec names. Instances already right, and
// ones waiting for their class, are left as they are.
func TestInstanceClassFromRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	catalogDownTo(t, pool, 30)
	if _, err := pool.Exec(ctx, `
		INSERT INTO catalog.brokers (id, name, spec, resource_version) VALUES ('00000000-0000-0000-0000-0000000000b1', 'b', '{}', 1);
		INSERT INTO catalog.service_classes (id, broker_id, name, external_id, external_name, position, removed, spec, osb, resource_version) VALUES
			('00000000-0000-0000-0000-0000000000c1', '00000000-0000-0000-0000-0000000000b1', 'old', 'old', 'old', 1, true, '{}', '{}', 1),
			('00000000-0000-0000-0000-0000000000c2', '00000000-0000-0000-0000-0000000000b1', 'new', 'new', 'new', 2, false, '{}', '{}', 1);
		INSERT INTO catalog.service_plans (id, broker_id, class_id, name, external_id, external_name, position, spec, osb, resource_version) VALUES
			('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000c2', 'p', 'p', 'p', 1, '{}', '{}', 1);
		INSERT INTO catalog.instances (id, namespace, name, class_id, plan_id, spec, resource_version) VALUES
			('00000000-0000-0000-0000-000000000001', 'team', 'moved', '00000000-0000-0000-0000-0000000000c2', '00000000-0000-0000-0000-0000000000d1',
				'{"clusterServiceClassRef": {"name": "old"}, "clusterServicePlanRef": {"name": "p"}}', 1),
			('00000000-0000-0000-0000-000000000002', 'team', 'right', '00000000-0000-0000-0000-0000000000c2', '00000000-0000-0000-0000-0000000000d1',
				'{"clusterServiceClassRef": {"name": "new"}, "clusterServicePlanRef": {"name": "p"}}', 1),
			('00000000-0000-0000-0000-000000000003', 'team', 'waiting', NULL, NULL, '{"clusterServiceClassExternalName": "old"}', 1)`); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT i.name, coalesce(c.name, '') FROM catalog.instances i LEFT JOIN catalog.service_classes c ON c.id = i.class_id ORDER BY i.name`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var name, class string
		if err := rows.Scan(&name, &class); err != nil {
			t.Fatal(err)
		}
		got[name] = class
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"moved": "old", "right": "new", "waiting": ""}
	for name, class := range want {
		if got[name] != class {
			t.Errorf("instance %s holds class %q, want %q", name, got[name], class)
		}
	}
}
