package catalog_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// TestBindingsToWake: an instance's change wakes its bindings that are not
// Ready, except those that wait for it to be Ready while it still is not
// (each of its writes until then would wake them for nothing); its
// Ready, or a binding's deletion, wakes them.
func TestBindingsToWake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	in, err := s.CreateInstance(ctx, newInstance("db", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"}))
	if err != nil {
		t.Fatal(err)
	}
	bind := func(name, reason string) *catalog.Binding {
		b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
		b.Name, b.Namespace = name, "team"
		b, err := s.CreateBinding(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if b, err = s.UpdateBindingStatus(ctx, b.ID, func(b *catalog.Binding) error {
			catalog.SetCondition(&b.Status.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionFalse, Reason: reason}, time.Now())
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		return b
	}
	waiting := bind("waiting", catalog.ReasonInstanceNotReady)
	other := bind("other", "ErrorNonexistentServicePlan")
	woken := func(want ...*catalog.Binding) {
		t.Helper()
		ids, err := s.BindingsToWake(ctx, []string{in.ID}, []string{"team"}, []string{"db"})
		if err != nil {
			t.Fatal(err)
		}
		var names []catalog.Key
		for _, b := range want {
			names = append(names, catalog.Key{Namespace: b.Namespace, ID: b.ID})
		}
		byID := func(a, b catalog.Key) int { return strings.Compare(a.ID, b.ID) }
		slices.SortFunc(ids, byID)
		slices.SortFunc(names, byID)
		if !slices.Equal(ids, names) {
			t.Errorf("woken %v, want %v", ids, names)
		}
	}
	woken(other)
	if _, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
		catalog.SetCondition(&in.Status.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionTrue, Reason: "ProvisionedSuccessfully"}, time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	woken(waiting, other)
	if _, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
		catalog.SetCondition(&in.Status.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionFalse, Reason: "UpdateInFlight"}, time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteBinding(ctx, waiting.ID); err != nil {
		t.Fatal(err)
	}
	woken(waiting, other)
}

// TestBindingsToWakeScansNoTable: the wake query reads the changed
// instances' bindings by their keys also after the tables grew under a
// connection that ran it while they were small: the cached statement's
// generic plan, made then, hash-joined a sequential scan of every
// instance.
func TestBindingsToWakeScansNoTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	create := func(name string) string {
		t.Helper()
		in, err := s.CreateInstance(ctx, newInstance(name, catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"}))
		if err != nil {
			t.Fatal(err)
		}
		b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: name}}}
		b.Name, b.Namespace = name, "team"
		if _, err := s.CreateBinding(ctx, b); err != nil {
			t.Fatal(err)
		}
		return in.ID
	}
	first := create("db-0")
	for range 8 {
		if _, err := s.BindingsToWake(ctx, []string{first}, []string{"team"}, []string{"db-0"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO catalog.instances (id, namespace, name, metadata, spec, status, generation, resource_version)
		SELECT gen_random_uuid(), namespace, name || '-' || g, metadata, spec || jsonb_build_object('externalID', gen_random_uuid()::text), status, generation, resource_version
		FROM catalog.instances, generate_series(1, 2000) g`); err != nil {
		t.Fatal(err)
	}
	seqScans := func() int64 { return instanceSeqScans(t, pool) }
	before := seqScans()
	for range 10 {
		if ids, err := s.BindingsToWake(ctx, []string{first}, []string{"team"}, []string{"db-0"}); err != nil || len(ids) != 1 {
			t.Fatalf("woken %v, %v", ids, err)
		}
	}
	if n := seqScans() - before; n != 0 {
		t.Errorf("10 wake queries scanned the instances table %d times", n)
	}
}

// TestBindingsToWakeWithStaleStatistics: the wake query looks each
// binding's instance up by its key even when the tables' statistics are
// those of a few rows and thousands were written since (a bulk creation,
// before autovacuum caught up): planned by those figures, the join hashed
// a sequential scan of every instance (6-8 ms a call at 3,000 + 3,000
// objects, a quarter of PostgreSQL's time for the engine).
func TestBindingsToWakeWithStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	if _, err := s.CreateInstance(ctx, newInstance("db", catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"})); err != nil {
		t.Fatal(err)
	}
	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	b.Name, b.Namespace = "db", "team"
	if _, err := s.CreateBinding(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`ALTER TABLE catalog.instances SET (autovacuum_enabled = off)`,
		`ALTER TABLE catalog.bindings SET (autovacuum_enabled = off)`,
		`INSERT INTO catalog.instances (id, namespace, name, metadata, spec, status, generation, resource_version)
		SELECT gen_random_uuid(), namespace, name || '-' || g, metadata, spec || jsonb_build_object('externalID', gen_random_uuid()::text), status, generation, resource_version
		FROM catalog.instances, generate_series(1, 3000) g`,
		`INSERT INTO catalog.bindings (id, namespace, name, instance_id, metadata, spec, status, generation, resource_version)
		SELECT gen_random_uuid(), i.namespace, i.name, i.id, b.metadata,
			b.spec || jsonb_build_object('externalID', gen_random_uuid()::text, 'instanceRef', jsonb_build_object('name', i.name)), b.status, 1, b.resource_version
		FROM catalog.instances i, catalog.bindings b WHERE i.name LIKE 'db-%'`,
		// What statistics gathered early can say: a few instances with
		// many bindings each.
		`ALTER TABLE catalog.bindings ALTER COLUMN instance_id SET (n_distinct = 5)`,
		`ANALYZE catalog.instances, catalog.bindings`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT id::text, namespace, name FROM catalog.instances WHERE name LIKE 'db-%' LIMIT 20`)
	if err != nil {
		t.Fatal(err)
	}
	var ids, namespaces, names []string
	for rows.Next() {
		var id, namespace, name string
		if err := rows.Scan(&id, &namespace, &name); err != nil {
			t.Fatal(err)
		}
		ids, namespaces, names = append(ids, id), append(namespaces, namespace), append(names, name)
	}
	if rows.Err() != nil || len(ids) != 20 {
		t.Fatalf("%d instances, %v", len(ids), rows.Err())
	}
	before := instanceSeqScans(t, pool)
	for range 5 {
		if _, err := s.BindingsToWake(ctx, ids, namespaces, names); err != nil {
			t.Fatal(err)
		}
	}
	if n := instanceSeqScans(t, pool) - before; n != 0 {
		t.Errorf("5 wake queries of 20 instances scanned the instances table %d times", n)
	}
}
