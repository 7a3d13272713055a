package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker/postgresql"
)

// stepNames are the steps of a cycle, in order.
var stepNames = [4]string{"provision", "bind", "unbind", "deprovision"}

// cycleTimes is how long each step of one cycle took.
type cycleTimes [len(stepNames)]time.Duration

// total is the time of the whole cycle.
func (t cycleTimes) total() time.Duration {
	var sum time.Duration
	for _, d := range t {
		sum += d
	}
	return sum
}

// binderyCycle provisions, binds, unbinds and deprovisions one instance
// through Bindery's OSB API with synchronous requests.
func binderyCycle(ctx context.Context, c *osbClient, serviceID, planID string) (cycleTimes, error) {
	instance := "/v2/service_instances/" + randomHex(16)
	binding := instance + "/service_bindings/" + randomHex(16)
	query := "?" + url.Values{"service_id": {serviceID}, "plan_id": {planID}}.Encode()
	steps := [len(stepNames)]struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodPut, instance, map[string]string{
			"service_id": serviceID, "plan_id": planID,
			"organization_guid": randomHex(16), "space_guid": randomHex(16),
		}, http.StatusCreated},
		{http.MethodPut, binding, map[string]string{"service_id": serviceID, "plan_id": planID}, http.StatusCreated},
		{http.MethodDelete, binding + query, nil, http.StatusOK},
		{http.MethodDelete, instance + query, nil, http.StatusOK},
	}
	var times cycleTimes
	for i, s := range steps {
		start := time.Now()
		if _, err := c.do(ctx, s.method, s.path, s.body, s.want); err != nil {
			return times, fmt.Errorf("bindery cycle: %w", err)
		}
		times[i] = time.Since(start)
	}
	return times, nil
}

// rawCycle runs the statements the PostgreSQL driver runs for the same
// cycle straight through pgx, each on its own, with nothing around them:
// no existence checks, lock or transactions. They run on target, a
// connection to the target cluster held open as the driver's pool holds
// one, and on a new connection to the instance's database where the
// driver opens one (after provisioning, and before dropping the binding's
// role). cfg is the target's connection configuration. The binding's
// password is hashed here too, since its statements need the verifier.
func rawCycle(ctx context.Context, target *pgx.Conn, cfg *pgx.ConnConfig, plan postgresql.PlanConfig) (cycleTimes, error) {
	n := postgresql.InstanceNames(randomHex(16))
	role := postgresql.BindingRole(randomHex(16))
	steps := [len(stepNames)]func() error{
		func() error {
			if err := execAll(ctx, target, postgresql.ProvisionStatements(n, plan, postgresql.Existing{})); err != nil {
				return err
			}
			return execIn(ctx, cfg, n.Database, postgresql.ProvisionDatabaseStatements(n, plan))
		},
		func() error {
			verifier, err := postgresql.HashPassword(postgresql.NewPassword())
			if err != nil {
				return fmt.Errorf("raw cycle: %w", err)
			}
			return execAll(ctx, target, postgresql.BindStatements(n, role, verifier, plan.ConnectionLimit, false))
		},
		func() error {
			if err := execIn(ctx, cfg, n.Database, postgresql.UnbindDatabaseStatements(n, role)); err != nil {
				return err
			}
			return execAll(ctx, target, postgresql.UnbindStatements(role))
		},
		func() error {
			return execAll(ctx, target, postgresql.DeprovisionStatements(n, nil))
		},
	}
	var times cycleTimes
	for i, step := range steps {
		start := time.Now()
		if err := step(); err != nil {
			return times, err
		}
		times[i] = time.Since(start)
	}
	return times, nil
}

// execIn connects to database db with cfg's other settings, runs stmts
// and disconnects.
func execIn(ctx context.Context, cfg *pgx.ConnConfig, db string, stmts []string) error {
	cfg = cfg.Copy()
	cfg.Database = db
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("raw cycle: connect to %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return execAll(ctx, conn, stmts)
}

// execAll runs each statement on its own, in order.
func execAll(ctx context.Context, conn *pgx.Conn, stmts []string) error {
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("raw cycle: %.30s: %w", stmt, err)
		}
	}
	return nil
}

// cycleStats summarises the cycles of one path: the whole cycle, and the
// median of each step.
type cycleStats struct {
	total summary
	steps [len(stepNames)]time.Duration
}

func summarizeCycles(cycles []cycleTimes) cycleStats {
	var s cycleStats
	totals := make([]time.Duration, len(cycles))
	for i, c := range cycles {
		totals[i] = c.total()
	}
	s.total = summarize(totals)
	for k := range stepNames {
		step := make([]time.Duration, len(cycles))
		for i, c := range cycles {
			step[i] = c[k]
		}
		s.steps[k] = summarize(step).p50
	}
	return s
}
