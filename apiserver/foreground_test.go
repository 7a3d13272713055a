package apiserver_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestForegroundDeleteFailureLeavesNoAnnotation: a Foreground delete that
// the catalog refuses after the cascade annotation was written (here
// PostgreSQL, whose trigger refuses the deletion) leaves the instance as
// it was, without the annotation.
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
	fg := metav1.DeletePropagationForeground
	if err := c.Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: &fg}); err == nil {
		t.Fatal("the delete succeeded despite the trigger")
	}
	in, err := c.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := in.Annotations[catalog.CascadeAnnotation]; ok || in.DeletionTimestamp != nil {
		t.Errorf("after the failed delete: annotation %q (present %v), deletionTimestamp %v; want neither", v, ok, in.DeletionTimestamp)
	}
}
