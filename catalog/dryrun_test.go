package catalog_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestDryRunWritesNothing: a write in a WithDryRun context answers as the
// write would — its refusals, the object as it would leave it — and
// records nothing: the object, the revision and the history stay as they
// were.
func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, in, _ := boundsSetup(t)
	dry := catalog.WithDryRun(ctx)
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateInstanceMeta(dry, in.ID, 0, func(m *catalog.Meta) error { m.Labels = map[string]string{"app": "x"}; return nil })
	if err != nil || got.Labels["app"] != "x" {
		t.Errorf("a dry run of a label change: %v, labels %v", err, got.Labels)
	}
	_, err = s.UpdateInstanceMeta(dry, in.ID, 0, func(m *catalog.Meta) error { m.Labels = map[string]string{"bad key!": "x"}; return nil })
	if _, ok := catalog.AsValidation(err); !ok {
		t.Errorf("a dry run of a bad label: %v, want the write's validation error", err)
	}
	if got, err := s.DeleteInstance(dry, in.ID); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("a dry run of a delete: %v, %+v", err, got)
	}
	stored, err := s.GetInstance(ctx, in.ID)
	if err != nil || stored.ResourceVersion != in.ResourceVersion || stored.Labels["app"] != "" || stored.DeletionTimestamp != nil {
		t.Errorf("the instance after dry runs: %v, %+v", err, stored.Meta)
	}
	after, err := s.Events(ctx, in.ID, 0)
	if now, _ := s.Revision(ctx); err != nil || now != rev || len(after) != len(events) {
		t.Errorf("after dry runs: revision %d (was %d), %d history entries (were %d), %v", now, rev, len(after), len(events), err)
	}
}
