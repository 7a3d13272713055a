package apiserver_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
)

// TestForegroundDeleteFailureLeavesNoAnnotation: a Foreground delete that
// the catalog refuses after the cascade annotation was written (here
// PostgreSQL, whose trigger refuses the deletion) leaves the instance as
// it was, without the annotation, and no watcher sees the annotation come
// and go: the mark and the deletion are one transaction.
func TestForegroundDeleteFailureLeavesNoAnnotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createDB(t, b)
	if _, err := apiserver.PoolOf(b.store).Exec(ctx, `
CREATE FUNCTION refuse_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.deletion_timestamp IS NOT NULL THEN RAISE EXCEPTION 'deletion refused'; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse_deletion BEFORE UPDATE ON catalog.instances FOR EACH ROW EXECUTE FUNCTION refuse_deletion();`); err != nil {
		t.Fatal(err)
	}
	c := b.client.ServicecatalogV1beta1().ServiceInstances("a")
	before, err := c.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=db", ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fg := metav1.DeletePropagationForeground
	if err := c.Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: &fg}); err == nil {
		t.Fatal("the delete succeeded despite the trigger")
	}
	// A change after the failed delete: the first thing the watcher sees.
	if _, err := c.Patch(ctx, "db", types.MergePatchType, []byte(`{"metadata":{"labels":{"after":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.ResultChan():
		switch o, _ := e.Object.(*v1beta1.ServiceInstance); {
		case o == nil:
			t.Errorf("the watcher saw %s %T first, want the label's change", e.Type, e.Object)
		case o.Labels["after"] != "yes":
			t.Errorf("the watcher saw %s first (annotations %v), want the label's change: the failed delete wrote the instance", e.Type, o.Annotations)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
	in, err := c.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := in.Annotations[catalog.CascadeAnnotation]; ok || in.DeletionTimestamp != nil {
		t.Errorf("after the failed delete: annotation %q (present %v), deletionTimestamp %v; want neither", v, ok, in.DeletionTimestamp)
	}
}
