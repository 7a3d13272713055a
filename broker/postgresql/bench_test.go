package postgresql_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

const benchPlan = `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`

// BenchmarkCycle times one provision, bind, unbind and deprovision two
// ways, alternately in each iteration so that both see the same machine:
// the driver's statements straight through pgx with nothing else (the
// floor), and the same cycle through the Driver's methods (existence
// checks, the instance lock and the transactions included). It reports the
// p50 and mean of each and the driver's overhead as their ratios.
//
//	go test ./broker/postgresql -run '^$' -bench Cycle -benchtime 50x
func BenchmarkCycle(b *testing.B) {
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
	d, err := postgresql.New(ctx, admin, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
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
	raw := func() {
		n := postgresql.InstanceNames(randomID(b))
		role := postgresql.BindingRole(randomID(b))
		inDB := pgtest.WithDatabase(b, admin, n.Database)
		run("", postgresql.ProvisionStatements(n, cfg, postgresql.Existing{}))
		run(inDB, postgresql.ProvisionDatabaseStatements(n, cfg))
		verifier, err := postgresql.HashPassword(postgresql.NewPassword())
		if err != nil {
			b.Fatal(err)
		}
		run("", postgresql.BindStatements(n, role, verifier, cfg.ConnectionLimit, false))
		run(inDB, postgresql.UnbindDatabaseStatements(n, role))
		run("", postgresql.UnbindStatements(role))
		run("", postgresql.DeprovisionStatements(n, nil))
	}
	driver := func() {
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
	timed := func(f func()) time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
	raw()
	driver() // both warm
	var raws, drivers []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			raws, drivers = append(raws, timed(raw)), append(drivers, timed(driver))
		} else {
			drivers, raws = append(drivers, timed(driver)), append(raws, timed(raw))
		}
	}
	p50 := func(ds []time.Duration) time.Duration { s := slices.Clone(ds); slices.Sort(s); return s[len(s)/2] }
	mean := func(ds []time.Duration) time.Duration {
		var t time.Duration
		for _, d := range ds {
			t += d
		}
		return t / time.Duration(len(ds))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(p50(raws)), "raw-p50-ms")
	b.ReportMetric(ms(p50(drivers)), "driver-p50-ms")
	b.ReportMetric(float64(p50(drivers))/float64(p50(raws)), "p50-ratio")
	b.ReportMetric(float64(mean(drivers))/float64(mean(raws)), "mean-ratio")
}
