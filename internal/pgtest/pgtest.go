// Package pgtest gives each test its own database on a real PostgreSQL:
// DATABASE_URL when it is set, otherwise a private server that Main starts
// from the system's binaries and stops when the package's tests end.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/internal/pgserver"
)

var adminURL string

// Main runs a package's tests with a PostgreSQL server available. Call it
// from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		adminURL = u
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "bindery-pgtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	// BINDERY_PGTEST_DURABLE=1 keeps fsync and synchronous_commit on, for
	// benchmarks that measure writes as a production server makes them.
	durable := os.Getenv("BINDERY_PGTEST_DURABLE") == "1"
	srv, err := pgserver.Start(ctx, dir, pgserver.Options{Fast: !durable, MaxConnections: 400})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	defer srv.Stop()
	adminURL = srv.URL("postgres")
	return m.Run()
}

// AdminURL is the URL of the server's administrative database, for tests
// that need to look at the whole cluster (roles, databases).
func AdminURL(t testing.TB) string {
	t.Helper()
	if adminURL == "" {
		t.Fatal("pgtest: no server: call pgtest.Main from TestMain")
	}
	return adminURL
}

// New creates an empty database for this test, dropped when the test ends,
// and returns its URL.
func New(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	name := "t_" + hex.EncodeToString(raw)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return WithDatabase(t, admin, name)
}

// WithDatabase returns u pointing at database name.
func WithDatabase(t testing.TB, u, name string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: parse url: %v", err)
	}
	parsed.Path = "/" + name
	return parsed.String()
}

// Pool opens a connection pool on a new database for this test (New),
// closed when the test ends. It allows 20 connections: pgx's default (the
// CPUs, 4 at least) is too few for tests that run servers and an engine on
// one pool.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(New(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
