package apiserver

import (
	"context"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/bindery-dev/bindery/catalog"
)

// TestDeletePreconditionUnderTheRowLock: a delete whose
// preconditions.resourceVersion names the object as read is refused with
// 409 when another write changes the object between that read and the
// delete. The precondition was checked against the object read before the
// delete's transaction, so such a delete marked the changed object.
func TestDeletePreconditionUnderTheRowLock(t *testing.T) {
	t.Parallel()
	storages, store := storagesForTest(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "a")
	pool := poolOf(store)
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
	in.Name, in.Namespace = "db", "a"
	in, err := store.CreateInstance(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer holds the row, changes the object, and commits once
	// the delete waits for the row.
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := other.Exec(ctx, `SELECT 1 FROM catalog.instances WHERE id = $1 FOR UPDATE`, in.ID); err != nil {
		t.Fatal(err)
	}
	rv := strconv.FormatInt(in.ResourceVersion, 10)
	done := make(chan error, 1)
	go func() {
		_, _, err := storages["serviceinstances"].(rest.GracefulDeleter).Delete(ctx, "db", nil,
			&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delete never waited for the row")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := other.Exec(ctx, `UPDATE catalog.instances SET resource_version = resource_version + 1000 WHERE id = $1`, in.ID); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !apierrors.IsConflict(err) {
		t.Errorf("a delete whose precondition names the object as it was: %v, want 409", err)
	}
	got, err := store.GetInstance(ctx, in.ID)
	if err != nil || got.DeletionTimestamp != nil {
		t.Errorf("the instance after the refused delete: %v, deletionTimestamp %v; want it not marked", err, got.DeletionTimestamp)
	}
}
