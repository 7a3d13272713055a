// Package postgresql is the broker's driver for PostgreSQL databases: an
// instance is a database with a NOLOGIN owner role on a target cluster, and
// a binding is a login role of its own that acts as that owner.
//
// Ownership: a binding's sessions run as the owner role (the binding role
// has `SET role` to it in the database), so the tables and other objects
// an application creates belong to the instance, not to the binding, and
// every binding — and a binding's successor after rotation — sees them.
// Unbind ends the binding's sessions and drops its role; the instance's
// objects stay. Anything the binding role came to own itself (after a
// RESET ROLE) is handed to the owner role on unbind, and its grants are
// revoked. Deprovision drops the database with everything in it.
package postgresql

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/broker"
)

var _ broker.Driver = (*Driver)(nil)

// cleanupTimeout bounds the work of undoing a failed Provision, which runs
// even when the caller's context has ended.
const cleanupTimeout = 30 * time.Second

// Driver provisions databases and roles on one target cluster. It is safe
// for concurrent use. Operations on one instance take turns, across
// processes, under an advisory lock on the target cluster: PostgreSQL
// refuses concurrent changes to one database's privileges ("tuple
// concurrently updated"), which concurrent binds and unbinds would make.
type Driver struct {
	pool       *pgxpool.Pool
	log        *slog.Logger
	target     target
	extensions extensionCache
	// reserved is how many connection slots tenants' plans must leave
	// to Bindery (see WithReservedConnections).
	reserved int
}

// DefaultPoolSize is how many sessions the driver keeps on the target
// cluster unless its URL says pool_max_conns; each operation in flight
// holds one, and one more in the instance's database while it works there.
const DefaultPoolSize = 6

// Option changes how New makes a Driver.
type Option func(*Driver)

// DefaultReservedConnections is what WithReservedConnections keeps for
// Bindery unless told otherwise.
const DefaultReservedConnections = broker.DefaultTargetReserved

// WithReservedConnections keeps n of the target cluster's connection
// slots, besides those PostgreSQL reserves for superusers, out of what
// tenants' plans may commit: Bindery's own sessions need them.
func WithReservedConnections(n int) Option { return func(d *Driver) { d.reserved = n } }

// target is where applications reach the cluster, taken from the target
// URL, for the credentials.
type target struct {
	host  string
	port  uint16
	query url.Values // connection settings kept in every uri: clientSettings
}

// New connects to the target cluster with targetURL, a postgres:// URL for
// a superuser (or a role with CREATEDB and CREATEROLE), and checks that it
// can do the driver's work. It warns, through log, about databases of the
// cluster that every role may connect to. Errors never contain the URL's
// password.
func New(ctx context.Context, targetURL string, log *slog.Logger, opts ...Option) (*Driver, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tgt, err := parseTarget(targetURL)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(targetURL)
	if err != nil {
		// The error's text quotes the URL, redacted only on a best-effort
		// basis: keep the cause alone.
		if cause := errors.Unwrap(err); cause != nil {
			return nil, fmt.Errorf("target database url: %w", cause)
		}
		return nil, errors.New("target database url: cannot be parsed")
	}
	if !strings.Contains(targetURL, "pool_max_conns") {
		// pgx's default grows with the machine's CPUs: the sessions the
		// driver holds must fit the slots kept for Bindery whatever the
		// machine (DefaultTargetReserved).
		cfg.MaxConns = DefaultPoolSize
	}
	tgt.host, tgt.port = cfg.ConnConfig.Host, cfg.ConnConfig.Port
	if strings.HasPrefix(tgt.host, "/") {
		return nil, errors.New("target database url: the host must be a network address, not a unix socket: applications connect to it")
	}
	d := &Driver{log: log, target: tgt, reserved: DefaultReservedConnections}
	for _, o := range opts {
		o(d)
	}
	where := net.JoinHostPort(tgt.host, strconv.Itoa(int(tgt.port)))
	pin(cfg.ConnConfig, 0)
	version, err := check(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("target cluster %s: %w", where, err)
	}
	pin(cfg.ConnConfig, version)
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("target cluster: %w", err)
	}
	if err := d.adopt(ctx); err != nil {
		d.pool.Close()
		return nil, fmt.Errorf("target cluster %s: %w", where, err)
	}
	d.warnOpenDatabases(ctx)
	return d, nil
}

// pin sets, in the startup packet of every session the driver opens, the
// settings a database's owner (or anyone who can ALTER ROLE the broker's
// role) could otherwise change for it with ALTER DATABASE ... SET: startup
// parameters outrank database and role defaults. Unpinned, they could make
// the broker's sessions read-only (an unbind then fails for ever), time
// them out, run them as another role, or make a superuser's session
// resolve names in a tenant's schemas first (the CVE-2018-1058 pattern).
// version adds the settings of later servers (0: those of every server).
func pin(cfg *pgx.ConnConfig, version int) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	maps.Copy(cfg.RuntimeParams, map[string]string{
		"default_transaction_read_only":       "off",
		"default_transaction_isolation":       "read committed",
		"search_path":                         "pg_catalog",
		"statement_timeout":                   "0",
		"lock_timeout":                        "0",
		"idle_in_transaction_session_timeout": "0",
		"role":                                "none",
	})
	if version >= 140000 {
		cfg.RuntimeParams["idle_session_timeout"] = "0"
	}
	if version >= 170000 {
		cfg.RuntimeParams["transaction_timeout"] = "0"
	}
}

func parseTarget(targetURL string) (target, error) {
	u, err := url.Parse(targetURL)
	if err != nil {
		// url.Error quotes the whole URL, password included.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return target{}, fmt.Errorf("target database url: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return target{}, errors.New("target database url: must be a postgres:// or postgresql:// URL")
	}
	q := u.Query()
	for key := range q {
		if !clientSettings[key] {
			q.Del(key)
		}
	}
	return target{query: q}, nil
}

// clientSettings are the target URL's settings that a binding's uri
// keeps: each says how the target cluster must be reached (TLS or not, how
// TLS is negotiated, which server of several, how long to wait), which
// holds for every client. Every other setting is the broker's own and
// stays with it: its TLS key, certificates and their password, its
// password and service files (paths on the broker's machine, which a
// tenant has no business knowing and cannot read), its application_name
// (a tenant's connections must not pass for the broker's) and the other
// run-time parameters it sets. The uri names its own user, password,
// database and address.
var clientSettings = map[string]bool{
	"sslmode":              true,
	"sslnegotiation":       true,
	"sslsni":               true,
	"channel_binding":      true,
	"target_session_attrs": true,
	"connect_timeout":      true,
}

// check connects once with cfg and tells whether its role can do the
// driver's work; it returns the server's version number.
func check(ctx context.Context, cfg *pgx.ConnConfig) (int, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	var super, createDB, createRole bool
	err = conn.QueryRow(ctx, `
		SELECT current_setting('server_version_num')::int, rolsuper, rolcreatedb, rolcreaterole
		FROM pg_roles WHERE rolname = current_user`).Scan(&version, &super, &createDB, &createRole)
	if err != nil {
		return 0, fmt.Errorf("read server version and privileges: %w", err)
	}
	if version < 130000 {
		// DROP DATABASE ... WITH (FORCE) came in PostgreSQL 13.
		return 0, fmt.Errorf("PostgreSQL %d.%d is too old: 13 or later is needed", version/10000, version%10000/100)
	}
	if !super && !(createDB && createRole) {
		return 0, errors.New("the connecting role needs SUPERUSER, or CREATEDB and CREATEROLE")
	}
	return version, nil
}

// Close releases the connections to the target cluster.
func (d *Driver) Close() { d.pool.Close() }

// Provision creates the instance's owner role and database with the plan's
// settings and extensions. Called again it finishes or confirms the work.
// If it fails, it drops what this call created.
func (d *Driver) Provision(ctx context.Context, req broker.InstanceRequest) (broker.ProvisionResult, error) {
	err := d.locked(ctx, req.InstanceID, func(conn *pgx.Conn) error { return d.provision(ctx, conn, req) })
	if err != nil {
		return broker.ProvisionResult{}, fmt.Errorf("provision instance %q: %w", req.InstanceID, err)
	}
	return broker.ProvisionResult{}, nil
}

func (d *Driver) provision(ctx context.Context, conn *pgx.Conn, req broker.InstanceRequest) (err error) {
	cfg, err := instanceConfig(req)
	if err != nil {
		return err
	}
	n := InstanceNames(req.InstanceID)
	log := d.log.With("instance", req.InstanceID, "database", n.Database)
	if err := d.extensions.check(ctx, conn, cfg.Extensions); err != nil {
		return err
	}
	var have Existing
	if have.Owner, err = roleExists(ctx, conn, n.Owner); err != nil {
		return err
	}
	if have.Database, err = databaseExists(ctx, conn, n.Database); err != nil {
		return err
	}
	// Only what this call creates is undone on failure: a repeated
	// Provision must never drop a database that is in use.
	var created Existing
	defer func() {
		if err != nil && (created.Owner || created.Database) {
			if cerr := d.undoProvision(conn, n, created); cerr != nil {
				log.Error("undo failed provision", "error", cerr)
				err = errors.Join(err, fmt.Errorf("undo: %w", cerr))
			}
		}
	}()
	err = d.withinBudget(ctx, conn, n, cfg.ConnectionLimit, func() error {
		for _, stmt := range ProvisionStatements(n, cfg, have) {
			if err := exec(ctx, conn, stmt); err != nil {
				return err
			}
			switch {
			case strings.HasPrefix(stmt, "CREATE ROLE "):
				created.Owner = true
			case strings.HasPrefix(stmt, "CREATE DATABASE "):
				created.Database = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.inDatabase(ctx, n.Database, ProvisionDatabaseStatements(n, cfg)); err != nil {
		return err
	}
	log.Info("provisioned database", "new", !have.Database)
	return nil
}

// undoProvision drops what a failed Provision created. It runs even when
// the caller's context has ended; conn is then closed, and it connects
// anew rather than wait for the pool.
func (d *Driver) undoProvision(conn *pgx.Conn, n Names, created Existing) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if conn.IsClosed() {
		var err error
		if conn, err = pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer conn.Close(ctx)
	}
	for _, stmt := range UndoProvisionStatements(n, created) {
		if err := exec(ctx, conn, stmt); err != nil {
			return err
		}
	}
	return nil
}

// Update applies the desired plan's connection limit, statement timeout and
// extensions. Extensions come first, in one transaction, so that a failure
// leaves the previous settings in place.
func (d *Driver) Update(ctx context.Context, req broker.UpdateRequest) error {
	err := d.locked(ctx, req.Desired.InstanceID, func(conn *pgx.Conn) error { return d.update(ctx, conn, req.Desired) })
	if err != nil {
		return fmt.Errorf("update instance %q: %w", req.Desired.InstanceID, err)
	}
	return nil
}

func (d *Driver) update(ctx context.Context, conn *pgx.Conn, req broker.InstanceRequest) error {
	cfg, err := instanceConfig(req)
	if err != nil {
		return err
	}
	n := InstanceNames(req.InstanceID)
	exists, err := databaseExists(ctx, conn, n.Database)
	if err != nil {
		return err
	}
	if !exists {
		return errors.New("its database does not exist")
	}
	if err := d.extensions.check(ctx, conn, cfg.Extensions); err != nil {
		return err
	}
	if err := d.inDatabase(ctx, n.Database, ExtensionStatements(cfg)); err != nil {
		return err
	}
	roles, err := bindingRoles(ctx, conn, n.Owner)
	if err != nil {
		return err
	}
	err = d.withinBudget(ctx, conn, n, cfg.ConnectionLimit, func() error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, stmt := range UpdateStatements(n, cfg, roles) {
				if err := exec(ctx, tx, stmt); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	d.log.Info("updated database", "instance", req.InstanceID, "database", n.Database)
	return nil
}

// Deprovision drops the instance's database, ending its sessions, every
// binding role still in it, and its owner role. What is already gone is
// not an error.
func (d *Driver) Deprovision(ctx context.Context, req broker.InstanceRequest) error {
	err := d.locked(ctx, req.InstanceID, func(conn *pgx.Conn) error { return d.deprovision(ctx, conn, req) })
	if err != nil {
		return fmt.Errorf("deprovision instance %q: %w", req.InstanceID, err)
	}
	return nil
}

func (d *Driver) deprovision(ctx context.Context, conn *pgx.Conn, req broker.InstanceRequest) error {
	n := InstanceNames(req.InstanceID)
	roles, err := bindingRoles(ctx, conn, n.Owner)
	if err != nil {
		return err
	}
	for _, stmt := range DeprovisionStatements(n, roles) {
		if err := exec(ctx, conn, stmt); err != nil {
			return err
		}
	}
	d.log.Info("deprovisioned database", "instance", req.InstanceID, "database", n.Database, "binding_roles", len(roles))
	return nil
}

// bindingRoles lists the binding roles that are members of owner.
func bindingRoles(ctx context.Context, conn *pgx.Conn, owner string) ([]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT m.rolname
		FROM pg_roles o
		JOIN pg_auth_members am ON am.roleid = o.oid
		JOIN pg_roles m ON m.oid = am.member
		WHERE o.rolname = $1 AND starts_with(m.rolname, $2)
		ORDER BY m.rolname`, owner, BindingRolePrefix)
	if err != nil {
		return nil, fmt.Errorf("list binding roles: %w", err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list binding roles: %w", err)
	}
	return roles, nil
}

// Bind creates the binding's login role with a new password, or gives an
// existing one a new password, in one transaction: a failure leaves
// nothing behind. A rotation (PredecessorBindingID set) is a binding like
// any other; the predecessor's role stays until it is unbound.
func (d *Driver) Bind(ctx context.Context, req broker.BindRequest) (broker.BindResult, error) {
	var res broker.BindResult
	err := d.locked(ctx, req.Instance.InstanceID, func(conn *pgx.Conn) (err error) {
		res, err = d.bind(ctx, conn, req)
		return err
	})
	if err != nil {
		return broker.BindResult{}, fmt.Errorf("bind %q to instance %q: %w", req.BindingID, req.Instance.InstanceID, err)
	}
	return res, nil
}

func (d *Driver) bind(ctx context.Context, conn *pgx.Conn, req broker.BindRequest) (broker.BindResult, error) {
	n := InstanceNames(req.Instance.InstanceID)
	role := BindingRole(req.BindingID)
	cfg, err := instanceConfig(req.Instance)
	if err != nil {
		return broker.BindResult{}, err
	}
	limit, err := bindingLimit(ctx, conn, n.Database, cfg.ConnectionLimit)
	if err != nil {
		return broker.BindResult{}, err
	}
	password := NewPassword()
	verifier, err := HashPassword(password)
	if err != nil {
		return broker.BindResult{}, err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
			return fmt.Errorf("look up role: %w", err)
		}
		for _, stmt := range BindStatements(n, role, verifier, limit, exists) {
			if err := exec(ctx, tx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return broker.BindResult{}, err
	}
	d.log.Info("bound role", "instance", req.Instance.InstanceID, "binding", req.BindingID, "role", role,
		"predecessor", req.PredecessorBindingID)
	return d.target.result(n.Database, role, password), nil
}

// bindingLimit is the connection limit of a new binding role of database
// db: the database's own, which provision and every plan change set
// together with the limits of the binding roles already there. It is read
// under the instance's lock, so a binding whose request was made before a
// plan change ran (its plan's limit, planLimit, is then the old plan's)
// still gets the limit the instance has now. planLimit serves only for a
// database without a limit.
func bindingLimit(ctx context.Context, conn *pgx.Conn, db string, planLimit int) (int, error) {
	var limit int32
	err := conn.QueryRow(ctx, `SELECT datconnlimit FROM pg_database WHERE datname = $1`, db).Scan(&limit)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, errors.New("the instance's database does not exist")
	case err != nil:
		return 0, fmt.Errorf("read the database's connection limit: %w", err)
	case limit < 0:
		return planLimit, nil
	}
	return int(limit), nil
}

func (t target) result(database, role, password string) broker.BindResult {
	hostPort := net.JoinHostPort(t.host, strconv.Itoa(int(t.port)))
	uri := url.URL{
		Scheme:   "postgresql",
		User:     url.UserPassword(role, password),
		Host:     hostPort,
		Path:     "/" + database,
		RawQuery: t.query.Encode(),
	}
	jdbc := url.Values{"user": {role}, "password": {password}}
	if mode := t.query.Get("sslmode"); mode != "" {
		jdbc.Set("sslmode", mode)
	}
	return broker.BindResult{
		Credentials: map[string]any{
			"uri":      uri.String(),
			"jdbcUrl":  "jdbc:postgresql://" + hostPort + "/" + database + "?" + jdbc.Encode(),
			"host":     t.host,
			"port":     int(t.port),
			"database": database,
			"username": role,
			"password": password,
		},
		Endpoints: []broker.Endpoint{{Host: t.host, Ports: []string{strconv.Itoa(int(t.port))}, Protocol: "tcp"}},
	}
}

// Unbind takes the binding's credentials away at once: its role can no
// longer log in and its open sessions are ended (an application still
// connected must not go on working with revoked credentials). Then, as the
// ownership model says (see the package documentation), what the role owns
// itself in the database is handed to the instance's owner role, its
// privileges are revoked and it is dropped. A missing role or database is
// not an error.
func (d *Driver) Unbind(ctx context.Context, req broker.BindRequest) error {
	err := d.locked(ctx, req.Instance.InstanceID, func(conn *pgx.Conn) error { return d.unbind(ctx, conn, req) })
	if err != nil {
		return fmt.Errorf("unbind %q from instance %q: %w", req.BindingID, req.Instance.InstanceID, err)
	}
	return nil
}

func (d *Driver) unbind(ctx context.Context, conn *pgx.Conn, req broker.BindRequest) error {
	n := InstanceNames(req.Instance.InstanceID)
	role := BindingRole(req.BindingID)
	exists, err := roleExists(ctx, conn, role)
	if err != nil || !exists {
		return err
	}
	for _, stmt := range DisableLoginStatements(role) {
		if err := exec(ctx, conn, stmt); err != nil {
			return err
		}
	}
	if err := terminateSessions(ctx, conn, role); err != nil {
		return err
	}
	dbExists, err := databaseExists(ctx, conn, n.Database)
	if err != nil {
		return err
	}
	if dbExists {
		err := d.inDatabase(ctx, n.Database, UnbindDatabaseStatements(n, role))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidCatalogName {
			err = nil // dropped since we looked: nothing left in it to hand over
		}
		if err != nil {
			return err
		}
	}
	for _, stmt := range UnbindStatements(role) {
		if err := exec(ctx, conn, stmt); err != nil {
			return err
		}
	}
	d.log.Info("unbound role", "instance", req.Instance.InstanceID, "binding", req.BindingID, "role", role)
	return nil
}

// sessionEndWait is how long Unbind waits for each session it ends.
const sessionEndWait = 5 * time.Second

// terminateSessions ends every session role logged in with and waits for
// them to be gone.
func terminateSessions(ctx context.Context, conn *pgx.Conn, role string) error {
	rows, err := conn.Query(ctx, SessionsQuery, role)
	if err != nil {
		return fmt.Errorf("list the sessions of role %s: %w", role, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("list the sessions of role %s: %w", role, err)
	}
	for _, pid := range pids {
		var ended bool
		err := conn.QueryRow(ctx, TerminateQuery, pid, sessionEndWait.Milliseconds()).Scan(&ended)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InsufficientPrivilege:
			return fmt.Errorf("end session %d of role %s: the broker's role needs SUPERUSER or membership in pg_signal_backend: %w", pid, role, err)
		case err != nil:
			return fmt.Errorf("end session %d of role %s: %w", pid, role, err)
		case !ended:
			// Also false for a session that ended meanwhile; look again.
			var alive bool
			if err := conn.QueryRow(ctx, SessionQuery, pid).Scan(&alive); err != nil {
				return fmt.Errorf("end session %d of role %s: %w", pid, role, err)
			}
			if alive {
				return fmt.Errorf("end session %d of role %s: still there after %s", pid, role, sessionEndWait)
			}
		}
	}
	return nil
}

// locked runs fn on a connection to the target cluster that holds the
// instance's advisory lock, so that operations on one instance take turns.
func (d *Driver) locked(ctx context.Context, instanceID string, fn func(*pgx.Conn) error) error {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Release()
	return holding(ctx, c.Conn(), "bindery/broker/postgresql:"+instanceID, func() error { return fn(c.Conn()) })
}

// holding runs fn while conn holds the session-level advisory lock named
// name, across every process that uses the target cluster.
func holding(ctx context.Context, conn *pgx.Conn, name string, fn func() error) error {
	sum := sha256.Sum256([]byte(name))
	key := int64(binary.BigEndian.Uint64(sum[:8]))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			// A closed connection leaves the pool, and its lock ends with
			// its session.
			_ = conn.Close(uctx)
		}
	}()
	return fn()
}

// budgetLock names the lock that makes changes to the instances'
// connection limits take turns, so that two provisions cannot both take
// the last free slots. Instance locks name "...:" + an id: never this.
const budgetLock = "bindery/broker/postgresql/connections"

// withinBudget runs fn, which gives database n a connection limit of
// limit, under the budget lock, once the cluster is found to hold it.
func (d *Driver) withinBudget(ctx context.Context, conn *pgx.Conn, n Names, limit int, fn func() error) error {
	return holding(ctx, conn, budgetLock, func() error {
		b, err := readBudget(ctx, conn, n.Database, d.reserved)
		if err != nil {
			return err
		}
		if err := b.admit(limit); err != nil {
			return err
		}
		return fn()
	})
}

// CheckCapacity tells whether the target cluster can hold the plan's
// connection limit besides what the other instances' databases hold: see
// broker.CapacityChecker. Provision and Update check again, under a lock.
func (d *Driver) CheckCapacity(ctx context.Context, req broker.InstanceRequest) error {
	cfg, err := instanceConfig(req)
	if err != nil {
		return err
	}
	b, err := readBudget(ctx, d.pool, InstanceNames(req.InstanceID).Database, d.reserved)
	if err != nil {
		return err
	}
	return b.admit(cfg.ConnectionLimit)
}

var _ broker.CapacityChecker = (*Driver)(nil)

// budget is how a cluster's connection slots are shared: max_connections,
// less those PostgreSQL keeps for superusers (superuser_reserved_connections
// and, from PostgreSQL 16, reserved_connections) and those kept for
// Bindery, is what the instances' databases may hold together.
type budget struct {
	max, superusers, bindery int
	// committed is what the instances' databases hold, but the one being
	// changed; a database without a limit (-1) holds every slot, one
	// being dropped (-2, from PostgreSQL 15.4) none.
	committed int
}

func (b budget) forInstances() int { return b.max - b.superusers - b.bindery }

// admit returns a *broker.CapacityError when a database of limit
// connections does not fit.
func (b budget) admit(limit int) error {
	if b.committed+limit <= b.forInstances() {
		return nil
	}
	return &broker.CapacityError{Reason: fmt.Sprintf(
		"the target cluster has no room for a database of %d connections: of its max_connections %d, "+
			"%d are reserved for superusers and %d for Bindery, and the other instances hold %d of the %d left",
		limit, b.max, b.superusers, b.bindery, b.committed, max(b.forInstances(), 0))}
}

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readBudget reads the cluster's budget, leaving database out of what is
// committed (it is the one being changed).
func readBudget(ctx context.Context, q rowQuerier, database string, reserved int) (budget, error) {
	b := budget{bindery: reserved}
	err := q.QueryRow(ctx, `
		SELECT current_setting('max_connections')::int,
			current_setting('superuser_reserved_connections')::int + coalesce(current_setting('reserved_connections', true)::int, 0),
			coalesce(sum(CASE datconnlimit WHEN -1 THEN current_setting('max_connections')::int ELSE datconnlimit END)
				FILTER (WHERE datname <> $2 AND datconnlimit >= -1), 0)::int
		FROM pg_database WHERE starts_with(datname, $1)`, DatabasePrefix, database).Scan(&b.max, &b.superusers, &b.committed)
	if err != nil {
		return budget{}, fmt.Errorf("read the cluster's connection budget: %w", err)
	}
	return b, nil
}

// adopt takes back, for the broker's role, the instance databases an
// older version gave their owner roles (see ProvisionStatements). What it
// cannot take back it names in a warning: their tenants can still lift
// their connection limits.
func (d *Driver) adopt(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, `SELECT datname FROM pg_database
		WHERE starts_with(datname, $1) AND datdba <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
		ORDER BY datname`, DatabasePrefix)
	if err != nil {
		return fmt.Errorf("list instance databases: %w", err)
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list instance databases: %w", err)
	}
	for _, db := range dbs {
		n := Names{Database: db, Owner: OwnerPrefix + strings.TrimPrefix(db, DatabasePrefix)}
		for _, stmt := range AdoptStatements(n) {
			if err := exec(ctx, d.pool, stmt); err != nil {
				d.log.Warn("cannot take back an instance database from its tenant", "database", db, "error", err)
				break
			}
		}
	}
	return d.limitOldBindingRoles(ctx)
}

// limitOldBindingRoles gives the binding roles an older version made
// without a connection limit their instance database's: unlimited, one
// could hold every slot of the databases PUBLIC may connect to.
func (d *Driver) limitOldBindingRoles(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, `SELECT m.rolname, db.datconnlimit
		FROM pg_roles m
		JOIN pg_auth_members am ON am.member = m.oid
		JOIN pg_roles o ON o.oid = am.roleid AND starts_with(o.rolname, $2)
		JOIN pg_database db ON db.datname = $3 || substr(o.rolname, length($2) + 1)
		WHERE starts_with(m.rolname, $1) AND m.rolconnlimit < 0 AND db.datconnlimit >= 0
		ORDER BY m.rolname`, BindingRolePrefix, OwnerPrefix, DatabasePrefix)
	if err != nil {
		return fmt.Errorf("list binding roles without a connection limit: %w", err)
	}
	type unlimited struct {
		Role  string
		Limit int32
	}
	roles, err := pgx.CollectRows(rows, pgx.RowToStructByPos[unlimited])
	if err != nil {
		return fmt.Errorf("list binding roles without a connection limit: %w", err)
	}
	for _, r := range roles {
		if err := exec(ctx, d.pool, LimitRoleStatement(r.Role, int(r.Limit))); err != nil {
			d.log.Warn("cannot give a binding role its database's connection limit", "role", r.Role, "error", err)
		}
	}
	return nil
}

// warnOpenDatabases names the databases of the target cluster that every
// role may connect to: binding roles can open sessions there, up to their
// connection limits, taking slots the plans do not account for.
func (d *Driver) warnOpenDatabases(ctx context.Context) {
	rows, err := d.pool.Query(ctx, `SELECT datname FROM pg_database
		WHERE datallowconn AND NOT starts_with(datname, $1) AND has_database_privilege('public', oid, 'CONNECT')
		ORDER BY datname`, DatabasePrefix)
	if err != nil {
		d.log.Warn("cannot list the databases PUBLIC may connect to", "error", err)
		return
	}
	open, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		d.log.Warn("cannot list the databases PUBLIC may connect to", "error", err)
		return
	}
	if len(open) > 0 {
		d.log.Warn("every role may connect to these databases of the target cluster, binding roles included: "+
			"revoke it (REVOKE CONNECT ON DATABASE name FROM PUBLIC) and grant CONNECT to the roles that need it",
			"databases", strings.Join(open, ","))
	}
}

// instanceConfig is the plan's config with the instance's parameters
// applied.
func instanceConfig(req broker.InstanceRequest) (PlanConfig, error) {
	cfg, err := ParsePlanConfig(req.PlanConfig)
	if err != nil {
		return PlanConfig{}, err
	}
	return cfg.WithParameters(req.Parameters)
}

// check refuses extensions the cluster does not have before anything is
// created, with a message a user can act on.
func (c *extensionCache) check(ctx context.Context, conn *pgx.Conn, exts []string) error {
	if len(exts) == 0 {
		return nil
	}
	missing, err := c.missing(ctx, conn, exts)
	if err != nil {
		return err
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("extension %q is not available on the target cluster", missing[0])
	}
	quoted := make([]string, len(missing))
	for i, m := range missing {
		quoted[i] = strconv.Quote(m)
	}
	return fmt.Errorf("extensions %s are not available on the target cluster", strings.Join(quoted, ", "))
}

// extensionCache holds the names of the extensions the target cluster
// has. Reading pg_available_extensions reads every extension's control
// file, the slowest step of a provision's checks, and the set changes only
// when packages are installed on the server: it is read again when it is
// older than extensionCacheTTL or lacks a name asked for. CREATE EXTENSION
// stays the authority: the check only refuses early what would fail later.
type extensionCache struct {
	mu    sync.Mutex
	names map[string]bool
	read  time.Time
}

const extensionCacheTTL = time.Minute

// missing returns the extensions of exts the cluster does not have, in
// their order.
func (c *extensionCache) missing(ctx context.Context, conn *pgx.Conn, exts []string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lacking := func() (out []string) {
		for _, e := range exts {
			if !c.names[e] {
				out = append(out, e)
			}
		}
		return out
	}
	if time.Since(c.read) < extensionCacheTTL && len(lacking()) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `SELECT name FROM pg_available_extensions`)
	if err != nil {
		return nil, fmt.Errorf("list available extensions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list available extensions: %w", err)
	}
	c.names, c.read = make(map[string]bool, len(names)), time.Now()
	for _, n := range names {
		c.names[n] = true
	}
	return lacking(), nil
}

func roleExists(ctx context.Context, conn *pgx.Conn, role string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up role: %w", err)
	}
	return ok, nil
}

func databaseExists(ctx context.Context, conn *pgx.Conn, db string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up database: %w", err)
	}
	return ok, nil
}

// inDatabase runs stmts in one transaction, connected to database db of
// the target cluster with the driver's own credentials.
func (d *Driver) inDatabase(ctx context.Context, db string, stmts []string) error {
	if len(stmts) == 0 {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, d.sessionConfig(db))
	if err != nil {
		return fmt.Errorf("connect to database %s: %w", db, unwrapConnect(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, stmt := range stmts {
			if err := exec(ctx, tx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// sessionConfig is how the driver connects to database db: as to the
// target cluster's own database, its settings pinned.
func (d *Driver) sessionConfig(db string) *pgx.ConnConfig {
	cfg := d.pool.Config().ConnConfig
	cfg.Database = db
	return cfg
}

// unwrapConnect keeps the server's reason for refusing a connection.
func unwrapConnect(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &sqlError{err: err}
	}
	return err
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func exec(ctx context.Context, db execer, stmt string) error {
	if _, err := db.Exec(ctx, stmt); err != nil {
		return &sqlError{what: describe(stmt), err: err}
	}
	return nil
}

// describe names a statement for an error message: its words up to the
// first identifier, which never reaches a password verifier.
func describe(stmt string) string {
	first := strings.IndexByte(stmt, '"')
	if first < 0 {
		return strings.ToLower(stmt)
	}
	end := first + 1
	for end < len(stmt) {
		if stmt[end] == '"' {
			if end+1 < len(stmt) && stmt[end+1] == '"' {
				end += 2
				continue
			}
			break
		}
		end++
	}
	end = min(end+1, len(stmt))
	verb := strings.ToLower(stmt[:first])
	verb = strings.Replace(verb, " if not exists", "", 1)
	verb = strings.Replace(verb, " if exists", "", 1)
	return verb + stmt[first:end]
}

// sqlError shows a server error by its message (and detail), which is
// what an end user can act on; errors.As still reaches the *pgconn.PgError.
type sqlError struct {
	what string
	err  error
}

func (e *sqlError) Error() string {
	msg := e.err.Error()
	var pgErr *pgconn.PgError
	if errors.As(e.err, &pgErr) {
		msg = pgErr.Message
		if pgErr.Detail != "" {
			msg += " (" + pgErr.Detail + ")"
		}
	}
	if e.what == "" {
		return msg
	}
	return e.what + ": " + msg
}

func (e *sqlError) Unwrap() error { return e.err }

// ValidatePlanConfig checks a plan's `config` when the broker loads its
// catalogue, so that a bad catalogue stops the broker at start.
func (d *Driver) ValidatePlanConfig(config []byte) error {
	_, err := ParsePlanConfig(config)
	return err
}

var _ broker.PlanConfigValidator = (*Driver)(nil)
