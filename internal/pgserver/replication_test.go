package pgserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/eventually"
)

// TestStandbyPromoteRejoin takes a cluster through a failover: a
// synchronous standby has every committed write, the primary crashes, the
// standby is promoted onto a new timeline, and the old primary, which came
// back as a primary and wrote on its own, rejoins as the new primary's
// standby with pg_rewind and follows it.
func TestStandbyPromoteRejoin(t *testing.T) {
	if os.Getenv("DATABASE_URL") != "" {
		t.Skip("DATABASE_URL is set: the private server is not used")
	}
	t.Parallel()
	ctx := context.Background()
	base, err := os.MkdirTemp("", "pgserver-replication-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Settings: ReplicationSettings()}
	a, err := Start(ctx, filepath.Join(base, "a"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	b, err := a.Standby(ctx, filepath.Join(base, "b"), "b", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	if err := a.SetSynchronous(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)")
	if got := query(t, a, "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'b'"); got != "sync" {
		t.Fatalf("standby b is %q, want sync", got)
	}
	// The commit waited for b to have it on disk, not to have replayed it.
	replayed(t, b, "SELECT pg_is_in_recovery()::text || ' ' || count(*) FROM kept", "true 1")

	if err := a.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetSynchronous(ctx, ""); err != nil {
		t.Fatal(err)
	}
	mustExec(t, b, "INSERT INTO kept VALUES (2)")
	// The old primary comes back as a primary, and diverges.
	rogue, err := Start(ctx, a.Dir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rogue.SetSynchronous(ctx, ""); err != nil {
		t.Fatal(err)
	}
	mustExec(t, rogue, "INSERT INTO kept VALUES (-1)")
	if err := rogue.Stop(); err != nil {
		t.Fatal(err)
	}
	a2, err := Rejoin(ctx, a.Dir(), b, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a2.Stop() })
	if err := b.SetSynchronous(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		if got := query(t, b, "SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE application_name = 'a'), 'none')"); got != "sync" {
			return fmt.Errorf("rejoined a is %q, want sync", got)
		}
		return nil
	})
	mustExec(t, b, "INSERT INTO kept VALUES (3)")
	replayed(t, a2, "SELECT pg_is_in_recovery()::text || ' ' || string_agg(v::text, ',' ORDER BY v) FROM kept", "true 1,2,3")
}

// replayed waits until the standby s answers sql with want: a synchronous
// commit waits for the standby to flush it (synchronous_commit = on), and
// the standby replays it a moment later.
func replayed(t *testing.T, s *Server, sql, want string) {
	t.Helper()
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var got string
		if err := conn.QueryRow(ctx, sql).Scan(&got); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		if got != want {
			return fmt.Errorf("standby answers %q, want %q", got, want)
		}
		return nil
	})
}

func mustExec(t *testing.T, s *Server, statements ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range statements {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func query(t *testing.T, s *Server, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}
