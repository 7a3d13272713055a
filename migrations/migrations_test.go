package migrations

import (
	"context"
	"errors"
	"testing"

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
			pool, err := pgxpool.New(ctx, pgtest.New(t))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if err := Up(ctx, pool, schema); err != nil {
				t.Fatal(err)
			}
			top, dirty, err := Version(ctx, pool, schema)
			if err != nil || dirty || top == 0 {
				t.Fatalf("version after up: %d dirty=%v err=%v", top, dirty, err)
			}
			for range top {
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
