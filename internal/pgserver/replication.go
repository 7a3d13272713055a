package pgserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Replication: a streaming standby of a server, its promotion, a crash,
// and a former primary that rejoins as a standby — the steps a manager of
// highly available PostgreSQL (CloudNativePG, Patroni) takes, for the
// tests of Bindery across a failover.

// ReplicationSettings are the settings of a server in a replicated
// cluster: one that can rejoin as a standby once another has replaced it
// (pg_rewind needs wal_log_hints, or data checksums, and full_page_writes,
// which Options.Fast turns off) and keeps the WAL a rejoining standby
// needs. Which standby a primary waits for is SetSynchronous's, kept in
// postgresql.auto.conf: a setting given at start could not be changed.
func ReplicationSettings() map[string]string {
	return map[string]string{"wal_log_hints": "on", "wal_keep_size": "256MB"}
}

// SetSynchronous makes the server wait, at each commit, until the standby
// named standby (an application_name) has the commit on disk; an empty
// name makes replication asynchronous again. It takes effect at once.
func (s *Server) SetSynchronous(ctx context.Context, standby string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+quoteLiteral(standby)); err != nil {
		return fmt.Errorf("set synchronous_standby_names: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload the configuration: %w", err)
	}
	return nil
}

// checkpoint makes the server write a checkpoint now.
func (s *Server) checkpoint(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Standby copies s into dir with pg_basebackup and starts the copy as a
// streaming standby of s named name (its application_name, which
// synchronous_standby_names on s matches). The copy has s's superuser and
// password.
func (s *Server) Standby(ctx context.Context, dir, name string, opts Options) (*Server, error) {
	st, err := s.follower(dir)
	if err != nil {
		return nil, err
	}
	if st.lock, err = st.acquire(ctx, roleServe); err != nil {
		return nil, err
	}
	out, err := st.runEnv(ctx, []string{"PGPASSWORD=" + s.pass}, filepath.Join(st.bin, "pg_basebackup"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", Superuser,
		"-D", st.dataDir, "-X", "stream", "-c", "fast", "-R")
	if err != nil {
		st.lock.release()
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := st.follow(s, name); err != nil {
		st.lock.release()
		return nil, err
	}
	if err := st.startLocked(ctx, opts); err != nil {
		return nil, err
	}
	return st, nil
}

// Rejoin makes the cluster in dir, a primary that primary has replaced,
// a standby of primary named name: pg_rewind takes back what it wrote
// after the two diverged (it needed wal_log_hints: ReplicationSettings),
// then it starts and follows primary. The cluster must be stopped.
func Rejoin(ctx context.Context, dir string, primary *Server, name string, opts Options) (*Server, error) {
	// pg_rewind reads the primary's timeline from its control file, which
	// a promoted server updates only at its next checkpoint: before it,
	// pg_rewind finds both on the same timeline and rewinds nothing.
	if err := primary.checkpoint(ctx); err != nil {
		return nil, err
	}
	st, err := primary.follower(dir)
	if err != nil {
		return nil, err
	}
	if st.lock, err = st.acquire(ctx, roleServe); err != nil {
		return nil, err
	}
	out, err := st.runEnv(ctx, []string{"PGPASSWORD=" + primary.pass}, filepath.Join(st.bin, "pg_rewind"),
		"-D", st.dataDir, "-R", "--source-server",
		fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres", primary.port, Superuser))
	if err != nil {
		st.lock.release()
		return nil, fmt.Errorf("pg_rewind: %w\n%s", err, out)
	}
	if err := st.follow(primary, name); err != nil {
		st.lock.release()
		return nil, err
	}
	if err := st.startLocked(ctx, opts); err != nil {
		return nil, err
	}
	return st, nil
}

// follower readies dir for a copy of s: s's superuser password kept there
// before prepare reads it.
func (s *Server) follower(dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "superuser.password"), []byte(s.pass+"\n"), 0o600); err != nil {
		return nil, err
	}
	return prepare(dir)
}

// follow makes the cluster a standby of primary named name: a
// standby.signal, and the connection to primary last in
// postgresql.auto.conf (what pg_basebackup and pg_rewind wrote there
// before it lacks the name).
func (s *Server) follow(primary *Server, name string) error {
	signal := filepath.Join(s.dataDir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	auto := filepath.Join(s.dataDir, "postgresql.auto.conf")
	f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "primary_conninfo = 'host=127.0.0.1 port=%d user=%s password=%s application_name=%s'\n",
		primary.port, Superuser, primary.pass, name)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return s.chown(signal)
}

// Promote ends a standby's recovery: it becomes a primary, on a new
// timeline, and returns once it accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	if out, err := s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("pg_ctl promote: %w\n%s", err, out)
	}
	return nil
}

// Crash stops the server as a crash of its machine would: at once,
// without a checkpoint (pg_ctl's immediate mode), leaving what it has not
// sent to a standby behind. The directory is released: Start or Rejoin
// may take it again.
func (s *Server) Crash(ctx context.Context) error {
	if s.lock == nil {
		return fmt.Errorf("the PostgreSQL of %s is run by another process", s.dir)
	}
	defer func() { s.lock.release(); s.lock = nil }()
	if out, err := s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	return nil
}

// Dir is the directory the server keeps its cluster in.
func (s *Server) Dir() string { return s.dir }
