package postgresql_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

const benchPlan = `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`

// BenchmarkRawCycle runs the driver's statements for one provision, bind,
// unbind and deprovision straight through pgx, with nothing else: the
// floor that the driver, and the broker around it, add their costs to.
func BenchmarkRawCycle(b *testing.B) {
	ctx := context.Background()
	admin := pgtest.AdminURL(b)
	cfg, err := postgresql.ParsePlanConfig(json.RawMessage(benchPlan))
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	run := func(connURL string, stmts []string) {
		c := conn
		if connURL != "" {
			if c, err = pgx.Connect(ctx, connURL); err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
		}
		for _, stmt := range stmts {
			if _, err := c.Exec(ctx, stmt); err != nil {
				b.Fatalf("%.40s: %v", stmt, err)
			}
		}
	}
	for b.Loop() {
		n := postgresql.InstanceNames(randomID(b))
		role := postgresql.BindingRole(randomID(b))
		inDB := pgtest.WithDatabase(b, admin, n.Database)

		run("", postgresql.ProvisionStatements(n, cfg, postgresql.Existing{}))
		run(inDB, postgresql.ProvisionDatabaseStatements(n, cfg))
		verifier, err := postgresql.HashPassword(postgresql.NewPassword())
		if err != nil {
			b.Fatal(err)
		}
		run("", postgresql.BindStatements(n, role, verifier, false))
		run(inDB, postgresql.UnbindDatabaseStatements(n, role))
		run("", postgresql.UnbindStatements(role))
		run("", postgresql.DeprovisionStatements(n, nil))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkDriverCycle is the same cycle through the Driver's methods:
// existence checks, the instance lock and the transactions included.
func BenchmarkDriverCycle(b *testing.B) {
	ctx := context.Background()
	d, err := postgresql.New(ctx, pgtest.AdminURL(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for b.Loop() {
		inst := broker.InstanceRequest{InstanceID: randomID(b), PlanConfig: json.RawMessage(benchPlan)}
		bind := broker.BindRequest{Instance: inst, BindingID: randomID(b)}
		if _, err := d.Provision(ctx, inst); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Bind(ctx, bind); err != nil {
			b.Fatal(err)
		}
		if err := d.Unbind(ctx, bind); err != nil {
			b.Fatal(err)
		}
		if err := d.Deprovision(ctx, inst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}
