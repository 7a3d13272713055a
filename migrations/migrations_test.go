package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestUpDownUp applies every schema's migrations, reverts them one step at
// a time down to nothing, and applies them again: every down migration runs
// and leaves a schema that the up migrations accept.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	for _, schema := range Schemas() {
		t.Run(schema, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.Pool(t)
			if err := Up(ctx, pool, schema); err != nil {
				t.Fatal(err)
			}
			top, dirty, err := Version(ctx, pool, schema)
			if err != nil || dirty || top == 0 {
				t.Fatalf("version after up: %d dirty=%v err=%v", top, dirty, err)
			}
			// One step per migration: the numbers may have gaps (one
			// taken by work not merged yet).
			ups, err := fs.Glob(files, schema+"/*.up.sql")
			if err != nil || len(ups) == 0 {
				t.Fatalf("%s's up migrations: %v", schema, err)
			}
			for range ups {
				if err := Down(ctx, pool, schema); err != nil {
					t.Fatal(err)
				}
			}
			if err := Down(ctx, pool, schema); !errors.Is(err, ErrNoChange) {
				t.Fatalf("down past the first migration: %v, want ErrNoChange", err)
			}
			var tables int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_migrations'`, schema).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Fatalf("%d tables left in %s after reverting every migration", tables, schema)
			}
			if err := Up(ctx, pool, schema); err != nil {
				t.Fatalf("up again: %v", err)
			}
			if v, _, _ := Version(ctx, pool, schema); v != top {
				t.Fatalf("version after up again: %d, want %d", v, top)
			}
		})
	}
}

// TestPendingReferencesDown: reverting 0010 deletes the bindings that wait
// for an instance (the older schema cannot hold them) and keeps the others.
func TestPendingReferencesDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	// Down to 0010, whatever came after it.
	for {
		v, _, err := Version(ctx, pool, Catalog)
		if err != nil {
			t.Fatal(err)
		}
		if v <= 10 {
			break
		}
		if err := Down(ctx, pool, Catalog); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO catalog.instances (id, namespace, name, spec, resource_version) VALUES ('00000000-0000-0000-0000-000000000001', 'team', 'db', '{}', 1);
		INSERT INTO catalog.bindings (id, namespace, name, instance_id, spec, resource_version) VALUES
			('00000000-0000-0000-0000-000000000002', 'team', 'app', '00000000-0000-0000-0000-000000000001', '{"instanceRef":{"name":"db"}}', 1),
			('00000000-0000-0000-0000-000000000003', 'team', 'waiting', NULL, '{"instanceRef":{"name":"later"}}', 1)`); err != nil {
		t.Fatal(err)
	}
	if err := Down(ctx, pool, Catalog); err != nil {
		t.Fatalf("down with a binding waiting for its instance: %v", err)
	}
	var names []string
	rows, _ := pool.Query(ctx, `SELECT name FROM catalog.bindings ORDER BY name`)
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	if len(names) != 1 || names[0] != "app" {
		t.Errorf("bindings left: %v, want [app]", names)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO catalog.bindings (id, namespace, name, spec, resource_version)
		VALUES ('00000000-0000-0000-0000-000000000004', 'team', 'x', '{}', 1)`); err == nil {
		t.Error("a binding without an instance is accepted after the down migration")
	}
	if v, dirty, _ := Version(ctx, pool, Catalog); v != 9 || dirty {
		t.Errorf("version %d dirty %v, want 9", v, dirty)
	}
}

// TestUpOnNewerSchema: on a schema a newer release migrated past this
// binary's last migration, Up changes nothing and says so with
// ErrSchemaNewer (golang-migrate alone fails on the unknown version, and
// the previous release could not restart during a rolling update).
func TestUpOnNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, schema := range Schemas() {
		if err := Up(ctx, pool, schema); err != nil {
			t.Fatal(err)
		}
		top, _, _ := Version(ctx, pool, schema)
		if _, err := pool.Exec(ctx, `UPDATE `+schema+`.schema_migrations SET version = $1`, top+1); err != nil {
			t.Fatal(err)
		}
		err := Up(ctx, pool, schema)
		if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), fmt.Sprintf("at migration %d, this release's last is %d", top+1, top)) {
			t.Errorf("%s: Up on a newer schema: %v, want ErrSchemaNewer naming both versions", schema, err)
		}
		if v, dirty, _ := Version(ctx, pool, schema); v != top+1 || dirty {
			t.Errorf("%s: Up on a newer schema left version %d dirty=%v, want %d", schema, v, dirty, top+1)
		}
	}
}

// TestConcurrentUp starts four migrators at once on an empty database, as
// the replicas of a fresh install do, each with its own pool of one
// connection, three times. Each must succeed, and let its pool close. Before they were serialized
// from the first statement, one lost the race to create the schema, others
// died in a deadlock between golang-migrate's waiting lock and the
// concurrent index build of 0016 (which could as well have failed the
// build and left the schema dirty), and a lock that failed left a
// connection checked out of the pool for ever, so that closing the pool
// hung.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		url := pgtest.New(t)
		errs := make(chan error, 4)
		for k := range 4 {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cfg, err := pgxpool.ParseConfig(url)
				if err != nil {
					errs <- err
					return
				}
				cfg.MaxConns = 1 // the migrations need no more
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					errs <- err
					return
				}
				for _, schema := range Schemas() {
					if err = Up(ctx, pool, schema); err != nil {
						break
					}
				}
				closed := make(chan struct{})
				go func() { pool.Close(); close(closed) }()
				select {
				case <-closed:
				case <-ctx.Done():
					err = errors.Join(err, errors.New("the pool does not close: a connection is still checked out"))
				}
				if err != nil {
					err = fmt.Errorf("round %d, migrator %d: %w", round, k, err)
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
}

// TestUpResumesAfterACrash: a migrator killed in the middle of a file
// leaves its version dirty (golang-migrate marks it so before it runs the
// file). Up runs that file again instead of refusing to start for ever:
// a file that is one transaction left nothing, and a file that builds an
// index concurrently (0016) may have left the index invalid, which is
// dropped and built again.
func TestUpResumesAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	top, _, _ := Version(ctx, pool, Catalog)
	setDirty := func(v uint) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE catalog.schema_migrations SET version = $1, dirty = true`, v); err != nil {
			t.Fatal(err)
		}
	}
	// The last file, killed before it committed: the schema is the one
	// before it.
	if err := Down(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	setDirty(top)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatalf("Up on a schema left dirty at %d: %v", top, err)
	}
	if v, dirty, _ := Version(ctx, pool, Catalog); v != top || dirty {
		t.Fatalf("after Up: version %d dirty=%v, want %d clean", v, dirty, top)
	}

	// 0016, killed while it built its index: the index is there, invalid.
	for {
		v, _, err := Version(ctx, pool, Catalog)
		if err != nil {
			t.Fatal(err)
		}
		if v <= 16 {
			break
		}
		if err := Down(ctx, pool, Catalog); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'catalog.instances_namespace_plan_idx'::regclass`); err != nil {
		t.Fatal(err)
	}
	setDirty(16)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatalf("Up on a schema left dirty at 16: %v", err)
	}
	var valid bool
	if err := pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'catalog.instances_namespace_plan_idx'::regclass`).Scan(&valid); err != nil || !valid {
		t.Errorf("the index 0016 builds after Up: valid=%v, %v; want valid", valid, err)
	}
	if v, dirty, _ := Version(ctx, pool, Catalog); v != top || dirty {
		t.Errorf("after Up: version %d dirty=%v, want %d clean", v, dirty, top)
	}
}
