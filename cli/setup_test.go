package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/brokertest"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/syncbuf"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/restapi"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	brokerUser = "platform"
	brokerPass = "broker-secret-password"
)

// world is a real catalog (REST API on PostgreSQL), Bindery's own broker
// and the engine, with a configuration directory for the CLI.
type world struct {
	t         testing.TB
	url       string
	store     *catalog.Store
	admin     string
	brokerURL string
	env       map[string]string
	logs      *syncbuf.Buffer
}

func setup(t testing.TB, engine bool) *world {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, pool, s); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	store := catalog.NewStore(pool, keys, log)
	api := restapi.New(store, log)
	api.SetBlockedAfter(time.Second) // what is missing counts as blocked after 1 s, not 10
	e := serve.NewEcho(log, prometheus.NewRegistry())
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	admin, err := store.CreateToken(ctx, catalog.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, url: srv.URL, store: store, admin: admin, logs: logs,
		env: map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "HOME": t.TempDir()}}
	w.brokerURL = brokertest.Start(t, pool, keys, brokerUser, brokerPass)
	if engine {
		ectx, cancel := context.WithCancel(ctx)
		eng, err := controller.New(controller.Config{Store: store, Logger: log, Registry: prometheus.NewRegistry(),
			BrokerTimeout: 30 * time.Second, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- eng.Run(ectx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("the engine did not stop within 30s")
			}
		})
	}
	return w
}

// result is what one command line did.
type result struct {
	code        int
	out, errOut string
}

// run runs a command line of the CLI in this process, on buffers.
func (w *world) run(args ...string) result {
	w.t.Helper()
	return w.runAs("bindery", args...)
}

func (w *world) runAs(name string, args ...string) result {
	w.t.Helper()
	return w.runIn("", name, args...)
}

// runIn runs a command line with stdin as its standard input.
func (w *world) runIn(stdin, name string, args ...string) result {
	w.t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(cmdutil.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	f.Getenv = func(k string) string { return w.env[k] }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, f, name, args, Server{})
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

// runPTY runs a command line with its standard output and error on a
// terminal (a pseudo-terminal of 120 columns) and returns what the
// terminal showed.
func (w *world) runPTY(args ...string) result {
	w.t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		w.t.Fatal(err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		w.t.Fatal(err)
	}
	shown := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptmx) // ends with EIO once the terminal side is closed
		shown <- b.String()
	}()
	f := cmdutil.NewFactory(StreamsOf(strings.NewReader(""), tty, tty))
	f.Getenv = func(k string) string { return w.env[k] }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, f, "bindery", args, Server{})
	tty.Close()
	return result{code: code, out: <-shown}
}

// must runs args and fails the test unless the exit code is want.
func (w *world) must(want int, args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	if r.code != want {
		w.t.Fatalf("bindery %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s", strings.Join(args, " "), r.code, want, r.out, r.errOut, w.logs.String())
	}
	return r
}

// login logs in as a person does: the token on standard input.
func (w *world) login(token string) {
	w.t.Helper()
	if r := w.runIn(token+"\n", "bindery", "login", w.url); r.code != 0 {
		w.t.Fatalf("bindery login: exit %d\nstderr:\n%s", r.code, r.errOut)
	}
}

func configFile(w *world) string {
	return filepath.Join(w.env["XDG_CONFIG_HOME"], "bindery", "config.yaml")
}

func fileMode(t testing.TB, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
