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

// binderyCycle provisions, binds, unbinds and deprovisions one instance
// through Bindery's OSB API with synchronous requests, and returns how
// long it took.
func binderyCycle(ctx context.Context, c *osbClient, serviceID, planID string) (time.Duration, error) {
	instance := "/v2/service_instances/" + randomHex(16)
	binding := instance + "/service_bindings/" + randomHex(16)
	query := "?" + url.Values{"service_id": {serviceID}, "plan_id": {planID}}.Encode()
	steps := []struct {
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
	start := time.Now()
	for _, s := range steps {
		if _, err := c.do(ctx, s.method, s.path, s.body, s.want); err != nil {
			return 0, fmt.Errorf("bindery cycle: %w", err)
		}
	}
	return time.Since(start), nil
}

// rawCycle runs the statements the PostgreSQL driver runs for the same
// cycle straight through pgx, with nothing around them: on target, a
// connection to the target cluster held open as the driver's pool holds
// one, and on a new connection to the instance's database where the
// driver opens one (after provisioning, and before dropping the binding's
// role). cfg is the target's connection configuration.
func rawCycle(ctx context.Context, target *pgx.Conn, cfg *pgx.ConnConfig, plan postgresql.PlanConfig) (time.Duration, error) {
	n := postgresql.InstanceNames(randomHex(16))
	role := postgresql.BindingRole(randomHex(16))
	start := time.Now()
	if err := execAll(ctx, target, postgresql.ProvisionStatements(n, plan, postgresql.Existing{})); err != nil {
		return 0, err
	}
	if err := execIn(ctx, cfg, n.Database, postgresql.ProvisionDatabaseStatements(n, plan)); err != nil {
		return 0, err
	}
	verifier, err := postgresql.HashPassword(postgresql.NewPassword())
	if err != nil {
		return 0, fmt.Errorf("raw cycle: %w", err)
	}
	if err := execAll(ctx, target, postgresql.BindStatements(n, role, verifier, false)); err != nil {
		return 0, err
	}
	if err := execIn(ctx, cfg, n.Database, postgresql.UnbindDatabaseStatements(n, role)); err != nil {
		return 0, err
	}
	if err := execAll(ctx, target, postgresql.UnbindStatements(role)); err != nil {
		return 0, err
	}
	if err := execAll(ctx, target, postgresql.DeprovisionStatements(n, nil)); err != nil {
		return 0, err
	}
	return time.Since(start), nil
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
