package catalog_test

import (
	"context"
	"slices"
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
		var names []string
		for _, b := range want {
			names = append(names, b.ID)
		}
		slices.Sort(ids)
		slices.Sort(names)
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
