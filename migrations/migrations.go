// Package migrations holds the SQL migrations of every schema Bindery owns,
// embedded in the binary, and applies them with golang-migrate. Each schema
// has its own source and its own migrations table inside the schema, so
// components can be migrated (and reverted) independently.
package migrations

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"k8s.io/apimachinery/pkg/util/wait"
)

//go:embed broker/*.sql catalog/*.sql
var files embed.FS

// Broker is the schema of the OSB broker (broker/), which also holds River's
// job tables.
const Broker = "broker"

// Catalog is the schema of the catalog (catalog/): brokers, classes, plans,
// instances, bindings and the change feed.
const Catalog = "catalog"

// sources maps each schema to its migration files.
var sources = map[string]string{
	Broker:  "broker",
	Catalog: "catalog",
}

// withRiver lists the schemas that also hold River's tables.
var withRiver = []string{Broker}

// Schemas lists the schemas that have migrations.
func Schemas() []string {
	out := make([]string, 0, len(sources))
	for s := range sources {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ErrNoChange is returned by Down when the schema has no migration applied.
var ErrNoChange = errors.New("no migration to revert")

// ErrSchemaNewer is returned by Up when the schema is at a migration this
// binary does not have: a newer release migrated it. The schema is left
// as it is; during a rolling update the previous release keeps serving on
// it (docs/operations.md, "Upgrades").
var ErrSchemaNewer = errors.New("the schema is newer than this release")

// Up applies every pending migration of schema, or returns ErrSchemaNewer
// and changes nothing when the schema is ahead of this binary. A migration
// left in its middle (a dirty version: the process died while it ran) is
// run again (resume). Migrators of one schema take turns (locked). A
// migration that waits longer than lockTimeout for a table's lock rolls
// back and is tried again, for at most lockRetryFor (retryLocks).
func Up(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return locked(ctx, pool, schema, func() error {
		err := retryLocks(ctx, schema, func() error {
			return withMigrate(ctx, pool, schema, func(m *migrate.Migrate, self string) error {
				if err := ahead(m, schema); err != nil {
					return err
				}
				if err := resume(ctx, pool, m, schema, self); err != nil {
					return err
				}
				if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
					return fmt.Errorf("migrate %s up: %w", schema, err)
				}
				return nil
			})
		})
		if err != nil || !slices.Contains(withRiver, schema) {
			return err
		}
		return riverMigrate(ctx, pool, schema, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{})
	})
}

// Down reverts the last applied migration of schema. When that was the
// schema's first migration, River's tables in it are removed as well. A
// migration left in its middle (dirty) is the step reverted (down). A
// revert that waits too long for a table's lock is tried again, as in Up.
func Down(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return locked(ctx, pool, schema, func() error {
		var none bool
		err := retryLocks(ctx, schema, func() error {
			return withMigrate(ctx, pool, schema, func(m *migrate.Migrate, self string) error {
				var err error
				none, err = down(ctx, pool, m, schema, self)
				return err
			})
		})
		if err != nil || !none || !slices.Contains(withRiver, schema) {
			return err
		}
		return riverMigrate(ctx, pool, schema, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
	})
}

// down reverts one step of schema and says whether none is left. On a
// schema left dirty, the interrupted migration is the step: resume readies
// it as for Up, which finishes a revert that was under way; a migration
// that was going up may have done its work before it stopped, so its down
// file runs (such a file is written to run again safely, resumeAt).
// golang-migrate alone refused ("Dirty database version N. Fix and force
// version."), and Bindery has no force.
func down(ctx context.Context, pool *pgxpool.Pool, m *migrate.Migrate, schema, self string) (none bool, err error) {
	v, dirty, _, err := position(m, schema)
	if err != nil {
		return false, err
	}
	if dirty {
		if err := resume(ctx, pool, m, schema, self); err != nil {
			return false, err
		}
		if at, _, _, err := position(m, schema); err != nil || at == v {
			return at == 0, err // the revert to v is finished
		}
		if err := m.Force(int(v)); err != nil {
			return false, fmt.Errorf("migrate %s down: revert the interrupted migration %d: %w", schema, v, err)
		}
	}
	if err := m.Steps(-1); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, migrate.ErrNilVersion) {
			return false, fmt.Errorf("migrate %s down: %w", schema, ErrNoChange)
		}
		return false, fmt.Errorf("migrate %s down: %w", schema, err)
	}
	_, _, err = m.Version()
	return errors.Is(err, migrate.ErrNilVersion), nil
}

// Version reports the schema's current migration version; 0 means none. It
// waits for a migration under way to end.
func Version(ctx context.Context, pool *pgxpool.Pool, schema string) (version uint, dirty bool, err error) {
	err = locked(ctx, pool, schema, func() error {
		return withMigrate(ctx, pool, schema, func(m *migrate.Migrate, _ string) error {
			version, dirty, err = m.Version()
			if errors.Is(err, migrate.ErrNilVersion) {
				return nil
			}
			return err
		})
	})
	return version, dirty, err
}

// lockTimeout bounds how long a migration that is one transaction waits
// for a table's lock (SET LOCAL lock_timeout). A migration that rewrites
// a table (catalog 0023) takes an ACCESS EXCLUSIVE lock, and while it
// waits for a long reader to finish (pg_dump, a list's snapshot), every
// other read and write of that table queues behind it. Past this, the
// migration rolls back, lets the queue through, and is tried again
// (retryLocks). A file that builds an index concurrently is left without
// it: that build waits for older transactions but blocks no one.
const lockTimeout = 3 * time.Second

// lockRetry spaces the tries of a migration that timed out on a lock, and
// lockRetryFor bounds them: a transaction that holds a table for longer
// (a pg_dump of a large database) makes Up fail, saying so, and the next
// start tries again.
var (
	lockRetry    = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 20 * time.Second}
	lockRetryFor = 2 * time.Minute
)

// errLockTimeout is a migration that gave up waiting for a table's lock
// (SQLSTATE 55P03); it rolled back, and the schema is as it was.
var errLockTimeout = errors.New("a migration waited longer than the lock timeout for a table another transaction holds")

// retryLocks runs f, a migration, again while it fails with
// errLockTimeout, spaced by lockRetry with jitter so that the replicas'
// migrators do not come back together, for at most lockRetryFor.
func retryLocks(ctx context.Context, schema string, f func() error) error {
	backoff := lockRetry
	deadline := time.Now().Add(lockRetryFor)
	for {
		err := f()
		if !errors.Is(err, errLockTimeout) {
			return err
		}
		pause := backoff.Step()
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("migrate %s: a long transaction (a pg_dump?) holds a table a migration changes, and it was tried for %s; run it again once that transaction ends: %w", schema, lockRetryFor, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(pause):
		}
	}
}

// lockSpace is the first key of the advisory lock a schema's migrators take
// turns with ("migr"); the second is the hash of the schema's name.
const lockSpace = 0x6d696772

// turnRetry spaces a migrator's tries for the lock while another migrates.
var turnRetry = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 2 * time.Second}

// locked runs f holding the schema's migration lock, from before the schema
// is created to after River's tables: the replicas of a fresh install start
// together, and CREATE SCHEMA IF NOT EXISTS, golang-migrate and River all
// fail when two run at once. The lock is tried, not waited for: a session
// waiting in pg_advisory_lock (as golang-migrate's own lock does) is a
// transaction that a concurrent index build (0016) waits for in turn, a
// deadlock PostgreSQL breaks by failing one of them, possibly the build.
func locked(ctx context.Context, pool *pgxpool.Pool, schema string, f func() error) error {
	// A connection of its own, so that the pool's, however few, remain
	// for the migrations.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// Given back before the close: PostgreSQL frees a closed session's
		// locks only once its backend has exited.
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, lockSpace, schema)
		_ = conn.Close(ctx)
	}()
	err = until(ctx, func() (ok bool, err error) {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, lockSpace, schema).Scan(&ok)
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("migrate %s: take the migration lock: %w", schema, err)
	}
	return f()
}

// until calls done, spaced by turnRetry, until it says true, fails, or ctx
// ends. It steps the backoff itself: wait.ExponentialBackoff would give up
// once the backoff reaches its cap, and a migration may take minutes.
func until(ctx context.Context, done func() (bool, error)) error {
	backoff := turnRetry
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(backoff.Step()):
		}
	}
}

// versions lists the schema's migrations in this binary, in order.
func versions(schema string) ([]uint, error) {
	entries, err := fs.Glob(files, sources[schema]+"/*.up.sql")
	if err != nil {
		return nil, err
	}
	var out []uint
	for _, e := range entries {
		var n uint
		if _, err := fmt.Sscanf(path.Base(e), "%d_", &n); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// position reads the schema's version (0: none) and whether it is dirty,
// and lists this binary's migrations.
func position(m *migrate.Migrate, schema string) (v uint, dirty bool, all []uint, err error) {
	v, dirty, err = m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		v, err = 0, nil
	}
	if err != nil {
		return 0, false, nil, fmt.Errorf("migrate %s: %w", schema, err)
	}
	all, err = versions(schema)
	return v, dirty, all, err
}

// ahead is ErrSchemaNewer when the schema's version is past the last
// migration of this binary.
func ahead(m *migrate.Migrate, schema string) error {
	v, _, all, err := position(m, schema)
	if err != nil {
		return err
	}
	if last := all[len(all)-1]; v > last {
		return fmt.Errorf("migrate %s: %w: it is at migration %d, this release's last is %d", schema, ErrSchemaNewer, v, last)
	}
	return nil
}

// resume readies a schema whose version is dirty. A file PostgreSQL runs
// in one transaction records its version in that transaction
// (atomicVersion), so only a file that cannot (one that builds or drops an
// index concurrently) leaves a dirty version, when it failed or its process
// died. Its migrator may still have a session running the file: those are
// ended first (they are the migrators' of this schema, which this one holds
// the lock of). Then the indexes it left invalid are dropped, and the
// version set where the file runs again (resumeAt).
func resume(ctx context.Context, pool *pgxpool.Pool, m *migrate.Migrate, schema, self string) error {
	v, dirty, all, err := position(m, schema)
	if err != nil || !dirty {
		return err
	}
	i := slices.Index(all, v)
	if i < 0 {
		return fmt.Errorf("migrate %s: dirty at migration %d, which this release does not have", schema, v)
	}
	to, err := resumeAt(schema, all, i)
	if err != nil {
		return err
	}
	if err := endMigrators(ctx, pool, schema, self); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND NOT i.indisvalid`, schema)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	invalid, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	for _, index := range invalid {
		if _, err := pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+index); err != nil {
			return fmt.Errorf("migrate %s: drop the invalid index %s: %w", schema, index, err)
		}
	}
	if err := m.Force(to); err != nil {
		return fmt.Errorf("migrate %s: resume migration %d: %w", schema, v, err)
	}
	return nil
}

// resumeAt is the version to force a schema dirty at all[i] to. golang-migrate
// marks dirty the version a file leads to: all[i] itself going up, the
// one before the next going down. Only a file that is not one transaction
// can have left it (atomicVersion), and such a file must be one statement
// that a second run completes (IF NOT EXISTS, IF EXISTS). So: the next
// file's down is such a file, and all[i] is kept (what that file left
// half-dropped is dropped, and its up builds it again); or all[i]'s up
// is, and it runs again from the version before. Any other dirty version
// was left by a release that marked every file so: it is not guessed at.
func resumeAt(schema string, all []uint, i int) (int, error) {
	if i+1 < len(all) {
		down, err := migrationFile(schema, all[i+1], "down")
		if err != nil {
			return 0, err
		}
		if !transactional(down) {
			return int(all[i]), nil
		}
	}
	up, err := migrationFile(schema, all[i], "up")
	if err != nil {
		return 0, err
	}
	if transactional(up) {
		return 0, fmt.Errorf("migrate %s: dirty at migration %d, which is one transaction: left by an earlier release, it may or may not have been applied; check the schema, then set the version in %s.schema_migrations by hand", schema, all[i], schema)
	}
	if i == 0 {
		return -1, nil // none
	}
	return int(all[i-1]), nil
}

// migrationFile is the schema's file of version v in direction dir (up,
// down).
func migrationFile(schema string, v uint, dir string) ([]byte, error) {
	names, err := fs.Glob(files, fmt.Sprintf("%s/%04d_*.%s.sql", sources[schema], v, dir))
	if err != nil || len(names) != 1 {
		return nil, fmt.Errorf("migrate %s: the %s file of migration %d: %d found, %v", schema, dir, v, len(names), err)
	}
	return files.ReadFile(names[0])
}

// transactional says whether PostgreSQL can run a migration file in one
// transaction: all but those that build or drop an index concurrently.
func transactional(body []byte) bool { return !bytes.Contains(body, []byte("INDEX CONCURRENTLY")) }

// endMigrators ends the sessions of other migrators of schema (named by
// their application_name; self is this one's) and waits for them to be
// gone. It is called with the schema's lock held, so they are what a
// migrator that died left running.
func endMigrators(ctx context.Context, pool *pgxpool.Pool, schema, self string) error {
	const others = `FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
		AND starts_with(application_name, $1) AND application_name <> $2`
	prefix := migratorName(schema, "")
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) `+others, prefix, self); err != nil {
		return fmt.Errorf("migrate %s: end a dead migrator's sessions: %w", schema, err)
	}
	err := until(ctx, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) `+others, prefix, self).Scan(&n)
		return n == 0, err
	})
	if err != nil {
		return fmt.Errorf("migrate %s: wait for a dead migrator's sessions to end: %w", schema, err)
	}
	return nil
}

// migratorName is the application_name of a migrator's sessions.
func migratorName(schema, id string) string { return "bindery migrate " + schema + " " + id }

// withMigrate creates the schema if needed (golang-migrate keeps its table
// in it) and runs f with a golang-migrate instance on it, closed after,
// and the application_name of its sessions (self). golang-migrate talks
// through connections of its own, not the pool's: when its lock fails it
// keeps a connection checked out for ever, which would make closing the
// pool hang.
func withMigrate(ctx context.Context, pool *pgxpool.Pool, schema string, f func(m *migrate.Migrate, self string) error) error {
	dir, ok := sources[schema]
	if !ok {
		return fmt.Errorf("unknown schema %q (have %v)", schema, Schemas())
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	src, err := iofs.New(files, dir)
	if err != nil {
		return err
	}
	cfg := pool.Config().ConnConfig // a copy
	self := migratorName(schema, rand.Text())
	cfg.RuntimeParams["application_name"] = self
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(2)
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: schema, MigrationsTable: "schema_migrations"})
	if err != nil {
		db.Close()
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", &atomicVersion{Driver: driver, table: table})
	if err != nil {
		db.Close()
		return err
	}
	defer m.Close()
	return f(m, self)
}

// atomicVersion records the version a migration file leads to in the
// file's own transaction, when PostgreSQL runs the file as one (a file of
// several statements sent at once is one implicit transaction): then the
// file and its version are committed, or neither is, whatever happens to
// the migrator. golang-migrate alone marks the version dirty before the
// file and clean after, in transactions of their own; it still does so for
// a file that cannot be one transaction (resume).
type atomicVersion struct {
	database.Driver
	table   string // the migrations table, quoted
	pending *int   // the version marked dirty before Run, not yet written
}

func (d *atomicVersion) SetVersion(version int, dirty bool) error {
	if dirty {
		d.pending = &version
		return nil
	}
	d.pending = nil
	return d.Driver.SetVersion(version, false)
}

func (d *atomicVersion) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	v := d.pending
	switch {
	case !transactional(body):
		if v == nil {
			break // not after a SetVersion: nothing to record
		}
		if err := d.Driver.SetVersion(*v, true); err != nil {
			return err
		}
	default:
		// On the file's first line, so that the lines PostgreSQL's errors
		// name stay the file's.
		body = slices.Concat(fmt.Appendf(nil, "SET LOCAL lock_timeout = %d; ", lockTimeout.Milliseconds()), body)
		if v == nil {
			break
		}
		body = append(body, "\n;\nDELETE FROM "+d.table+";\n"...)
		if *v >= 0 {
			body = fmt.Appendf(body, "INSERT INTO %s (version, dirty) VALUES (%d, false);\n", d.table, *v)
		}
	}
	return lockTimedOut(d.Driver.Run(bytes.NewReader(body)))
}

// lockTimedOut marks err with errLockTimeout when PostgreSQL ended the
// migration for its lock_timeout. golang-migrate's database.Error keeps
// the driver's error but does not unwrap to it.
func lockTimedOut(err error) error {
	var de database.Error
	var pe *pgconn.PgError
	if errors.As(err, &de) && errors.As(de.OrigErr, &pe) && pe.Code == pgerrcode.LockNotAvailable {
		return fmt.Errorf("%w: %w", errLockTimeout, err)
	}
	return err
}

func riverMigrate(ctx context.Context, pool *pgxpool.Pool, schema string, dir rivermigrate.Direction, opts *rivermigrate.MigrateOpts) error {
	mig, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, dir, opts); err != nil {
		return fmt.Errorf("river migrate %s %s: %w", schema, dir, err)
	}
	return nil
}
