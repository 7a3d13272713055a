package catalog_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// TestStatusWriteScansNoTable: a status write finds its row by its key,
// also once the prepared statement's generic plan is in use (after five
// executions on a connection): a plan that scanned the table, made while
// the table was small and kept as it grew, had every write read every row.
func TestStatusWriteScansNoTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, s := oneConnStore(t)
	var last *catalog.Instance
	var err error
	for _, name := range []string{"a", "b", "c", "d"} {
		if last, err = s.CreateInstance(ctx, newInstance(name, catalog.InstanceSpec{ClusterServiceClassExternalName: "solo"})); err != nil {
			t.Fatal(err)
		}
	}
	seqScans := func() int64 { return instanceSeqScans(t, pool) }
	before := seqScans()
	for i := range 10 {
		if last, err = s.UpdateInstanceStatus(ctx, last.ID, func(in *catalog.Instance) error {
			in.Status.LastError = string(rune('a' + i))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := seqScans() - before; n != 0 {
		t.Errorf("10 status writes scanned the instances table %d times", n)
	}
}

// oneConnStore is a store over a migrated catalog with a pool of one
// connection: one prepared statement per query, and one plan, which the
// plan tests watch.
func oneConnStore(t *testing.T) (*pgxpool.Pool, *catalog.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, _ := keyring.Parse(keyring.Generate())
	return pool, catalog.NewStore(pool, keys, nil)
}

// instanceSeqScans is how many sequential scans of catalog.instances
// PostgreSQL has counted, its statistics flushed first.
func instanceSeqScans(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'catalog.instances'::regclass`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
