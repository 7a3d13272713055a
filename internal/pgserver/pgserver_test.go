package pgserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestRestartKeepsDataAndPassword starts a cluster, writes to it, stops it
// and starts it again from the same directory, as `bindery up` does.
func TestRestartKeepsDataAndPassword(t *testing.T) {
	if os.Getenv("DATABASE_URL") != "" {
		t.Skip("DATABASE_URL is set: the private server is not used")
	}
	base, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "pg")
	ctx := context.Background()
	s, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	s2, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	if s2.Port() != s.Port() {
		t.Errorf("port after restart: %d, want %d (credentials name it)", s2.Port(), s.Port())
	}
	conn, err = pgx.Connect(ctx, s2.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: v=%d err=%v", v, err)
	}
	// Password authentication is real: a wrong password is refused.
	bad := s2.URL("postgres")
	cfg, _ := pgx.ParseConfig(bad)
	cfg.Password = "wrong"
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		c.Close(ctx)
		t.Fatal("connected with a wrong password")
	}
}
