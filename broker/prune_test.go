package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
)

// TestOperationsPruned: the broker keeps one row per operation, and a
// platform sends operations without end (a binding bound and unbound
// again and again, instances made and deleted). A broker started on the
// database prunes them: an instance deprovisioned a month ago leaves no
// operation, a live instance keeps its last one, and one binding keeps at
// most its 16 newest, however young.
func TestOperationsPruned(t *testing.T) {
	t.Parallel()
	first := setup(t)
	ctx := context.Background()
	goneID, liveID := randomID("gone"), randomID("live")
	gone, live := "/v2/service_instances/"+goneID, "/v2/service_instances/"+liveID
	first.expect(first.do("PUT", gone, provisionBody(planSmall, nil)), 201)
	first.expect(first.do("DELETE", gone+q(planSmall), nil), 200)
	first.expect(first.do("PUT", live, provisionBody(planSmall, nil)), 201)
	if _, err := first.pool.Exec(ctx, `UPDATE broker.operations
		SET created_at = created_at - interval '30 days', updated_at = updated_at - interval '30 days'`); err != nil {
		t.Fatal(err)
	}
	churnID := randomID("churn")
	churn := live + "/service_bindings/" + churnID
	for range 20 {
		first.expect(first.do("PUT", churn, bindBody()), 201)
		first.expect(first.do("DELETE", churn+q(planSmall), nil), 200)
	}
	first.stop()

	second := setup(t, func(o *options) { o.dbURL = first.dbURL; o.keys = first.keys })
	count := func(ctx context.Context, where string, args ...any) (n int) {
		if err := second.pool.QueryRow(ctx, `SELECT count(*) FROM broker.operations WHERE `+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		g := count(ctx, `instance_id = $1`, goneID)
		l := count(ctx, `instance_id = $1 AND binding_id IS NULL`, liveID)
		c := count(ctx, `binding_id = $1`, churnID)
		if g != 0 || l != 1 || c != 16 {
			return fmt.Errorf("operations kept: %d of the deleted instance (want 0), %d of the live one (want 1), %d of the churned binding (want 16)", g, l, c)
		}
		return nil
	})
	if r := second.expect(second.do("GET", live+"/last_operation", nil), 200); r.str("state") != "succeeded" {
		t.Errorf("last_operation of the live instance: %s", r.raw)
	}
}
