package pgserver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	// No Stop: the server keeps running, as after kill -9 of its owner,
	// whose lock on the directory dies with it.
	crash := func(s *Server) { s.lock.release() }
	crash(first)
	for i := 0; i < 2; i++ {
		s, err := Start(ctx, dir, Options{Fast: true})
		if err != nil {
			t.Fatalf("start %d after a crash: %v", i+2, err)
		}
		crash(s)
		if s.Port() != first.Port() {
			t.Fatalf("start %d after a crash: port %d, want %d", i+2, s.Port(), first.Port())
		}
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
	}
	last, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := last.Stop(); err != nil {
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

// TestUse: a command that needs the database for a moment adopts the
// server a Start runs (and leaves it running), or runs the server itself
// and stops it afterwards; it waits for another such command, and a second
// Start is refused while one runs.
func TestUse(t *testing.T) {
	base := tempBase(t)
	ctx := context.Background()
	if _, err := Use(ctx, filepath.Join(base, "none"), Options{Fast: true}); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("Use of a directory without a cluster: %v, want ErrNoCluster", err)
	}
	dir := filepath.Join(base, "pg")
	s, err := Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	mustQuery(t, s.URL("postgres"), "CREATE TABLE kept (v int)")
	port := s.Port()

	// Adopted while Start runs the server: Stop leaves it running.
	u, err := Use(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if !u.Adopted() || u.Port() != port || u.URL("postgres") != s.URL("postgres") {
		t.Fatalf("Use while served: adopted=%v port=%d, want adopted on %d", u.Adopted(), u.Port(), port)
	}
	mustQuery(t, u.URL("postgres"), "INSERT INTO kept VALUES (1)")
	if err := u.Stop(); err != nil {
		t.Fatal(err)
	}
	mustQuery(t, s.URL("postgres"), "INSERT INTO kept VALUES (2)")
	if s2, err := Start(ctx, dir, Options{Fast: true}); err == nil || !strings.Contains(err.Error(), "is run by process") {
		if s2 != nil {
			s2.Stop()
		}
		t.Fatalf("a second Start while one serves: %v, want a refusal naming the process", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	// Nobody runs it: Use starts it on the same port and stops it.
	u, err = Use(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if u.Adopted() || u.Port() != port {
		t.Fatalf("Use of a stopped cluster: adopted=%v port=%d, want its own server on %d", u.Adopted(), u.Port(), port)
	}
	mustQuery(t, u.URL("postgres"), "INSERT INTO kept VALUES (3)")
	// Another Use and a Start wait for it, then run the server themselves.
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		released <- time.Now()
		_ = u.Stop()
	}()
	u2, err := Use(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if at := <-released; u2.Adopted() || time.Now().Before(at) {
		t.Fatalf("second Use: adopted=%v; it must wait for the first and run its own server", u2.Adopted())
	}
	if err := u2.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server Use started still runs after Stop: %v", err)
	}
	s, err = Start(ctx, dir, Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var n int
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows written through every server: %d (%v), want 3", n, err)
	}
}

func mustQuery(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
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
