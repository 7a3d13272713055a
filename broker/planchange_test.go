package broker_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// heldUpdate holds an update once the driver has applied it, before the
// broker records the instance's new plan: a bind admitted then reads the
// old plan from the record.
type heldUpdate struct {
	broker.Driver
	applied chan struct{}
	hold    chan struct{}
}

func (h *heldUpdate) Update(ctx context.Context, r broker.UpdateRequest) error {
	err := h.Driver.Update(ctx, r)
	h.applied <- struct{}{}
	select {
	case <-h.hold:
	case <-ctx.Done():
	}
	return err
}

// TestBindDuringPlanChange: a binding created while a plan change is under
// way gets the connection limit the instance has once the binding's role
// is made, like every other binding role of the instance, not the limit
// of the plan the instance had when the bind was admitted.
func TestBindDuringPlanChange(t *testing.T) {
	t.Parallel()
	h := &heldUpdate{applied: make(chan struct{}, 1), hold: make(chan struct{})}
	b := setup(t, func(o *options) {
		o.wrap = func(d broker.Driver) broker.Driver { h.Driver = d; return h }
	})
	id := randomID("planchange")
	path := "/v2/service_instances/" + id
	b.expect(b.do("PUT", path, provisionBody(planSmall, nil)), http.StatusCreated)
	op := b.expect(b.do("PATCH", path+"?accepts_incomplete=true", map[string]any{"service_id": serviceID, "plan_id": planStd}),
		http.StatusAccepted).str("operation")
	<-h.applied
	bpath := path + "/service_bindings/" + randomID("bind")
	creds := b.expect(b.do("PUT", bpath, bindBody()), http.StatusCreated).body["credentials"].(map[string]any)
	close(h.hold)
	if lo := b.waitFor(path, op); lo.str("state") != "succeeded" {
		t.Fatalf("update ended %s", lo.raw)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var database, role int
	err = conn.QueryRow(ctx, `SELECT (SELECT datconnlimit FROM pg_database WHERE datname = $1),
		(SELECT rolconnlimit FROM pg_roles WHERE rolname = $2)`, postgresql.InstanceNames(id).Database, creds["username"]).Scan(&database, &role)
	if err != nil {
		t.Fatal(err)
	}
	if database != 50 || role != 50 {
		t.Errorf("connection limits after the plan change: database %d, binding role %d; want the standard plan's 50 for both", database, role)
	}
	b.expect(b.do("DELETE", bpath+q(planStd), nil), http.StatusOK)
	b.expect(b.do("DELETE", path+q(planStd), nil), http.StatusOK)
	assertGone(t, id, creds["username"].(string))
}
