package postgresql_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// ownCluster starts a private PostgreSQL server with maxConns connection
// slots and Bindery's own database in it, as `bindery up` keeps its
// embedded one, and returns the superuser's URL of Bindery's database.
func ownCluster(t *testing.T, maxConns int) string {
	t.Helper()
	// Not t.TempDir: PostgreSQL's user must traverse the parents.
	dir, err := os.MkdirTemp("", "bindery-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := pgserver.Start(t.Context(), dir, pgserver.Options{Fast: true, MaxConnections: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	u, err := srv.EnsureDatabase(t.Context(), "bindery")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestNoisyTenant is the attack of a tenant that opens every session it
// can, 200 of them, to every database of a cluster Bindery owns, and
// tries to lift its database's limit first: it holds no more than its
// plan's 10, another tenant's fresh credentials still connect, and the
// broker still works. The plans' limits together never overcommit the
// cluster: a provision that would is refused, saying why.
func TestNoisyTenant(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := ownCluster(t, 40)
	logs := &syncbuf.Buffer{}
	// 40 slots, 3 for superusers, 5 kept for Bindery: 32 for instances.
	d, err := postgresql.New(ctx, admin, slog.New(slog.NewTextHandler(logs, nil)), postgresql.WithReservedConnections(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b := &bundle{ctx: ctx, admin: admin, driver: d, logs: logs}
	const plan = `{"connection_limit": 10}`
	noisy, quiet := b.provision(t, plan), b.provision(t, plan)
	b.provision(t, plan)
	var full *broker.CapacityError
	fourth := b.instance(t, plan)
	if err := d.CheckCapacity(ctx, fourth); !errors.As(err, &full) {
		t.Errorf("check of a fourth instance of 10 connections: %v, want a CapacityError", err)
	}
	if _, err := d.Provision(ctx, fourth); !errors.As(err, &full) ||
		!strings.Contains(err.Error(), "no room for a database of 10 connections: of its max_connections 40, 3 are reserved for superusers and 5 for Bindery, and the other instances hold 30 of the 32 left") {
		t.Errorf("provision of a fourth instance of 10 connections: %v", err)
	}
	b.assertGone(t, fourth)

	attackerID := randomID(t)
	attacker := b.bind(t, noisy, attackerID)
	uri := attacker.Credentials["uri"].(string)
	own := postgresql.InstanceNames(noisy.InstanceID).Database
	first := b.connect(t, attacker)
	for _, lift := range []string{"CONNECTION LIMIT -1", "SET default_transaction_read_only = on"} {
		if _, err := first.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{own}.Sanitize()+" "+lift); err == nil {
			t.Errorf("the tenant may ALTER DATABASE ... %s", lift)
		}
	}
	first.Close(ctx)
	targets := []string{own, "postgres", "template1", "bindery"}
	var mu sync.Mutex
	var held []*pgx.Conn
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, withDatabase(t, uri, targets[i%len(targets)]))
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close(context.Background())
		}
	})
	perDB := map[string]int{}
	for _, c := range held {
		perDB[c.Config().Database]++
	}
	t.Logf("the noisy tenant holds %d sessions: %v", len(held), perDB)
	if len(held) > 10 || perDB[own] != len(held) {
		t.Errorf("the noisy tenant holds %d sessions (%v), want at most its plan's 10, all in its own database", len(held), perDB)
	}

	if err := b.connect(t, b.bind(t, quiet, randomID(t))).Ping(ctx); err != nil {
		t.Fatalf("the quiet tenant's fresh credentials: %v", err)
	}
	if err := d.Unbind(ctx, broker.BindRequest{Instance: noisy, BindingID: attackerID}); err != nil {
		t.Fatalf("unbind the noisy tenant: %v", err)
	}
	if strings.Contains(logs.String(), "every role may connect") {
		t.Errorf("the driver warns about open databases in a cluster Bindery owns:\n%s", logs)
	}
}

// TestWarnsAboutOpenDatabases: on a cluster whose databases PUBLIC may
// connect to (an operator's, here the tests' own), the driver says which
// and what to do.
func TestWarnsAboutOpenDatabases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, want := range []string{"every role may connect to these databases of the target cluster", "REVOKE CONNECT ON DATABASE", "postgres"} {
		if !strings.Contains(b.logs.String(), want) {
			t.Errorf("the driver's log does not say %q:\n%s", want, b.logs)
		}
	}
}

// TestTenantCannotWedgeBroker: the settings that would wedge or subvert
// the broker's sessions in a tenant's database (read-only transactions,
// an empty search_path, tiny timeouts, another role) are set for every
// session there, as the tenant itself could on a database an older
// version gave it; the broker's sessions keep their own, and update,
// unbind, bind and deprovision still work.
func TestTenantCannotWedgeBroker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	n := postgresql.InstanceNames(inst.InstanceID)
	tenantID := randomID(t)
	tenant := b.connect(t, b.bind(t, inst, tenantID))
	if _, err := tenant.Exec(b.ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{n.Database}.Sanitize()
	tricks := map[string]string{
		"default_transaction_read_only":       "on",
		"search_path":                         "''",
		"statement_timeout":                   "1",
		"lock_timeout":                        "1",
		"idle_in_transaction_session_timeout": "1",
		"idle_session_timeout":                "1",
		"default_transaction_isolation":       "serializable",
		"role":                                pgx.Identifier{n.Owner}.Sanitize(),
	}
	for name, value := range tricks {
		mustExec(t, b.admin, "ALTER DATABASE "+db+" SET "+name+" = "+value)
	}
	got, err := b.driver.SessionSettings(b.ctx, n.Database, "default_transaction_read_only", "search_path",
		"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout",
		"default_transaction_isolation", "role")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"default_transaction_read_only": "off", "search_path": "pg_catalog", "statement_timeout": "0",
		"lock_timeout": "0", "idle_in_transaction_session_timeout": "0", "idle_session_timeout": "0",
		"default_transaction_isolation": "read committed", "role": "none",
	}
	if !maps.Equal(got, want) {
		t.Errorf("the broker's session in the tenant's database has %v, want %v", got, want)
	}

	grown := inst
	grown.PlanConfig = []byte(`{"connection_limit": 5, "extensions": ["pgcrypto"]}`)
	if err := b.driver.Update(b.ctx, broker.UpdateRequest{Previous: inst, Desired: grown}); err != nil {
		t.Errorf("update: %v", err)
	}
	if got, err := b.driver.QueryString(b.ctx, n.Database, `SELECT n.nspname::text FROM pg_extension e
		JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto'`); got != "public" {
		t.Errorf("pgcrypto is in schema %q (%v), want public", got, err)
	}
	if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: tenantID}); err != nil {
		t.Errorf("unbind: %v", err)
	}
	if _, err := b.driver.Bind(b.ctx, broker.BindRequest{Instance: grown, BindingID: randomID(t)}); err != nil {
		t.Errorf("bind: %v", err)
	}
	if err := b.driver.Deprovision(b.ctx, inst); err != nil {
		t.Errorf("deprovision: %v", err)
	}
	b.assertGone(t, inst, tenantID)
}

// TestAdoptsOldDatabases: a database an older version gave its owner role
// (whose tenant could then lift its limit) is the broker's again once the
// driver starts, with the owner role's privileges kept; a binding role an
// older version made without a connection limit (which could then hold
// every slot of a database PUBLIC may connect to) gets its database's.
func TestAdoptsOldDatabases(t *testing.T) {
	t.Parallel()
	admin := pgtest.AdminURL(t)
	n := postgresql.InstanceNames(randomID(t))
	db, owner := pgx.Identifier{n.Database}.Sanitize(), pgx.Identifier{n.Owner}.Sanitize()
	binding := pgx.Identifier{postgresql.BindingRolePrefix + strings.TrimPrefix(n.Database, postgresql.DatabasePrefix)}.Sanitize()
	mustExec(t, admin, "CREATE ROLE "+owner+" NOLOGIN")
	mustExec(t, admin, "CREATE DATABASE "+db+" OWNER "+owner+" CONNECTION LIMIT 3")
	mustExec(t, admin, "CREATE ROLE "+binding+" LOGIN IN ROLE "+owner)
	t.Cleanup(func() {
		mustExec(t, admin, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		mustExec(t, admin, "DROP ROLE IF EXISTS "+binding)
		mustExec(t, admin, "DROP ROLE IF EXISTS "+owner)
	})
	b := setup(t)
	if got := b.query(t, `SELECT (datdba = (SELECT oid FROM pg_roles WHERE rolname = current_user))
		|| ' ' || has_database_privilege($2, $1, 'CREATE, CONNECT, TEMPORARY') || ' ' || has_database_privilege('public', $1, 'CONNECT')
		FROM pg_database WHERE datname = $1`, n.Database, n.Owner); got != "true true false" {
		t.Errorf("owned by the broker's role, the owner role has all privileges, PUBLIC may connect: %s", got)
	}
	if got := b.query(t, `SELECT rolconnlimit::text FROM pg_roles WHERE rolname = $1`, strings.Trim(binding, `"`)); got != "3" {
		t.Errorf("the old binding role's connection limit is %s, want its database's 3", got)
	}
}

// TestDriverSessionsBounded: the driver's pool holds a fixed number of
// sessions on any machine (pgx's default grows with its CPUs, past the
// slots kept for Bindery), unless the target URL says pool_max_conns.
func TestDriverSessionsBounded(t *testing.T) {
	t.Parallel()
	admin := pgtest.AdminURL(t)
	sep := "?"
	if strings.Contains(admin, "?") {
		sep = "&"
	}
	for url, want := range map[string]int32{admin: postgresql.DefaultPoolSize, admin + sep + "pool_max_conns=3": 3} {
		d, err := postgresql.New(t.Context(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.PoolSize(); got != want {
			t.Errorf("the driver's pool holds up to %d sessions, want %d", got, want)
		}
		d.Close()
	}
}
