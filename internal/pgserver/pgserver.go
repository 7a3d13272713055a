// Package pgserver runs a private PostgreSQL server from the system's own
// binaries (initdb, pg_ctl). It is what `bindery up` and the tests use when
// DATABASE_URL is not set: no download, no library-bundled PostgreSQL.
package pgserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Superuser is the name of the superuser initdb creates.
const Superuser = "bindery"

// Options tune a server. The zero value is a durable server.
type Options struct {
	// Fast turns fsync, synchronous_commit and full_page_writes off: for tests,
	// where a crash of the machine may lose data.
	Fast bool
	// MaxConnections overrides max_connections (default 200).
	MaxConnections int
	// Listen lists addresses to accept TCP connections on besides
	// 127.0.0.1, and Allow the client ranges besides loopback that may
	// connect there (with a password, as on loopback): for a server that
	// other network namespaces reach, as a node's Pods do.
	Listen []netip.Addr
	Allow  []netip.Prefix
	// Settings are more server settings, by name (each passed as -c
	// name=value), such as those of replication (replication.go).
	Settings map[string]string
}

// Server is a running private PostgreSQL server.
type Server struct {
	dir     string
	bin     string
	port    int
	pass    string
	runAs   *user.User // nil when the current user runs PostgreSQL
	dataDir string
	// lock is held while this process runs the server; nil when the
	// server was adopted from the process that runs it (Use).
	lock *dirLock
	// opts are the options it was started with, for Supervise's restarts.
	opts   Options
	health health
}

// ErrNoBinaries says that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql/*/bin: " +
	"install them (apt-get install postgresql) or set DATABASE_URL to an existing server")

// Start initialises dir if it holds no cluster yet and starts PostgreSQL on
// the loopback port kept in dir (a free one the first time), with its unix
// socket inside dir. The superuser's password is generated once and kept in
// dir, so a restart finds the same cluster and credentials. The server is
// this process's until Stop: another Start on dir is refused while it
// runs, and Use adopts it.
func Start(ctx context.Context, dir string, opts Options) (*Server, error) {
	s, err := prepare(dir)
	if err != nil {
		return nil, err
	}
	if s.lock, err = s.acquire(ctx, roleServe); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := s.initdb(ctx); err != nil {
			s.lock.release()
			return nil, err
		}
	}
	if err := s.startLocked(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrNoCluster says that a directory holds no cluster for Use.
var ErrNoCluster = errors.New("no PostgreSQL cluster")

// Use gives access, for a moment, to the cluster kept in dir: the server a
// Start runs there, adopted (Stop leaves it running), or else a server it
// starts itself as Start would, which Stop stops. It never creates a
// cluster: a dir without one is ErrNoCluster.
func Use(ctx context.Context, dir string, opts Options) (*Server, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "data", "PG_VERSION")); err != nil {
		return nil, fmt.Errorf("%s: %w (%v)", abs, ErrNoCluster, err)
	}
	s, err := prepare(abs)
	if err != nil {
		return nil, err
	}
	if s.lock, err = s.acquire(ctx, roleUse); err != nil {
		return nil, err
	}
	if s.lock == nil {
		return s, nil // adopted
	}
	if err := s.startLocked(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare finds the binaries and readies dir: its owner and mode, and the
// superuser's password.
func prepare(dir string) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, dataDir: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user to run PostgreSQL as: %w", err)
		}
		s.runAs = u
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// Only PostgreSQL's user (and root) may enter: the directory holds the
	// superuser's password, the socket and a log with statements' values.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if err := s.chown(dir); err != nil {
		return nil, err
	}
	if err := s.ensurePassword(); err != nil {
		return nil, err
	}
	return s, nil
}

// acquire takes dir's lock as role. A server that a Start runs is refused
// to another Start and adopted by a Use (acquire then returns nil and the
// server's port); a Use that runs its own server for a moment is waited
// for, at most lockWait.
func (s *Server) acquire(ctx context.Context, role string) (*dirLock, error) {
	deadline := time.Now().Add(lockWait)
	var last holder
	retry := lockRetry
	for {
		l, h, err := tryLock(s.dir, role)
		if err != nil || l != nil {
			return l, err
		}
		last = h
		if h.role == roleServe && h.alive() {
			if role == roleServe {
				return nil, fmt.Errorf("the PostgreSQL of %s is run by %s: stop that first, or use another data directory", s.dir, h)
			}
			if h.state == stateReady {
				if s.port, err = s.keptPort(); err != nil {
					return nil, err
				}
				return nil, nil
			}
		}
		if err := backoff(ctx, &retry, deadline); err != nil {
			if errors.Is(err, errLockWait) {
				return nil, fmt.Errorf("the PostgreSQL of %s stayed busy for %s (held by %s)", s.dir, lockWait, last)
			}
			return nil, err
		}
	}
}

// startLocked starts the server under the lock taken, and marks it ready; on
// failure the lock is released.
func (s *Server) startLocked(ctx context.Context, opts Options) error {
	if err := s.start(ctx, opts); err != nil {
		s.lock.release()
		return err
	}
	if err := s.lock.set(stateReady); err != nil {
		_ = s.Stop()
		return err
	}
	return nil
}

// URL is a connection string for the superuser over TCP with password
// authentication, to the given database.
func (s *Server) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(Superuser, s.pass),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Stop shuts the server down (fast mode: open sessions are ended) and
// releases the directory; an adopted server is left running for the
// process that runs it.
func (s *Server) Stop() error {
	if s.lock == nil {
		return nil
	}
	defer s.lock.release()
	if pid, err := s.postmasterPID(); err != nil || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return nil // not running (it exited, or was never started again)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-m", "fast", "-w", "stop")
	return err
}

// Adopted tells whether the server is run by another process (see Use).
func (s *Server) Adopted() bool { return s.lock == nil }

func (s *Server) ensurePassword() error {
	path := filepath.Join(s.dir, "superuser.password")
	b, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		s.pass = string(bytes.TrimSpace(b))
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	s.pass = hex.EncodeToString(raw)
	return os.WriteFile(path, []byte(s.pass+"\n"), 0o600)
}

func (s *Server) initdb(ctx context.Context) error {
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return err
	}
	// initdb reads the password from a file it can open as its own user.
	pwfile := filepath.Join(s.dir, "initdb.pw")
	if err := os.WriteFile(pwfile, []byte(s.pass+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if err := s.chown(s.dataDir, pwfile); err != nil {
		return err
	}
	out, err := s.run(ctx, filepath.Join(s.bin, "initdb"),
		"-D", s.dataDir, "-U", Superuser, "--pwfile", pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) start(ctx context.Context, opts Options) error {
	s.opts = opts
	// A server left running by a killed process is stopped first, so that
	// this start owns the cluster and its port is free again.
	if _, err := os.Stat(filepath.Join(s.dataDir, "postmaster.pid")); err == nil {
		if _, err := s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-m", "fast", "-w", "-t", "30", "stop"); err != nil {
			_, _ = s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-m", "immediate", "-w", "stop")
		}
	}
	port, err := s.choosePort()
	if err != nil {
		return err
	}
	s.port = port
	sock := filepath.Join(s.dir, "socket")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return err
	}
	logFile := filepath.Join(s.dir, "postgres.log")
	if err := s.chown(sock); err != nil {
		return err
	}
	// The log holds failed statements with their values: its owner only.
	if f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		f.Close()
		if err := os.Chmod(logFile, 0o600); err != nil {
			return err
		}
		if err := s.chown(logFile); err != nil {
			return err
		}
	}
	maxConn := opts.MaxConnections
	if maxConn == 0 {
		maxConn = 200
	}
	if err := s.writeHBA(opts.Allow); err != nil {
		return err
	}
	listen := []string{"127.0.0.1"}
	for _, a := range opts.Listen {
		listen = append(listen, a.String())
	}
	settings := []string{
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + strings.Join(listen, ","),
		"-c", "unix_socket_directories=" + sock,
		"-c", "max_connections=" + strconv.Itoa(maxConn),
	}
	if opts.Fast {
		settings = append(settings, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Settings)) {
		settings = append(settings, "-c", name+"="+quoteSetting(opts.Settings[name]))
	}
	out, err := s.run(ctx, filepath.Join(s.bin, "pg_ctl"), "-D", s.dataDir, "-l", logFile,
		"-o", strings.Join(settings, " "), "-w", "-t", "60", "start")
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("start postgres: %w\n%s\n%s", err, out, tail)
	}
	return nil
}

// hbaMarker starts the lines writeHBA manages at the end of pg_hba.conf.
const hbaMarker = "# Added by Bindery for Options.Allow; rewritten at every start.\n"

// writeHBA lets the ranges in allow connect over TCP with a password, at
// the end of pg_hba.conf, replacing what an earlier start wrote there.
func (s *Server) writeHBA(allow []netip.Prefix) error {
	path := filepath.Join(s.dataDir, "pg_hba.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read pg_hba.conf: %w", err)
	}
	conf, _, _ := strings.Cut(string(data), hbaMarker)
	if len(allow) > 0 {
		conf += hbaMarker
		for _, p := range allow {
			conf += "host all all " + p.Masked().String() + " scram-sha-256\n"
		}
	}
	if conf == string(data) {
		return nil
	}
	// Written in place, so that the file keeps PostgreSQL's user as owner.
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	return nil
}

// choosePort returns the port kept in dir, or picks and keeps a free one the
// first time. The port belongs to the data directory for its whole life:
// credentials handed out name it, so a taken port is an error to fix, never
// a reason to move.
func (s *Server) choosePort() (int, error) {
	p, err := s.keptPort()
	if err == nil {
		if !portFree(p) {
			return 0, fmt.Errorf("port %d of the embedded PostgreSQL in %s is in use by another program: stop that program (credentials issued by Bindery name this port), or set DATABASE_URL", p, s.dir)
		}
		return p, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if p, err = freePort(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "port"), []byte(strconv.Itoa(p)+"\n"), 0o600); err != nil {
		return 0, err
	}
	return p, nil
}

// keptPort reads the port kept in dir; os.ErrNotExist before the first
// start.
func (s *Server) keptPort() (int, error) {
	portFile := filepath.Join(s.dir, "port")
	b, err := os.ReadFile(portFile)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("%s holds no port number (%q): remove it to pick a new port, which breaks credentials issued before", portFile, bytes.TrimSpace(b))
	}
	return p, nil
}

// run runs a PostgreSQL binary, as the postgres user when we are root.
func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return s.runEnv(ctx, nil, name, args...)
}

// runEnv is run with more environment variables.
func (s *Server) runEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), env...)
	if s.runAs != nil {
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(cmd.Env, "HOME="+s.dir)
	}
	// pg_ctl leaves the server running in its own session, so that the
	// server survives a Ctrl-C sent to our process group.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	return cmd.CombinedOutput()
}

func (s *Server) chown(paths ...string) error {
	if s.runAs == nil {
		return nil
	}
	uid, _ := strconv.Atoi(s.runAs.Uid)
	gid, _ := strconv.Atoi(s.runAs.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	// Every parent must be traversable by the postgres user.
	for d := filepath.Dir(s.dir); d != "/" && d != "."; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the postgres user cannot enter %s (mode %v): make it traversable (chmod o+x) or set DATABASE_URL", d, st.Mode().Perm())
		}
	}
	return nil
}

func findBinaries() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// quoteSetting quotes a setting's value for the shell pg_ctl runs the
// server with (its -o options go through one).
func quoteSetting(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
