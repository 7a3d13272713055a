package catalog_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestUpdateStatusFrom: a status write from the caller's copy lands when
// the row is still at the copy's revision, leaves the copy as it was, and
// is written on the row as stored when the row changed since (or fails
// as UpdateInstanceStatus does when it is gone), never over the change.
func TestUpdateStatusFrom(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: osbtest.DefaultService, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = "db", "test"
	in, err := s.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	set := func(msg string) func(*catalog.Instance) error {
		return func(in *catalog.Instance) error {
			in.Status.LastError = msg
			return nil
		}
	}
	got, err := s.UpdateInstanceStatusFrom(ctx, in, set("first"))
	if err != nil || got.Status.LastError != "first" || got.ResourceVersion <= in.ResourceVersion {
		t.Fatalf("write from a current copy: %+v, %v", got, err)
	}
	if in.Status.LastError != "" {
		t.Errorf("the caller's copy was changed: %q", in.Status.LastError)
	}
	// in is stale now: someone else's change since (here the status,
	// as the status subresource would) must survive.
	other, err := s.UpdateInstanceStatus(ctx, in.ID, func(in *catalog.Instance) error {
		in.Status.DashboardURL = "https://dash.example"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.UpdateInstanceStatusFrom(ctx, in, set("second"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetInstance(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.LastError != "second" || stored.Status.DashboardURL != "https://dash.example" || got.ResourceVersion != stored.ResourceVersion || stored.ResourceVersion <= other.ResourceVersion {
		t.Errorf("write from a stale copy: stored %q, %q at %d (returned %d), want both changes after %d",
			stored.Status.LastError, stored.Status.DashboardURL, stored.ResourceVersion, got.ResourceVersion, other.ResourceVersion)
	}

	bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	bd.Name, bd.Namespace = "app", "test"
	if bd, err = s.CreateBinding(ctx, bd); err != nil {
		t.Fatal(err)
	}
	creds := map[string]any{"password": "secret"}
	gotB, err := s.UpdateBindingStatusFrom(ctx, bd, func(b *catalog.Binding) error {
		b.Status.LastError = "bound"
		return nil
	}, creds)
	if err != nil || gotB.Status.LastError != "bound" {
		t.Fatalf("binding write from a current copy: %+v, %v", gotB, err)
	}
	if c, err := s.Credentials(ctx, bd.ID); err != nil || c["password"] != "secret" {
		t.Errorf("credentials stored with the write: %v, %v", c, err)
	}
	if err := s.FinalizeBinding(ctx, bd.ID, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "x"}); err == nil {
		t.Fatal("finalized a binding not being deleted")
	}
	if _, err := s.DeleteBinding(ctx, bd.ID); err != nil {
		t.Fatal(err)
	}
	// Gone (deleted, its finalizer left): the stale copy's write says so.
	if err := s.FinalizeBinding(ctx, bd.ID, catalog.EventRecord{Type: "Normal", Reason: "Deleted", Message: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateBindingStatusFrom(ctx, gotB, func(*catalog.Binding) error { return nil }, nil,
		catalog.EventRecord{Type: "Normal", Reason: "Late", Message: "after the end"}); err == nil {
		t.Error("a write from the copy of a removed binding succeeded")
	}
}
