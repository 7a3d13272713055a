package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
