// Package migrations holds the SQL migrations of every schema Bindery owns,
// embedded in the binary, and applies them with golang-migrate. Each schema
// has its own source and its own migrations table inside the schema, so
// components can be migrated (and reverted) independently.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
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
// and changes nothing when the schema is ahead of this binary.
func Up(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	m, done, err := open(ctx, pool, schema)
	if err != nil {
		return err
	}
	defer done()
	if err := ahead(m, schema); err != nil {
		return err
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate %s up: %w", schema, err)
	}
	if slices.Contains(withRiver, schema) {
		if err := riverMigrate(ctx, pool, schema, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{}); err != nil {
			return err
		}
	}
	return nil
}

// Down reverts the last applied migration of schema. When that was the
// schema's first migration, River's tables in it are removed as well.
func Down(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	m, done, err := open(ctx, pool, schema)
	if err != nil {
		return err
	}
	defer done()
	if err := m.Steps(-1); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, migrate.ErrNilVersion) {
			return fmt.Errorf("migrate %s down: %w", schema, ErrNoChange)
		}
		return fmt.Errorf("migrate %s down: %w", schema, err)
	}
	if _, _, err := m.Version(); errors.Is(err, migrate.ErrNilVersion) && slices.Contains(withRiver, schema) {
		return riverMigrate(ctx, pool, schema, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
	}
	return nil
}

// Version reports the schema's current migration version; 0 means none.
func Version(ctx context.Context, pool *pgxpool.Pool, schema string) (version uint, dirty bool, err error) {
	m, done, err := open(ctx, pool, schema)
	if err != nil {
		return 0, false, err
	}
	defer done()
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return v, dirty, err
}

// ahead is ErrSchemaNewer when the schema's version is past the last
// migration of this binary.
func ahead(m *migrate.Migrate, schema string) error {
	v, _, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", schema, err)
	}
	entries, err := fs.Glob(files, sources[schema]+"/*.up.sql")
	if err != nil {
		return err
	}
	var last uint
	for _, e := range entries {
		var n uint
		if _, err := fmt.Sscanf(path.Base(e), "%d_", &n); err == nil && n > last {
			last = n
		}
	}
	if v > last {
		return fmt.Errorf("migrate %s: %w: it is at migration %d, this release's last is %d", schema, ErrSchemaNewer, v, last)
	}
	return nil
}

func open(ctx context.Context, pool *pgxpool.Pool, schema string) (*migrate.Migrate, func(), error) {
	dir, ok := sources[schema]
	if !ok {
		return nil, nil, fmt.Errorf("unknown schema %q (have %v)", schema, Schemas())
	}
	// The migrations table lives inside the schema, so the schema must exist
	// before golang-migrate looks for it.
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	src, err := iofs.New(files, dir)
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: schema, MigrationsTable: "schema_migrations"})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrate %s: %w", schema, err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return m, func() { _, _ = m.Close() }, nil
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
