package postgresql

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The statement builders below are the whole of the SQL this driver runs
// to change a cluster. They are pure, so tests (and benchmarks that run
// the same statements without the driver) see exactly what the driver
// executes. Each statement is sent on its own: CREATE DATABASE and DROP
// DATABASE refuse to run inside a transaction block.
//
// Identifiers are quoted with pgx.Identifier.Sanitize. Utility statements
// take no bind parameters, so the only values written into them are
// integers, names derived from ids, and a SCRAM verifier quoted as a
// string literal.

// Existing says which of an instance's objects are already there, so that
// Provision called again skips creating them.
type Existing struct {
	Owner    bool
	Database bool
}

// ProvisionStatements creates an instance's owner role and database and
// applies the plan's settings; they run connected to the target cluster's
// own database. A fresh instance has Existing{}.
//
// The database belongs to the broker's own role (CURRENT_USER), not to
// the tenant: its owner could lift its connection limit and set defaults
// for every session in it, the broker's included. The owner role gets
// every privilege on it instead (CREATE, CONNECT, TEMPORARY). A database
// an older version gave to the owner role is taken back.
func ProvisionStatements(n Names, cfg PlanConfig, have Existing) []string {
	db, owner := ident(n.Database), ident(n.Owner)
	var stmts []string
	if !have.Owner {
		stmts = append(stmts, "CREATE ROLE "+owner+" NOLOGIN")
	}
	if have.Database {
		stmts = append(stmts, "ALTER DATABASE "+db+" OWNER TO CURRENT_USER")
	} else {
		stmts = append(stmts, "CREATE DATABASE "+db+" CONNECTION LIMIT "+strconv.Itoa(cfg.ConnectionLimit))
	}
	stmts = append(stmts, settingStatements(n, cfg, have.Database)...)
	return append(stmts,
		"REVOKE ALL ON DATABASE "+db+" FROM PUBLIC",
		"GRANT ALL ON DATABASE "+db+" TO "+owner,
	)
}

// AdoptStatements give an instance database that an older version made
// its owner role's to the broker's role, with the owner role's privileges
// kept as ProvisionStatements grants them.
func AdoptStatements(n Names) []string {
	db := ident(n.Database)
	return []string{
		"ALTER DATABASE " + db + " OWNER TO CURRENT_USER",
		"REVOKE ALL ON DATABASE " + db + " FROM PUBLIC",
		"GRANT ALL ON DATABASE " + db + " TO " + ident(n.Owner),
	}
}

// LimitRoleStatement sets a binding role's connection limit.
func LimitRoleStatement(role string, limit int) string {
	return "ALTER ROLE " + ident(role) + " CONNECTION LIMIT " + strconv.Itoa(limit)
}

// ProvisionDatabaseStatements prepare the inside of a new database: the
// plan's extensions, and schema public owned by the owner role with no
// CREATE for PUBLIC. They run connected to the instance's database.
func ProvisionDatabaseStatements(n Names, cfg PlanConfig) []string {
	return append(ExtensionStatements(cfg),
		"ALTER SCHEMA public OWNER TO "+ident(n.Owner),
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
	)
}

// ExtensionStatements create the plan's extensions that are missing, in
// the instance's database, in schema public as before: the broker's
// sessions otherwise search pg_catalog alone (see Driver), which
// CREATE EXTENSION would pick. SET LOCAL ends with the transaction.
func ExtensionStatements(cfg PlanConfig) []string {
	if len(cfg.Extensions) == 0 {
		return []string{}
	}
	stmts := []string{"SET LOCAL search_path TO public"}
	for _, e := range cfg.Extensions {
		stmts = append(stmts, "CREATE EXTENSION IF NOT EXISTS "+ident(e))
	}
	return stmts
}

// UpdateStatements apply a plan's connection limit and statement timeout
// to an existing database, and the limit to its binding roles, connected
// to the target cluster's own database. New extensions come from
// ExtensionStatements, run in the instance's database.
func UpdateStatements(n Names, cfg PlanConfig, bindingRoles []string) []string {
	stmts := settingStatements(n, cfg, true)
	for _, r := range bindingRoles {
		stmts = append(stmts, LimitRoleStatement(r, cfg.ConnectionLimit))
	}
	return stmts
}

func settingStatements(n Names, cfg PlanConfig, limit bool) []string {
	db := ident(n.Database)
	var stmts []string
	if limit {
		stmts = append(stmts, "ALTER DATABASE "+db+" CONNECTION LIMIT "+strconv.Itoa(cfg.ConnectionLimit))
	}
	if cfg.StatementTimeout > 0 {
		stmts = append(stmts, "ALTER DATABASE "+db+" SET statement_timeout = "+strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10))
	} else {
		stmts = append(stmts, "ALTER DATABASE "+db+" RESET statement_timeout")
	}
	return stmts
}

// BindStatements give a binding its login role, with the SCRAM verifier as
// its password, the instance's connection limit, membership in the owner role,
// CONNECT on the database, and `SET role` to the owner in that database,
// so that what an application creates belongs to the owner and every
// binding sees it. exists says the role is already there (a repeated
// Bind): it then gets the new password. They run connected to the target
// cluster's own database.
//
// The role's limit holds wherever it connects, and a role cannot raise its
// own: on a cluster whose other databases PUBLIC may still connect to, a
// binding takes no more slots there than its plan gives it.
func BindStatements(n Names, role, verifier string, limit int, exists bool) []string {
	r, db, owner := ident(role), ident(n.Database), ident(n.Owner)
	login := " LOGIN CONNECTION LIMIT " + strconv.Itoa(limit) + " PASSWORD " + quoteLiteral(verifier)
	var stmts []string
	if exists {
		stmts = append(stmts,
			"ALTER ROLE "+r+login,
			"GRANT "+owner+" TO "+r,
		)
	} else {
		stmts = append(stmts, "CREATE ROLE "+r+login+" IN ROLE "+owner)
	}
	return append(stmts,
		"GRANT CONNECT ON DATABASE "+db+" TO "+r,
		"ALTER ROLE "+r+" IN DATABASE "+db+" SET role = "+owner,
	)
}

// DisableLoginStatements keep a binding's role from opening sessions, the
// first step of an unbind, before its open sessions are ended
// (TerminateSessionsQuery). They run connected to the target cluster's own
// database.
func DisableLoginStatements(role string) []string {
	return []string{"ALTER ROLE " + ident(role) + " NOLOGIN"}
}

// SessionsQuery lists the sessions a role logged in with ($1), and
// TerminateQuery ends one ($1, the pid) waiting up to $2 milliseconds for
// it to be gone, and SessionQuery says whether it still is there. Listing
// and ending are two steps: PostgreSQL may evaluate a function in a WHERE
// clause before the other conditions, on rows they exclude.
// Ending another role's sessions takes SUPERUSER or pg_signal_backend.
const (
	SessionsQuery  = `SELECT pid FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()`
	TerminateQuery = `SELECT pg_terminate_backend($1, $2)`
	SessionQuery   = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`
)

// UnbindDatabaseStatements hand whatever a binding role still owns in the
// instance's database to the owner role and revoke its privileges there.
// They run connected to the instance's database, before UnbindStatements.
func UnbindDatabaseStatements(n Names, role string) []string {
	r := ident(role)
	return []string{
		"REASSIGN OWNED BY " + r + " TO " + ident(n.Owner),
		"DROP OWNED BY " + r,
	}
}

// UnbindStatements drop a binding's role, connected to the target
// cluster's own database.
func UnbindStatements(role string) []string {
	return []string{"DROP ROLE IF EXISTS " + ident(role)}
}

// DeprovisionStatements drop an instance's database (ending its sessions),
// the binding roles still in it, and its owner role. bindingRoles are the
// members of the owner role that carry the binding prefix.
func DeprovisionStatements(n Names, bindingRoles []string) []string {
	stmts := []string{"DROP DATABASE IF EXISTS " + ident(n.Database) + " WITH (FORCE)"}
	for _, r := range bindingRoles {
		// DROP OWNED also revokes what the role was granted on shared
		// objects, such as CONNECT on a database, which would otherwise
		// keep DROP ROLE from succeeding whenever such a grant outlives
		// the database drop (seen once, when a resumed provision raced it).
		stmts = append(stmts, "DROP OWNED BY "+ident(r), "DROP ROLE IF EXISTS "+ident(r))
	}
	return append(stmts, "DROP ROLE IF EXISTS "+ident(n.Owner))
}

// UndoProvisionStatements drop what a failed Provision created, and only
// that: created says which of the two objects this attempt made.
func UndoProvisionStatements(n Names, created Existing) []string {
	var stmts []string
	if created.Database {
		stmts = append(stmts, "DROP DATABASE IF EXISTS "+ident(n.Database)+" WITH (FORCE)")
	}
	if created.Owner {
		stmts = append(stmts, "DROP ROLE IF EXISTS "+ident(n.Owner))
	}
	return stmts
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// quoteLiteral writes s as a string literal that means s whatever
// standard_conforming_strings says, as libpq's PQescapeLiteral does.
func quoteLiteral(s string) string {
	s = strings.ReplaceAll(s, "'", "''")
	if strings.Contains(s, `\`) {
		return `E'` + strings.ReplaceAll(s, `\`, `\\`) + `'`
	}
	return "'" + s + "'"
}
