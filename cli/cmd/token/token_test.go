package token

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
)

// errOpened ends a command once it has chosen its database.
var errOpened = errors.New("opened")

// TestWhere: the token commands work on DATABASE_URL, else on the data
// directory named or found in the working directory, else over the REST
// API when logged in; with none of these, they say where they looked. A
// data directory found here while logged in is said to win.
func TestWhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		dataDir  bool // a .bindery in the working directory
		want     *Database
		usage    string // a usage error saying this
		wantREST bool
		note     string // said on stderr
	}{
		{name: "DATABASE_URL wins", args: []string{"--data-dir", "d"}, env: map[string]string{"DATABASE_URL": "postgres://x", "BINDERY_URL": "http://127.0.0.1:1"}, dataDir: true,
			want: &Database{URL: "postgres://x", DataDir: "d"}},
		{name: "the flag over the variables", args: []string{"--database-url", "postgres://flag"}, env: map[string]string{"DATABASE_URL": "postgres://x", "BINDERY_DATABASE_URL": "postgres://y"},
			want: &Database{URL: "postgres://flag", DataDir: ".bindery"}},
		{name: "BINDERY_DATABASE_URL over DATABASE_URL", env: map[string]string{"DATABASE_URL": "postgres://x", "BINDERY_DATABASE_URL": "postgres://y"},
			want: &Database{URL: "postgres://y", DataDir: ".bindery"}},
		{name: "a named data directory, even when missing", args: []string{"--data-dir", "elsewhere", "--no-migrate"},
			want: &Database{DataDir: "elsewhere", NoMigrate: true}},
		{name: "BINDERY_DATA_DIR", env: map[string]string{"BINDERY_DATA_DIR": "fromenv", "BINDERY_URL": "http://127.0.0.1:1"},
			want: &Database{DataDir: "fromenv"}},
		{name: "the data directory here over a login", env: map[string]string{"BINDERY_URL": "http://127.0.0.1:1"}, dataDir: true,
			want: &Database{DataDir: ".bindery"}, note: "the database of .bindery, not the server logged in to (http://127.0.0.1:1)"},
		{name: "a login away from data directories", env: map[string]string{"BINDERY_URL": "http://127.0.0.1:1"}, wantREST: true},
		{name: "nothing at all", usage: "no data directory .bindery here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if tc.dataDir {
				if err := os.Mkdir(".bindery", 0o700); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"HOME": t.TempDir()}
			for k, v := range tc.env {
				env[k] = v
			}
			var out, errOut bytes.Buffer
			f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			f.Getenv = func(k string) string { return env[k] }
			var got *Database
			cmd := NewCmd(f, &Databases{DefaultDataDir: ".bindery", Open: func(_ context.Context, db Database) (Store, error) {
				got = &db
				return nil, errOpened
			}})
			cmd.SetArgs(append([]string{"list"}, tc.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.ExecuteContext(context.Background())
			var usage *cmdutil.UsageError
			switch {
			case tc.usage != "":
				if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("error %v, want a usage error saying %q", err, tc.usage)
				}
			case tc.wantREST:
				if got != nil || err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
					t.Fatalf("opened %+v (error %v), want a request to the REST API at BINDERY_URL", got, err)
				}
			default:
				if !errors.Is(err, errOpened) || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("opened %+v (error %v), want %+v", got, err, tc.want)
				}
			}
			if note := errOut.String(); (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("stderr %q, want %q", note, tc.note)
			}
		})
	}
}

// TestRevokeEmptyName: `token revoke ""` is a usage error, and no
// database or server is asked: an unnamed token has no name to be revoked
// by. Before, the empty name reached the catalog, which revoked every
// unnamed token, the admin token `bindery up` makes among them.
func TestRevokeEmptyName(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	env := map[string]string{"HOME": t.TempDir(), "DATABASE_URL": "postgres://x"}
	f.Getenv = func(k string) string { return env[k] }
	opened := false
	cmd := NewCmd(f, &Databases{DefaultDataDir: ".bindery", Open: func(context.Context, Database) (Store, error) {
		opened = true
		return nil, errOpened
	}})
	cmd.SetArgs([]string{"revoke", ""})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	var usage *cmdutil.UsageError
	if !errors.As(err, &usage) || opened {
		t.Fatalf("revoke \"\": %v (database opened: %v), want a usage error before anything is asked", err, opened)
	}
}
