package postgresql_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bundle is what a driver test needs.
type bundle struct {
	ctx    context.Context
	admin  string // superuser URL of the target cluster
	driver *postgresql.Driver
	logs   *syncbuf.Buffer // everything the driver logged
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := t.Context()
	b := &bundle{ctx: ctx, admin: pgtest.AdminURL(t), logs: &syncbuf.Buffer{}}
	log := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := postgresql.New(ctx, b.admin, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	b.driver = d
	return b
}

func (b *bundle) instance(t *testing.T, planConfig string) broker.InstanceRequest {
	t.Helper()
	req := broker.InstanceRequest{InstanceID: randomID(t), ServiceID: "postgresql", PlanID: "small", PlanConfig: json.RawMessage(planConfig)}
	t.Cleanup(func() {
		// Leave nothing behind, whatever the test did.
		if err := b.driver.Deprovision(context.Background(), req); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return req
}

func (b *bundle) provision(t *testing.T, planConfig string) broker.InstanceRequest {
	t.Helper()
	req := b.instance(t, planConfig)
	if _, err := b.driver.Provision(b.ctx, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func (b *bundle) bind(t *testing.T, inst broker.InstanceRequest, bindingID string) broker.BindResult {
	t.Helper()
	res, err := b.driver.Bind(b.ctx, broker.BindRequest{Instance: inst, BindingID: bindingID})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// connect logs in with a binding's uri, as an application would.
func (b *bundle) connect(t *testing.T, res broker.BindResult) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, res.Credentials["uri"].(string))
	if err != nil {
		t.Fatalf("connect with the binding's uri: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// query runs a query on the target cluster as the superuser.
func (b *bundle) query(t *testing.T, sql string, args ...any) string {
	t.Helper()
	return queryString(t, b.admin, sql, args...)
}

func (b *bundle) exists(t *testing.T, catalog, column, name string) bool {
	t.Helper()
	return b.query(t, fmt.Sprintf("SELECT count(*)::text FROM %s WHERE %s = $1", catalog, column), name) == "1"
}

func (b *bundle) assertGone(t *testing.T, inst broker.InstanceRequest, bindingIDs ...string) {
	t.Helper()
	n := postgresql.InstanceNames(inst.InstanceID)
	if b.exists(t, "pg_database", "datname", n.Database) {
		t.Errorf("database %s still exists", n.Database)
	}
	roles := []string{n.Owner}
	for _, id := range bindingIDs {
		roles = append(roles, postgresql.BindingRole(id))
	}
	for _, r := range roles {
		if b.exists(t, "pg_roles", "rolname", r) {
			t.Errorf("role %s still exists", r)
		}
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`)
	n := postgresql.InstanceNames(inst.InstanceID)

	// The database is the broker's; its tenant may do everything in it
	// but change the database itself (its limit, its settings).
	if got := b.query(t, `SELECT datconnlimit || ' ' || (datdba = (SELECT oid FROM pg_roles WHERE rolname = current_user)) FROM pg_database WHERE datname = $1`, n.Database); got != "20 true" {
		t.Errorf("connection limit and owned by the broker's role: %q", got)
	}
	if got := b.query(t, `SELECT has_database_privilege('public', $1, 'CONNECT') || ' ' || has_database_privilege('public', $1, 'TEMPORARY')
		|| ' ' || has_database_privilege($2, $1, 'CREATE, CONNECT, TEMPORARY')`, n.Database, n.Owner); got != "false false true" {
		t.Errorf("PUBLIC may connect, PUBLIC may create temporary tables, the owner role has all privileges: %s", got)
	}

	bindA, bindB := randomID(t), randomID(t)
	resA := b.bind(t, inst, bindA)
	checkCredentials(t, resA, n.Database, postgresql.BindingRole(bindA))

	a := b.connect(t, resA)
	var current, session, timeout, pgcrypto string
	err := a.QueryRow(b.ctx, `SELECT current_user, session_user, current_setting('statement_timeout'),
		(SELECT extname FROM pg_extension WHERE extname = 'pgcrypto')`).Scan(&current, &session, &timeout, &pgcrypto)
	if err != nil {
		t.Fatal(err)
	}
	if current != n.Owner || session != postgresql.BindingRole(bindA) || timeout != "30s" || pgcrypto != "pgcrypto" {
		t.Errorf("current_user %s, session_user %s, statement_timeout %s, extension %q", current, session, timeout, pgcrypto)
	}
	if _, err := a.Exec(b.ctx, `CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL DEFAULT encode(gen_random_bytes(4), 'hex'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(b.ctx, `INSERT INTO notes (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}

	resB := b.bind(t, inst, bindB)
	bc := b.connect(t, resB)
	if _, err := bc.Exec(b.ctx, `INSERT INTO notes (id) VALUES (2)`); err != nil {
		t.Fatalf("second binding writes the first one's table: %v", err)
	}
	var count int
	if err := bc.QueryRow(b.ctx, `SELECT count(*) FROM notes`).Scan(&count); err != nil || count != 2 {
		t.Fatalf("second binding counts %d rows (%v), want 2", count, err)
	}
	if got := b.query(t, `SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'notes'`); got != "" {
		t.Errorf("table found in the administrative database, owned by %s", got)
	}

	// Another instance's binding cannot even connect to this database.
	other := b.provision(t, `{"connection_limit": 5}`)
	otherRes := b.bind(t, other, randomID(t))
	_, err = pgx.Connect(b.ctx, withDatabase(t, otherRes.Credentials["uri"].(string), n.Database))
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("another instance's binding connects: %v, want insufficient_privilege", err)
	}

	a.Close(b.ctx)
	bc.Close(b.ctx)
	for _, id := range []string{bindA, bindB} {
		if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: id}); err != nil {
			t.Fatal(err)
		}
		if b.exists(t, "pg_roles", "rolname", postgresql.BindingRole(id)) {
			t.Errorf("role of binding %s survives Unbind", id)
		}
	}
	if err := b.driver.Deprovision(b.ctx, inst); err != nil {
		t.Fatal(err)
	}
	b.assertGone(t, inst, bindA, bindB)
	if strings.Contains(b.logs.String(), resA.Credentials["password"].(string)) {
		t.Error("a password was logged")
	}
}

func checkCredentials(t *testing.T, res broker.BindResult, database, role string) {
	t.Helper()
	c := res.Credentials
	admin, _ := url.Parse(pgtest.AdminURL(t))
	password, _ := c["password"].(string)
	if len(password) != 43 {
		t.Errorf("password %q", password)
	}
	if c["host"] != admin.Hostname() || c["port"] != mustAtoi(t, admin.Port()) || c["database"] != database || c["username"] != role {
		t.Errorf("credentials %v", redact(c))
	}
	wantURI := fmt.Sprintf("postgresql://%s:%s@%s/%s?sslmode=disable", role, password, admin.Host, database)
	if c["uri"] != wantURI {
		t.Errorf("uri %s, want %s", c["uri"], wantURI)
	}
	wantJDBC := fmt.Sprintf("jdbc:postgresql://%s/%s?password=%s&sslmode=disable&user=%s", admin.Host, database, password, role)
	if c["jdbcUrl"] != wantJDBC {
		t.Errorf("jdbcUrl %s, want %s", c["jdbcUrl"], wantJDBC)
	}
	if len(res.Endpoints) != 1 || res.Endpoints[0].Host != admin.Hostname() || len(res.Endpoints[0].Ports) != 1 ||
		res.Endpoints[0].Ports[0] != admin.Port() || res.Endpoints[0].Protocol != "tcp" {
		t.Errorf("endpoints %+v", res.Endpoints)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Error(err)
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	res := b.bind(t, inst, randomID(t))
	u, _ := url.Parse(res.Credentials["uri"].(string))
	u.User = url.UserPassword(u.User.Username(), postgresql.NewPassword())
	_, err := pgx.Connect(b.ctx, u.String())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("connect with a wrong password: %v, want invalid_password", err)
	}
	// The owner role cannot log in at all.
	u.User = url.UserPassword(postgresql.InstanceNames(inst.InstanceID).Owner, "")
	if _, err := pgx.Connect(b.ctx, u.String()); err == nil {
		t.Fatal("the owner role logged in")
	}
}

func TestIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 10, "extensions": ["pgcrypto"]}`)
	if _, err := b.driver.Provision(b.ctx, inst); err != nil {
		t.Fatalf("provision again: %v", err)
	}
	bindID := randomID(t)
	first := b.bind(t, inst, bindID)
	conn := b.connect(t, first)
	if _, err := conn.Exec(b.ctx, `CREATE TABLE kept (x int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.driver.Provision(b.ctx, inst); err != nil {
		t.Fatalf("provision an instance in use: %v", err)
	}
	second := b.bind(t, inst, bindID)
	if first.Credentials["password"] == second.Credentials["password"] {
		t.Fatal("a repeated Bind returned the same password")
	}
	if _, err := pgx.Connect(b.ctx, first.Credentials["uri"].(string)); err == nil {
		t.Error("the first Bind's password still works")
	}
	conn2 := b.connect(t, second)
	if _, err := conn2.Exec(b.ctx, `INSERT INTO kept VALUES (1)`); err != nil {
		t.Errorf("the data survived a repeated Provision and Bind: %v", err)
	}
	conn.Close(b.ctx)
	conn2.Close(b.ctx)

	unbind := broker.BindRequest{Instance: inst, BindingID: bindID}
	for i := range 2 {
		if err := b.driver.Unbind(b.ctx, unbind); err != nil {
			t.Fatalf("unbind #%d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if err := b.driver.Deprovision(b.ctx, inst); err != nil {
			t.Fatalf("deprovision #%d: %v", i+1, err)
		}
	}
	b.assertGone(t, inst, bindID)
	if err := b.driver.Unbind(b.ctx, unbind); err != nil {
		t.Fatalf("unbind after deprovision: %v", err)
	}
}

// A binding whose database vanished is still removed by Unbind.
func TestUnbindWithoutDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	bindID := randomID(t)
	b.bind(t, inst, bindID)
	mustExec(t, b.admin, "DROP DATABASE "+pgx.Identifier{postgresql.InstanceNames(inst.InstanceID).Database}.Sanitize())
	if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: bindID}); err != nil {
		t.Fatal(err)
	}
	if b.exists(t, "pg_roles", "rolname", postgresql.BindingRole(bindID)) {
		t.Error("the binding's role survives")
	}
}

// Deprovision drops bindings that were never unbound, and ends sessions.
func TestDeprovisionDropsBindings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	ids := []string{randomID(t), randomID(t)}
	for _, id := range ids {
		b.connect(t, b.bind(t, inst, id)) // stays connected
	}
	// A role of another instance's binding is left alone.
	other := b.provision(t, `{"connection_limit": 5}`)
	otherID := randomID(t)
	b.bind(t, other, otherID)

	if err := b.driver.Deprovision(b.ctx, inst); err != nil {
		t.Fatal(err)
	}
	b.assertGone(t, inst, ids...)
	if !b.exists(t, "pg_roles", "rolname", postgresql.BindingRole(otherID)) {
		t.Error("another instance's binding role was dropped")
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	oldID, newID := randomID(t), randomID(t)
	old := b.bind(t, inst, oldID)
	rotated, err := b.driver.Bind(b.ctx, broker.BindRequest{Instance: inst, BindingID: newID, PredecessorBindingID: oldID})
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Credentials["username"] == old.Credentials["username"] {
		t.Fatal("rotation reused the role")
	}
	b.connect(t, old)
	b.connect(t, rotated)
	if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: oldID}); err != nil {
		t.Fatal(err)
	}
	b.connect(t, rotated)
}

// Binds and unbinds of one instance, from two drivers as from two broker
// processes, take turns instead of failing with "tuple concurrently
// updated" on the database's privileges.
func TestConcurrentBinds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	other, err := postgresql.New(b.ctx, b.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	drivers := []*postgresql.Driver{b.driver, other}
	ids := make([]string, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i := range ids {
		ids[i] = randomID(t)
		wg.Go(func() {
			_, errs[i] = drivers[i%2].Bind(b.ctx, broker.BindRequest{Instance: inst, BindingID: ids[i]})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		wg.Go(func() {
			errs[i] = drivers[i%2].Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: ids[i]})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestUnavailableExtension(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, `{"connection_limit": 5, "extensions": ["pgcrypto", "nosuch"]}`)
	_, err := b.driver.Provision(b.ctx, inst)
	if err == nil || !strings.Contains(err.Error(), `extension "nosuch" is not available on the target cluster`) {
		t.Fatalf("provision: %v", err)
	}
	b.assertGone(t, inst)
}

// An extension that exists but cannot be created fails after the database
// was made: Provision must drop it and the owner role again.
func TestFailedProvisionCleansUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// earthdistance needs cube, which the plan does not list.
	inst := b.instance(t, `{"connection_limit": 5, "extensions": ["earthdistance"]}`)
	_, err := b.driver.Provision(b.ctx, inst)
	if err == nil || !strings.Contains(err.Error(), `create extension "earthdistance": required extension "cube" is not installed`) {
		t.Fatalf("provision: %v", err)
	}
	if strings.Contains(err.Error(), "SQLSTATE") || strings.Contains(err.Error(), "failed to") {
		t.Errorf("error is not written for a user: %v", err)
	}
	b.assertGone(t, inst)

	inst.PlanConfig = json.RawMessage(`{"connection_limit": 5, "extensions": ["cube", "earthdistance"]}`)
	if _, err := b.driver.Provision(b.ctx, inst); err != nil {
		t.Fatalf("provision with the dependency listed: %v", err)
	}
}

func TestBadPlanConfigAndParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, `{"connection_limits": 3}`)
	if _, err := b.driver.Provision(b.ctx, inst); err == nil || !strings.Contains(err.Error(), `"connection_limits": unknown field`) {
		t.Fatalf("provision: %v", err)
	}
	inst.PlanConfig = json.RawMessage(`{"connection_limit": 3}`)
	inst.Parameters = map[string]any{"statement_timeout_ms": "soon"}
	if _, err := b.driver.Provision(b.ctx, inst); err == nil || !strings.Contains(err.Error(), "statement_timeout_ms") {
		t.Fatalf("provision: %v", err)
	}
	b.assertGone(t, inst)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`)
	n := postgresql.InstanceNames(inst.InstanceID)
	settings := func() string {
		return b.query(t, `SELECT d.datconnlimit || ' ' || coalesce((
				SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s
				WHERE s.setdatabase = d.oid AND s.setrole = 0), '')
			FROM pg_database d WHERE d.datname = $1`, n.Database)
	}
	extensions := func() string {
		return queryString(t, withDatabase(t, b.admin, n.Database),
			`SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension WHERE extname <> 'plpgsql'`)
	}
	if got := settings(); got != "20 statement_timeout=30000" {
		t.Fatalf("after provision: %q", got)
	}
	update := func(planConfig string, params map[string]any) error {
		desired := inst
		desired.PlanID, desired.PlanConfig, desired.Parameters = "large", json.RawMessage(planConfig), params
		return b.driver.Update(b.ctx, broker.UpdateRequest{Previous: inst, Desired: desired})
	}
	tests := []struct {
		planConfig string
		params     map[string]any
		settings   string
		extensions string
	}{
		{`{"connection_limit": 5, "statement_timeout": "1m", "extensions": ["pg_trgm"]}`, nil, "5 statement_timeout=60000", "pg_trgm,pgcrypto"},
		{`{"connection_limit": 5, "statement_timeout": "1m"}`, map[string]any{"statement_timeout_ms": float64(1500)}, "5 statement_timeout=1500", "pg_trgm,pgcrypto"},
		{`{"connection_limit": 3}`, nil, "3 ", "pg_trgm,pgcrypto"},
		{`{"connection_limit": 3}`, nil, "3 ", "pg_trgm,pgcrypto"}, // again: idempotent
	}
	for _, tt := range tests {
		if err := update(tt.planConfig, tt.params); err != nil {
			t.Fatal(err)
		}
		if got := settings(); got != tt.settings {
			t.Errorf("after update to %s %v: settings %q, want %q", tt.planConfig, tt.params, got, tt.settings)
		}
		if got := extensions(); got != tt.extensions {
			t.Errorf("after update to %s: extensions %q, want %q", tt.planConfig, got, tt.extensions)
		}
	}

	// A failed update leaves the previous settings.
	if err := update(`{"connection_limit": 7, "extensions": ["nosuch"]}`, nil); err == nil ||
		!strings.Contains(err.Error(), `extension "nosuch" is not available`) {
		t.Fatalf("update with a missing extension: %v", err)
	}
	if err := update(`{"connection_limit": 7, "extensions": ["earthdistance"]}`, nil); err == nil {
		t.Fatal("update with an extension that cannot be created succeeded")
	}
	if got := settings(); got != "3 " {
		t.Errorf("after failed updates: %q", got)
	}

	// A binding's session sees the new timeout; its role's connection
	// limit follows the plan's.
	if err := update(`{"connection_limit": 3, "statement_timeout": "2s"}`, nil); err != nil {
		t.Fatal(err)
	}
	bindID := randomID(t)
	now := inst
	now.PlanConfig = json.RawMessage(`{"connection_limit": 3, "statement_timeout": "2s"}`)
	var timeout string
	if err := b.connect(t, b.bind(t, now, bindID)).QueryRow(b.ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "2s" {
		t.Errorf("statement_timeout in a binding's session %q (%v), want 2s", timeout, err)
	}
	roleLimit := func() string {
		return b.query(t, `SELECT rolconnlimit::text FROM pg_roles WHERE rolname = $1`, postgresql.BindingRole(bindID))
	}
	if got := roleLimit(); got != "3" {
		t.Errorf("the binding role's connection limit is %s, want the plan's 3", got)
	}
	if err := update(`{"connection_limit": 4}`, nil); err != nil {
		t.Fatal(err)
	}
	if got := roleLimit(); got != "4" {
		t.Errorf("after an update to 4 connections, the binding role's limit is %s", got)
	}
	// A bind asked for before that update, with the plan it then had,
	// gets the limit the instance has when its role is made.
	late := randomID(t)
	b.bind(t, now, late)
	if got := b.query(t, `SELECT rolconnlimit::text FROM pg_roles WHERE rolname = $1`, postgresql.BindingRole(late)); got != "4" {
		t.Errorf("a bind with the plan before the update to 4 connections made a role with limit %s", got)
	}

	missing := b.instance(t, `{"connection_limit": 5}`)
	if err := b.driver.Update(b.ctx, broker.UpdateRequest{Previous: missing, Desired: missing}); err == nil {
		t.Error("update of a missing instance succeeded")
	}
}

// Ids are only ever hashed: quotes, semicolons and any Unicode are
// harmless.
func TestHostileIDs(t *testing.T) {
	t.Parallel()
	ids := []string{
		`x'; DROP DATABASE postgres; --`,
		`"; DROP ROLE postgres; --"`,
		`名前🙂` + "\u202e",
		`back\slash $$ $tag$`,
		strings.Repeat("long", 100),
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			inst := b.instance(t, `{"connection_limit": 5}`)
			inst.InstanceID = id + randomID(t)
			if _, err := b.driver.Provision(b.ctx, inst); err != nil {
				t.Fatal(err)
			}
			bindID := id + randomID(t)
			b.connect(t, b.bind(t, inst, bindID)).Close(b.ctx)
			if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: bindID}); err != nil {
				t.Fatal(err)
			}
			if err := b.driver.Deprovision(b.ctx, inst); err != nil {
				t.Fatal(err)
			}
			b.assertGone(t, inst, bindID)
		})
	}
}

// Nothing the driver logs, through a whole cycle, contains a password.
func TestCredentialsNotLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5, "extensions": ["pgcrypto"]}`)
	bindID := randomID(t)
	res := b.bind(t, inst, bindID)
	again := b.bind(t, inst, bindID)
	if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: bindID}); err != nil {
		t.Fatal(err)
	}
	if err := b.driver.Deprovision(b.ctx, inst); err != nil {
		t.Fatal(err)
	}
	logs := b.logs.String()
	if logs == "" {
		t.Fatal("nothing was logged")
	}
	admin, _ := url.Parse(b.admin)
	adminPassword, _ := admin.User.Password()
	for _, secret := range []string{res.Credentials["password"].(string), again.Credentials["password"].(string), adminPassword, "SCRAM-SHA-256"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain a secret:\n%s", logs)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	admin, _ := url.Parse(pgtest.AdminURL(t))
	password, _ := admin.User.Password()
	wrongPassword := *admin
	wrongPassword.User = url.UserPassword(admin.User.Username(), "not-"+password)
	noServer := *admin
	noServer.Host = "127.0.0.1:1"
	tests := []struct {
		name, url, want string
	}{
		{"not a url", "host=localhost user=x password=" + password, "must be a postgres:// or postgresql:// URL"},
		{"other scheme", "mysql://u:" + password + "@localhost/db", "must be a postgres:// or postgresql:// URL"},
		{"bad url", "postgres://u:" + password + "@local host:x/db", "target database url"},
		{"bad setting", admin.String() + "&sslmode=sometimes", "target database url"},
		{"wrong password", wrongPassword.String(), "password authentication failed"},
		{"no server", noServer.String(), "target cluster 127.0.0.1:1: connect"},
		{"unix socket", "postgres://u:" + password + "@/postgres?host=/tmp", "must be a network address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := postgresql.New(t.Context(), tt.url, nil)
			if err == nil {
				d.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q contains the password", err)
			}
		})
	}
}

// A role with CREATEDB and CREATEROLE, not superuser, may drive; a role
// with neither is refused with a clear message.
func TestNewChecksPrivileges(t *testing.T) {
	t.Parallel()
	admin := pgtest.AdminURL(t)
	role := "bindery_test_" + randomID(t)[:12]
	password := postgresql.NewPassword()
	verifier, _ := postgresql.HashPassword(password)
	mustExec(t, admin, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+verifier+"'")
	t.Cleanup(func() { mustExec(t, admin, "DROP ROLE "+pgx.Identifier{role}.Sanitize()) })
	if _, err := postgresql.New(t.Context(), withUser(t, admin, role, password), nil); err == nil ||
		!strings.Contains(err.Error(), "needs SUPERUSER, or CREATEDB and CREATEROLE") {
		t.Fatalf("New as an ordinary role: %v", err)
	}
}

func randomID(t testing.TB) string {
	t.Helper()
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	return hex.EncodeToString(raw)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustExec(t testing.TB, connURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryString(t *testing.T, connURL, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s *string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("%s: %v", sql, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

func withUser(t testing.TB, connURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(connURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func withDatabase(t testing.TB, connURL, database string) string {
	t.Helper()
	u, err := url.Parse(connURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + database
	return u.String()
}

func redact(creds map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range creds {
		out[k] = v
	}
	delete(out, "password")
	delete(out, "uri")
	delete(out, "jdbcUrl")
	return out
}

// Unbind ends the binding's open sessions: an application still connected
// cannot go on writing with revoked credentials. What it created through
// the binding belongs to the instance's owner and stays; what the binding
// role owns itself is handed to the owner.
func TestUnbindEndsSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.provision(t, `{"connection_limit": 5}`)
	bindID := randomID(t)
	conn := b.connect(t, b.bind(t, inst, bindID))
	if _, err := conn.Exec(b.ctx, "CREATE TABLE shared (x int)"); err != nil {
		t.Fatal(err)
	}
	// A table the binding role owns itself, made after leaving the owner's role.
	if _, err := conn.Exec(b.ctx, "RESET role; CREATE TABLE own (x int)"); err != nil {
		t.Fatal(err)
	}
	if err := b.driver.Unbind(b.ctx, broker.BindRequest{Instance: inst, BindingID: bindID}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(b.ctx, "CREATE TABLE after_unbind (x int); INSERT INTO shared VALUES (1)"); err == nil {
		t.Fatal("a session opened before unbind still creates and writes tables")
	}
	n := postgresql.InstanceNames(inst.InstanceID)
	dbURL, _ := url.Parse(b.admin)
	dbURL.Path = "/" + n.Database
	for _, table := range []string{"shared", "own"} {
		if owner := queryString(t, dbURL.String(), "SELECT tableowner::text FROM pg_tables WHERE tablename = $1", table); owner != n.Owner {
			t.Errorf("table %s is owned by %q after unbind, want the instance's owner %q", table, owner, n.Owner)
		}
	}
	if got := queryString(t, dbURL.String(), "SELECT count(*)::text FROM pg_tables WHERE tablename = 'after_unbind'"); got != "0" {
		t.Error("a table was created after unbind")
	}
}
