package pgserver

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

	// EnsureDatabase creates a database once; asking again finds it.
	for i := range 2 {
		u, err := s2.EnsureDatabase(ctx, "app-db")
		if err != nil {
			t.Fatalf("EnsureDatabase #%d: %v", i+1, err)
		}
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatalf("connect to the ensured database: %v", err)
		}
		var name string
		err = c.QueryRow(ctx, "SELECT current_database()").Scan(&name)
		c.Close(ctx)
		if err != nil || name != "app-db" {
			t.Fatalf("current_database() = %q, %v; want app-db", name, err)
		}
	}
}

// tempBase makes a directory the postgres user can traverse.
func tempBase(t *testing.T) string {
	t.Helper()
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
	return base
}

// TestCrashKeepsPort: a process killed while its server runs leaves the
// server behind; the next Start must take that server over on the same
// port (issued credentials name it), not move to a new one.
func TestCrashKeepsPort(t *testing.T) {
	dir := filepath.Join(tempBase(t), "pg")
	ctx := context.Background()
	first, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	// No Stop: the server keeps running, as after kill -9 of its owner.
	for i := 0; i < 2; i++ {
		s, err := Start(ctx, dir, Options{Fast: true})
		if err != nil {
			t.Fatalf("start %d after a crash: %v", i+2, err)
		}
		if s.Port() != first.Port() {
			t.Fatalf("start %d after a crash: port %d, want %d", i+2, s.Port(), first.Port())
		}
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestPortTakenIsRefused: when another program holds the port a data
// directory's credentials name, Start says so instead of moving.
func TestPortTakenIsRefused(t *testing.T) {
	dir := filepath.Join(tempBase(t), "pg")
	ctx := context.Background()
	s, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	port := s.Port()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s2, err := Start(ctx, dir, Options{Fast: true})
	if err == nil {
		s2.Stop()
		t.Fatalf("started on port %d although %d is taken", s2.Port(), port)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("error does not name the taken port: %v", err)
	}
}

// TestFileModes: the log holds failed statements with their values and the
// password file a superuser password; neither is readable by others.
func TestFileModes(t *testing.T) {
	dir := filepath.Join(tempBase(t), "pg")
	s, err := Start(context.Background(), dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for name, want := range map[string]os.FileMode{"postgres.log": 0o600, "superuser.password": 0o600, ".": 0o700} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
}

// TestListenAndAllow: with Listen and Allow, the server accepts password
// connections on another address from another client range; started again
// without them, it neither listens there nor lets that range in.
func TestListenAndAllow(t *testing.T) {
	dir := filepath.Join(tempBase(t), "pg")
	ctx := context.Background()
	// 127.0.0.2 is on the loopback link too, but neither the default
	// listen address nor pg_hba.conf's loopback lines (127.0.0.1/32) cover it.
	other := netip.MustParseAddr("127.0.0.2")
	connect := func(s *Server) error {
		cfg, err := pgx.ParseConfig(s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Host = other.String()
		// From 127.0.0.2, so that pg_hba.conf sees that client address.
		cfg.DialFunc = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: other.AsSlice()}}).DialContext
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
	s, err := Start(ctx, dir, Options{Fast: true, Listen: []netip.Addr{other}, Allow: []netip.Prefix{netip.PrefixFrom(other, 32)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := connect(s); err != nil {
		t.Fatalf("connect on %s from %s: %v", other, other, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// Listening there without letting that range in: refused by pg_hba.conf.
	s, err = Start(ctx, dir, Options{Fast: true, Listen: []netip.Addr{other}})
	if err != nil {
		t.Fatal(err)
	}
	if err := connect(s); err == nil || !strings.Contains(err.Error(), "pg_hba.conf") {
		t.Errorf("connect from %s once no longer allowed: %v, want a pg_hba.conf refusal", other, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s, err = Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := connect(s); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Errorf("connect on %s without Listen: %v, want no listener", other, err)
	}
}
