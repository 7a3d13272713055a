package catalog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestHistoryFoldsAndKeepsFirst: identical entries become one with a
// count and first and last times; an object with more distinct entries
// than the bound keeps its first ones and its latest ones.
func TestHistoryFoldsAndKeepsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, _, _ := listedWithPool(t)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "test"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	record := func(e catalog.EventRecord) {
		t.Helper()
		if _, err := s.UpdateInstanceStatus(ctx, in.ID, func(*catalog.Instance) error { return nil }, e); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	failure := catalog.EventRecord{Type: "Warning", Reason: "ProvisionCallFailed", Message: "broker answered 500", Operation: "Provision"}
	other := catalog.EventRecord{Type: "Normal", Reason: "OrphanMitigationSuccessful", Message: "cleaned up", Operation: "Deprovision"}
	for range 5 {
		record(failure)
		record(other)
	}
	// The same words for another operation are another entry.
	record(catalog.EventRecord{Type: "Warning", Reason: "ProvisionCallFailed", Message: "broker answered 500", Operation: "Update"})
	events, err := s.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	added := events[len(before):]
	if len(added) != 3 {
		t.Fatalf("%d entries for 11 records of 3 kinds, want 3: %+v", len(added), added)
	}
	if f := added[0]; f.Reason != failure.Reason || f.Count != 5 || f.LastTime.Before(f.Time) {
		t.Errorf("folded failure %+v, want count 5 and a last time after the first", f)
	}
	if added[1].Count != 5 || added[2].Count != 1 {
		t.Errorf("counts %d and %d, want 5 and 1", added[1].Count, added[2].Count)
	}

	// Past the bound, the first entries stay.
	for i := range catalog.HistoryLimit + 200 {
		record(catalog.EventRecord{Type: "Warning", Reason: "ProvisionCallFailed", Message: fmt.Sprintf("distinct failure %d", i)})
	}
	events, err = s.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != catalog.HistoryLimit {
		t.Errorf("%d entries, want the bound %d", len(events), catalog.HistoryLimit)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM catalog.events WHERE object_id = $1`, in.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != catalog.HistoryLimit {
		t.Errorf("%d entries stored, want the bound %d", stored, catalog.HistoryLimit)
	}
	if events[0].Reason != before[0].Reason || events[0].ID != before[0].ID {
		t.Errorf("the first entry is now %+v, was %+v", events[0], before[0])
	}
	if last := events[len(events)-1]; last.Message != fmt.Sprintf("distinct failure %d", catalog.HistoryLimit+199) {
		t.Errorf("the latest entry is %q", last.Message)
	}
	// A shorter read keeps the first ones too.
	short, err := s.Events(ctx, in.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(short) != 10 || short[0].ID != before[0].ID || short[9].ID != events[len(events)-1].ID {
		t.Errorf("a read of 10 gives %d entries from %d to %d", len(short), short[0].ID, short[len(short)-1].ID)
	}
}
