package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	catalogDownTo(t, pool, 10)
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
// connection, three times. Each must succeed, and let its pool close.
// Before they were serialized from the first statement, one lost the race
// to create the schema, others died in a deadlock between golang-migrate's
// waiting lock and the concurrent index build of 0016 (which could as well
// have failed the build and left the schema dirty), and a lock that failed
// left a connection checked out of the pool for ever, so that closing the
// pool hung.
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

// TestUpResumesAfterACrash: a migration file that cannot be one
// transaction (0016 builds an index concurrently) leaves its version dirty
// when its migrator dies in it, and the index invalid. Up runs it again
// instead of refusing to start for ever, going up (dirty at 16) as going
// down (dirty at 15). A dirty version whose file is one transaction was
// left by an earlier release and is refused, not guessed at.
func TestUpResumesAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	top, _, _ := Version(ctx, pool, Catalog)
	downTo := func(v uint) { catalogDownTo(t, pool, v) }
	setDirty := func(v uint) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE catalog.schema_migrations SET version = $1, dirty = true`, v); err != nil {
			t.Fatal(err)
		}
	}
	const index = `'catalog.instances_namespace_plan_idx'::regclass`
	invalidate := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = `+index); err != nil {
			t.Fatal(err)
		}
	}
	upAgain := func(what string) {
		t.Helper()
		if err := Up(ctx, pool, Catalog); err != nil {
			t.Fatalf("Up on a schema left dirty %s: %v", what, err)
		}
		var valid bool
		if err := pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = `+index).Scan(&valid); err != nil || !valid {
			t.Errorf("the index 0016 builds, after Up on a schema left dirty %s: valid=%v, %v; want valid", what, valid, err)
		}
		if v, dirty, _ := Version(ctx, pool, Catalog); v != top || dirty {
			t.Errorf("after Up on a schema left dirty %s: version %d dirty=%v, want %d clean", what, v, dirty, top)
		}
	}

	// 0016 going up, killed while it built its index; the dead
	// migrator's session is still there.
	downTo(16)
	invalidate()
	setDirty(16)
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = migratorName(Catalog, "dead")
	dead, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close(ctx)
	upAgain("at 16 going up")
	if err := dead.Ping(ctx); err == nil {
		t.Error("the dead migrator's session still runs after Up")
	}

	// 0016 going down, killed while it dropped its index.
	downTo(16)
	invalidate()
	setDirty(15)
	upAgain("at 15 going down")

	// A file of one transaction, dirty: only an earlier release left that.
	downTo(top - 1)
	setDirty(top)
	if err := Up(ctx, pool, Catalog); err == nil || !strings.Contains(err.Error(), "left by an earlier release") {
		t.Errorf("Up on a schema left dirty at %d, a file of one transaction: %v, want it refused as left by an earlier release", top, err)
	}
}

// catalogDownTo migrates the catalog schema down to version v.
func catalogDownTo(t *testing.T, pool *pgxpool.Pool, v uint) {
	t.Helper()
	for {
		at, _, err := Version(context.Background(), pool, Catalog)
		if err != nil {
			t.Fatal(err)
		}
		if at <= v {
			return
		}
		if err := Down(context.Background(), pool, Catalog); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailedFileLeavesNoDirtyVersion: a file of one transaction that fails
// half-way leaves nothing, and its version with it: the schema is at the
// version before, clean, and the next Up runs the file again. golang-migrate
// alone left it dirty, and every later start refused.
func TestFailedFileLeavesNoDirtyVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	catalogDownTo(t, pool, 22) // before 0023
	before, _, _ := Version(ctx, pool, Catalog)
	// 0023 adds metadata_text to five tables; the last one already has it.
	if _, err := pool.Exec(ctx, `ALTER TABLE catalog.bindings ADD COLUMN metadata_text text`); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, pool, Catalog); err == nil {
		t.Fatal("Up with a column in the way succeeded")
	}
	if v, dirty, err := Version(ctx, pool, Catalog); v != before || dirty || err != nil {
		t.Fatalf("after a failed file: version %d dirty=%v (%v), want %d clean", v, dirty, err, before)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'catalog' AND table_name = 'instances' AND column_name = 'metadata_text'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the failed file's first changes stayed: %d, %v", n, err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE catalog.bindings DROP COLUMN metadata_text`); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatalf("Up once the column is gone: %v", err)
	}
}

// TestUpWaitsForALongMigration: a migrator waits for another's lock as
// long as it takes, not a fixed number of tries (the tries reach their
// longest spacing after about 4 s).
func TestUpWaitsForALongMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, lockSpace, Catalog); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Up(ctx, pool, Catalog) }()
	select {
	case err := <-done:
		t.Fatalf("Up while another holds the lock: %v, want it to wait", err)
	case <-time.After(6 * time.Second):
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, lockSpace, Catalog); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Up once the lock is free: %v", err)
	}
}

// TestQuietCatalogueVersion: from 0026 the catalogue's version moves for a
// statement on the classes or plans that wrote rows (a TRUNCATE too), not
// for one that matched none, and from 0027 not for an update of their
// position or broker's document (osb) alone; reverting 0027 moves it for
// those again, and reverting 0026 brings back 0012's triggers, which move
// it for every statement.
func TestQuietCatalogueVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		t.Helper()
		var v int64
		if err := pool.QueryRow(ctx, `SELECT value FROM catalog.catalogue_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	const broker, class = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
	steps := []struct {
		name  string
		sql   string
		moves bool
	}{
		{"a broker written", `INSERT INTO catalog.brokers (id, name, spec, resource_version) VALUES ('` + broker + `', 'b', '{}', 1)`, false},
		{"a class inserted", `INSERT INTO catalog.service_classes (id, broker_id, name, external_id, external_name, position, spec, osb, resource_version)
			VALUES ('` + class + `', '` + broker + `', 'c', 'c', 'c', 0, '{}', '{}', 1)`, true},
		{"an update of no class", `UPDATE catalog.service_classes SET position = 1 WHERE id = '` + class + `' AND position = 1`, false},
		{"an update of no plan", `UPDATE catalog.service_plans SET position = 1 WHERE broker_id = '` + broker + `'`, false},
		{"a deletion of no plan", `DELETE FROM catalog.service_plans WHERE broker_id = '` + broker + `'`, false},
		{"an insertion of no plan", `INSERT INTO catalog.service_plans (id) SELECT id FROM catalog.service_plans WHERE false`, false},
		{"a class's position alone updated", `UPDATE catalog.service_classes SET position = 1 WHERE id = '` + class + `'`, false},
		{"a class's position and document alone updated", `UPDATE catalog.service_classes SET position = 2, osb = '{"id": "c"}'`, false},
		{"a class updated", `UPDATE catalog.service_classes SET spec = '{"description": "d"}' WHERE id = '` + class + `'`, true},
		{"a class updated with its position", `UPDATE catalog.service_classes SET position = 3, external_name = 'd'`, true},
		{"a class updated twice in a transaction", `UPDATE catalog.service_classes SET removed = true; UPDATE catalog.service_classes SET removed = false`, true},
		{"its broker deleted, the class with it", `DELETE FROM catalog.brokers WHERE id = '` + broker + `'`, true},
		{"the plans truncated", `TRUNCATE catalog.service_plans CASCADE`, true},
	}
	for _, step := range steps {
		before := version()
		if _, err := pool.Exec(ctx, step.sql); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := version()
		if moved := after != before; moved != step.moves || after > before+1 {
			t.Errorf("%s: the catalogue's version went from %d to %d, want moved=%v (by one)", step.name, before, after, step.moves)
		}
	}
	catalogDownTo(t, pool, 26)
	if _, err := pool.Exec(ctx, steps[0].sql+"; "+steps[1].sql); err != nil {
		t.Fatal(err)
	}
	before := version()
	if _, err := pool.Exec(ctx, `UPDATE catalog.service_classes SET position = 4`); err != nil {
		t.Fatal(err)
	}
	if after := version(); after != before+1 {
		t.Errorf("after reverting 0027, an update of a class's position took the version from %d to %d, want 0026's step", before, after)
	}
	catalogDownTo(t, pool, 25)
	before = version()
	if _, err := pool.Exec(ctx, `UPDATE catalog.service_classes SET position = 1 WHERE false`); err != nil {
		t.Fatal(err)
	}
	if after := version(); after != before+1 {
		t.Errorf("after reverting 0026, an update of no class took the version from %d to %d, want 0012's step", before, after)
	}
}

// TestUpDoesNotQueueReadersBehindALongTransaction: catalog 0023 rewrites
// catalog.instances under an ACCESS EXCLUSIVE lock. With a transaction
// open that has read the table (pg_dump, a list's snapshot), the ALTER
// waited for it, and every other read of the table queued behind the
// ALTER for as long. Now the migration gives up its locks after
// lockTimeout and tries again later, so other readers wait at most about
// that long, and Up finishes once the long transaction ends, leaving the
// schema clean at its last version.
func TestUpDoesNotQueueReadersBehindALongTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	top, _, _ := Version(ctx, pool, Catalog)
	catalogDownTo(t, pool, 22) // before 0023
	long, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Rollback(ctx) }()
	if _, err := long.Exec(ctx, `SELECT count(*) FROM catalog.instances`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Up(ctx, pool, Catalog) }()

	// Read the table as the servers do, while the long transaction stays
	// open for a few lock timeouts.
	slowest := slowestRead(t, pool, 3*lockTimeout)
	select {
	case err := <-done:
		t.Fatalf("Up while a transaction holds catalog.instances: %v, want it to wait", err)
	default:
	}
	if err := long.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if limit := lockTimeout + time.Second; slowest > limit {
		t.Errorf("a read of catalog.instances waited %s behind the migration, want at most about the lock timeout (%s)", slowest.Round(time.Millisecond), lockTimeout)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Up once the long transaction ended: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Up did not finish within a minute of the long transaction's end")
	}
	if v, dirty, err := Version(ctx, pool, Catalog); v != top || dirty || err != nil {
		t.Errorf("after Up: version %d dirty=%v (%v), want %d clean", v, dirty, err, top)
	}
}

// slowestRead reads catalog.instances every 100ms for d and returns the
// longest a read took; a read still waiting after d counts as d and more.
func slowestRead(t *testing.T, pool *pgxpool.Pool, d time.Duration) time.Duration {
	t.Helper()
	var slowest time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		began := time.Now()
		_, err := pool.Exec(ctx, `SELECT count(*) FROM catalog.instances`)
		took := time.Since(began)
		cancel()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("read catalog.instances: %v", err)
		}
		slowest = max(slowest, took)
	}
	return slowest
}

// TestDownResumesAfterACrash: `migrate down` on a schema a migrator left
// dirty (0016, which cannot be one transaction, interrupted) reverts the
// interrupted step, as Up resumes it, instead of golang-migrate's "Dirty
// database version 16. Fix and force version.", which Bindery gave no way
// to act on. Interrupted going up, before or after its index was built,
// 0016 is reverted; interrupted going down, its revert is finished.
func TestDownResumesAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if err := Up(ctx, pool, Catalog); err != nil {
		t.Fatal(err)
	}
	const index = `'catalog.instances_namespace_plan_idx'::regclass`
	cases := []struct {
		name    string
		invalid bool // the index was left half-built (or half-dropped)
		dirty   uint
	}{
		{"going up, the index half-built", true, 16},
		{"going up, the index built", false, 16},
		{"going down, the index half-dropped", true, 15},
	}
	for _, c := range cases {
		if err := Up(ctx, pool, Catalog); err != nil {
			t.Fatal(err)
		}
		catalogDownTo(t, pool, 16)
		if c.invalid {
			if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = `+index); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `UPDATE catalog.schema_migrations SET version = $1, dirty = true`, c.dirty); err != nil {
			t.Fatal(err)
		}
		if err := Down(ctx, pool, Catalog); err != nil {
			t.Errorf("%s: Down on a schema left dirty at %d: %v", c.name, c.dirty, err)
			continue
		}
		if v, dirty, err := Version(ctx, pool, Catalog); v != 15 || dirty || err != nil {
			t.Errorf("%s: after Down: version %d dirty=%v (%v), want 15 clean", c.name, v, dirty, err)
		}
		var left bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass('catalog.instances_namespace_plan_idx') IS NOT NULL`).Scan(&left); err != nil || left {
			t.Errorf("%s: after Down, 0016's index is still there (%v)", c.name, err)
		}
	}
}
