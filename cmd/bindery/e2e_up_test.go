package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
)

// TestUpPortTaken: a port of up's listeners held by another program is
// reported, with its flag, before anything is made: no data directory, no
// PostgreSQL.
func TestUpPortTaken(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	dataDir := filepath.Join(t.TempDir(), "data")
	p := start(t, nil, "up", "--data-dir", dataDir,
		"--broker-listen", "127.0.0.1:0", "--catalog-listen", addr, "--controller-listen", "127.0.0.1:0",
		"--apiserver-listen", "127.0.0.1:0")
	if err := p.wait(t); err == nil {
		t.Fatal("up started with its catalog port taken")
	}
	for _, want := range []string{"--catalog-listen " + addr, "in use"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("the error does not say %q:\n%s", want, p.stderr.String())
		}
	}
	if strings.Contains(p.stderr.String(), "PostgreSQL") {
		t.Errorf("up set PostgreSQL up before finding the port taken:\n%s", p.stderr.String())
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up made its data directory before finding the port taken (%v)", err)
	}
}

// TestTokenWithoutDatabase: `bindery token` away from any data directory,
// database or login says where it looked and what to do; pointed at a
// directory without Bindery's database, it says so and makes nothing.
func TestTokenWithoutDatabase(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
		says []string
	}{
		{[]string{"token", "list"}, 2, []string{"no data directory .bindery", "DATABASE_URL", "bindery login"}},
		{[]string{"token", "create", "--role", "admin", "--data-dir", empty}, 1, []string{empty + " holds no Bindery database", "bindery up --data-dir"}},
	} {
		p := start(t, []string{"HOME=" + t.TempDir()}, tc.args...)
		err := p.wait(t)
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) || ee.ExitCode() != tc.want {
			t.Errorf("bindery %s: %v, want exit code %d", strings.Join(tc.args, " "), err, tc.want)
		}
		for _, s := range tc.says {
			if !strings.Contains(p.stderr.String(), s) {
				t.Errorf("bindery %s does not say %q:\n%s", strings.Join(tc.args, " "), s, p.stderr.String())
			}
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) > 0 {
		t.Errorf("token create made %v in a directory without a database", entries)
	}
}

// TestMigrateConfigErrors: every problem of a migrate command line is
// reported at once, each once.
func TestMigrateConfigErrors(t *testing.T) {
	t.Parallel()
	p := start(t, nil, "migrate", "down")
	if err := p.wait(t); err == nil {
		t.Fatal("migrate down ran without a database or a schema")
	}
	for _, want := range []string{"--database-url", "--schema is required"} {
		if n := strings.Count(p.stderr.String(), want); n != 1 {
			t.Errorf("%q is said %d times:\n%s", want, n, p.stderr.String())
		}
	}
}

// TestUpSupervisesPostgreSQL: kill -9 of the embedded PostgreSQL under
// `bindery up` is noticed, said in the log and in /readyz, and mended
// without anyone's help; SIGTERM then stops everything within 5 s.
func TestUpSupervisesPostgreSQL(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "bindery-up-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(base, "data")
	p := start(t, nil, "up", "--data-dir", dataDir,
		"--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0",
		"--apiserver-listen", "127.0.0.1:0")
	serving(t, p, "serving the OSB API")
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		if !strings.Contains(p.stdout.String(), "Press Ctrl-C") {
			return fmt.Errorf("no banner:\n%s\n%s", p.stdout.String(), p.stderr.String())
		}
		return nil
	})
	shown := printed(p.stdout.String())
	rest := api{t: t, base: strings.TrimSuffix(shown["REST API"], "/api/v1"), token: shown["admin token"]}
	readyz := func() (int, string) {
		res, err := http.Get(rest.base + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	pidFile := filepath.Join(dataDir, "pg", "data", "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "the embedded PostgreSQL exited at") {
			return fmt.Errorf("/readyz %d %q, want 503 saying the embedded PostgreSQL exited", code, body)
		}
		return nil
	})
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		if code, body := readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %q\n%s", code, body, p.stderr.String())
		}
		return nil
	})
	t.Logf("ready again %s after kill -9", time.Since(killed).Round(time.Millisecond))
	rest.must(http.StatusOK, "GET", "/instances", nil)
	for _, want := range []string{"the embedded PostgreSQL exited; restarting it", "the embedded PostgreSQL is back"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	stopping := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Errorf("up after SIGTERM: %v\n%s", err, p.stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("up still running 5 s after SIGTERM:\n%s", p.stderr.String())
	}
	t.Logf("stopped %s after SIGTERM", time.Since(stopping).Round(time.Millisecond))
}
