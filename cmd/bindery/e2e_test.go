package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/internal/startgc"
	"github.com/bindery-dev/bindery/internal/syncbuf"
)

// The test binary doubles as the bindery binary: with this variable set it
// runs main, so the end-to-end tests start real processes they can kill.
const runMainEnv = "BINDERY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	// The tests are a long process.
	startgc.Restore()
	pgtest.Main(m)
}

const (
	serviceID = "3f1c8f8e-5a3b-4c5e-9a55-6f1d2c7b8a01"
	planSmall = "8b0a3e52-6d1f-4f0e-8c1e-2a4b9d7c6e10"
)

// proc is a bindery process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
	done   chan error
}

// start runs `bindery ARGS` with exactly the given environment (plus PATH).
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startWith(t, os.Args[0], env, args...)
}

// startWith is start for another bindery binary (a previous release).
func startWith(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p := &proc{cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// interrupt sends Ctrl-C and returns the exit error.
func (p *proc) interrupt(t *testing.T) error {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("process did not stop within 30s of Ctrl-C")
		return nil
	}
}

// wait waits for the process to exit by itself.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("process still running; stderr:\n%s", p.stderr.String())
		return nil
	}
}

// serving waits until the process logs that it serves msg and returns the
// base URL of the address it logged: servers are started on port 0, so no
// two tests can race for a port.
func serving(t *testing.T, p *proc, msg string) string {
	t.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* addr=(\S+)`)
	var base string
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		p.failIfExited(t)
		m := re.FindStringSubmatch(p.stderr.String())
		if m == nil {
			return fmt.Errorf("bindery never logged %q:\n%s", msg, p.stderr.String())
		}
		base = "http://" + m[1]
		return nil
	})
	waitHealthy(t, p, base)
	return base
}

// failIfExited fails t at once if the process has ended: a test waiting
// for it to log or answer would otherwise wait for its whole timeout.
func (p *proc) failIfExited(t testing.TB) {
	t.Helper()
	select {
	case err := <-p.done:
		t.Fatalf("bindery exited (%v):\n%s", err, p.stderr.String())
	default:
	}
}

func waitHealthy(t *testing.T, p *proc, base string) {
	t.Helper()
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		p.failIfExited(t)
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return fmt.Errorf("no /healthz: %w\n%s", err, p.stderr.String())
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s\n%s", res.Status, p.stderr.String())
		}
		return nil
	})
}

// osb is a small OSB client for the tests.
type osb struct {
	t          *testing.T
	base       string
	user, pass string
}

func (c osb) do(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	return doJSON(c.t, method, c.base+path, body, func(req *http.Request) {
		req.SetBasicAuth(c.user, c.pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
	})
}

func (c osb) must(status int, method, path string, body any) map[string]any {
	c.t.Helper()
	return mustStatus(c.t, status, method, path, body, c.do)
}

// doJSON sends body (nil for none) as JSON to url, with the headers
// prepare sets, and decodes the JSON answer.
func doJSON(t *testing.T, method, url string, body any, prepare func(*http.Request)) (int, map[string]any) {
	t.Helper()
	var rdr io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rdr = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rdr)
	prepare(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// mustStatus is do, failing t unless the answer has status.
func mustStatus(t *testing.T, status int, method, path string, body any, do func(string, string, any) (int, map[string]any)) map[string]any {
	t.Helper()
	got, out := do(method, path, body)
	if got != status {
		t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	return out
}

func provisionBody() map[string]any {
	return map[string]any{"service_id": serviceID, "plan_id": planSmall, "organization_guid": "o", "space_guid": "s"}
}

func brokerEnv(dbURL, key string) []string {
	return []string{
		"DATABASE_URL=" + dbURL,
		"BINDERY_ENCRYPTION_KEY=" + key,
		"BINDERY_BROKER_USERNAME=osb-user",
		"BINDERY_BROKER_PASSWORD=osb-password-1234",
		"BINDERY_OPERATION_TIMEOUT=2s",
		"BINDERY_LOG_LEVEL=debug",
	}
}

// TestServeBroker runs `bindery serve broker` configured only through the
// environment, as outside checks do, and uses a binding with psql.
func TestServeBroker(t *testing.T) {
	t.Parallel()
	p := start(t, brokerEnv(pgtest.New(t), keyring.Generate()), "serve", "broker", "--listen", "127.0.0.1:0")
	base := serving(t, p, "serving the OSB API")
	c := osb{t: t, base: base, user: "osb-user", pass: "osb-password-1234"}

	cat := c.must(200, "GET", "/v2/catalog", nil)
	if first := cat["services"].([]any)[0].(map[string]any); first["name"] != "postgresql" || first["id"] != serviceID {
		t.Fatalf("first service: %v", first)
	}
	id := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	c.must(201, "PUT", "/v2/service_instances/"+id, provisionBody())
	bound := c.must(201, "PUT", "/v2/service_instances/"+id+"/service_bindings/b1", map[string]any{"service_id": serviceID, "plan_id": planSmall})
	creds := bound["credentials"].(map[string]any)
	uri := creds["uri"].(string)

	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql is not installed (it comes with the postgresql package that make test installs)")
	}
	out, err := exec.Command(psql, uri, "-v", "ON_ERROR_STOP=1", "-tAc",
		"CREATE TABLE t (v int); INSERT INTO t VALUES (7); SELECT v FROM t").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "7") {
		t.Fatalf("psql with the binding's uri: %v\n%s", err, out)
	}

	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), `bindery_broker_requests_total{code="201",method="PUT"`) {
		t.Errorf("/metrics lacks the request counter")
	}
	if res, err := http.Get(base + "/readyz"); err != nil || res.StatusCode != 200 {
		t.Errorf("/readyz: %v %v", res, err)
	}

	c.must(200, "DELETE", "/v2/service_instances/"+id+"/service_bindings/b1?service_id="+serviceID+"&plan_id="+planSmall, nil)
	c.must(200, "DELETE", "/v2/service_instances/"+id+"?service_id="+serviceID+"&plan_id="+planSmall, nil)
	if out, err := exec.Command(psql, uri, "-tAc", "SELECT 1").CombinedOutput(); err == nil {
		t.Fatalf("psql still connects after unbind and deprovision: %s", out)
	}

	if err := p.interrupt(t); err != nil {
		t.Fatalf("exit after Ctrl-C: %v\n%s", err, p.stderr.String())
	}
	logs := p.stderr.String()
	for _, secret := range []string{creds["password"].(string), "osb-password-1234"} {
		if strings.Contains(logs, secret) {
			t.Error("a credential appears in the log")
		}
	}
	if !strings.Contains(logs, "operation succeeded") {
		t.Errorf("the debug log is empty; the check above proves nothing:\n%s", logs)
	}
}

// TestServeBrokerConfigErrors checks that a broker without what it needs
// refuses to start and says what is missing.
func TestServeBrokerConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		says []string
	}{
		{"nothing", nil, []string{"--database-url", "BINDERY_ENCRYPTION_KEY", "--broker-username"}},
		{"bad key", []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x", "BINDERY_ENCRYPTION_KEY=c2hvcnQ=", "BINDERY_BROKER_TOKEN=t"}, []string{"has 5 bytes"}},
		{"half basic auth", []string{"DATABASE_URL=postgres://x@127.0.0.1:1/x", "BINDERY_ENCRYPTION_KEY=" + keyring.Generate(), "BINDERY_BROKER_USERNAME=u"}, []string{"go together"}},
		{"bad duration", []string{"BINDERY_OPERATION_TIMEOUT=soon"}, []string{"BINDERY_OPERATION_TIMEOUT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, tc.env, "serve", "broker", "--listen", "127.0.0.1:0")
			if err := p.wait(t); err == nil {
				t.Fatal("started without what it needs")
			}
			for _, s := range tc.says {
				if !strings.Contains(p.stderr.String(), s) {
					t.Errorf("error does not mention %q:\n%s", s, p.stderr.String())
				}
			}
		})
	}
}

// TestKilledMidOperation kills the broker process while the PostgreSQL
// driver is inside a provision (held there by a role the test is creating
// in an open transaction), starts a new process, and checks that it
// finishes the provision, for a synchronous and an asynchronous request.
func TestKilledMidOperation(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbURL, key := pgtest.New(t), keyring.Generate()
			first := start(t, brokerEnv(dbURL, key), "serve", "broker", "--listen", "127.0.0.1:0")
			base := serving(t, first, "serving the OSB API")
			c := osb{t: t, base: base, user: "osb-user", pass: "osb-password-1234"}

			id := fmt.Sprintf("killed-%v-%d", async, time.Now().UnixNano())
			owner := postgresql.InstanceNames(id).Owner
			admin, err := pgx.Connect(ctx, pgtest.AdminURL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(ctx)
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "CREATE ROLE "+pgx.Identifier{owner}.Sanitize()); err != nil {
				t.Fatal(err)
			}

			path := "/v2/service_instances/" + id
			if async {
				c.must(202, "PUT", path+"?accepts_incomplete=true", provisionBody())
			} else {
				go func() {
					req, _ := http.NewRequest("PUT", base+path, strings.NewReader(`{"service_id":"`+serviceID+`","plan_id":"`+planSmall+`","organization_guid":"o","space_guid":"s"}`))
					req.SetBasicAuth(c.user, c.pass)
					req.Header.Set("X-Broker-API-Version", "2.17")
					if res, err := http.DefaultClient.Do(req); err == nil {
						res.Body.Close() // the process is killed before it can answer
					}
				}()
			}
			waitLockedOn(t, pgtest.AdminURL(t), owner)
			first.kill()
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			second := start(t, brokerEnv(dbURL, key), "serve", "broker", "--listen", "127.0.0.1:0")
			base = serving(t, second, "serving the OSB API")
			c.base = base
			eventually.Succeeds(t, 150*time.Second, func(context.Context) error {
				status, body := c.do("PUT", path+"?accepts_incomplete=true", provisionBody())
				if status != 200 && status != 202 && status != 422 {
					t.Fatalf("while resuming: %d %v", status, body)
				}
				if status != 200 {
					return fmt.Errorf("the provision was not finished by the next process (%d):\n%s", status, second.stderr.String())
				}
				return nil
			})
			bound := c.must(201, "PUT", path+"/service_bindings/b", map[string]any{"service_id": serviceID, "plan_id": planSmall})
			conn, err := pgx.Connect(ctx, bound["credentials"].(map[string]any)["uri"].(string))
			if err != nil {
				t.Fatalf("connect to the resumed instance: %v", err)
			}
			conn.Close(ctx)
			c.must(200, "DELETE", path+"?service_id="+serviceID+"&plan_id="+planSmall, nil)
		})
	}
}

// waitLockedOn waits until a session is blocked creating role.
func waitLockedOn(t *testing.T, adminURL, role string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, role).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return errors.New("the broker never reached the blocked CREATE ROLE")
		}
		return nil
	})
}

// TestUpKeepsState runs `bindery up` on an empty data directory with the
// embedded PostgreSQL, binds, stops it with Ctrl-C, starts it again and
// finds the same credentials working.
func TestUpKeepsState(t *testing.T) {
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
	run := func() (*proc, map[string]string, string) {
		p := start(t, nil, "up", "--data-dir", dataDir,
			"--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0",
			"--apiserver-listen", "127.0.0.1:0")
		base := serving(t, p, "serving the OSB API")
		// The banner comes once every server is up.
		eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
			if !strings.Contains(p.stdout.String(), "Press Ctrl-C") {
				return fmt.Errorf("no banner:\n%s\n%s", p.stdout.String(), p.stderr.String())
			}
			return nil
		})
		return p, printed(p.stdout.String()), base
	}
	p, shown, base := run()
	if shown["broker password"] == "" || shown["broker username"] == "" {
		t.Fatalf("up did not print the broker credentials:\n%s", p.stdout.String())
	}
	for _, f := range []string{"encryption.key", "credentials.json", "pg/data/PG_VERSION", "kubeconfig"} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err != nil {
			t.Errorf("data directory lacks %s: %v", f, err)
		}
	}
	// The key, the admin token and PostgreSQL's log are their owner's only.
	dirMode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		dirMode = 0o711 // PostgreSQL's user traverses it to reach pg/
	}
	for f, want := range map[string]os.FileMode{".": dirMode, "encryption.key": 0o600, "credentials.json": 0o600, "pg": 0o700, "pg/postgres.log": 0o600} {
		if st, err := os.Stat(filepath.Join(dataDir, f)); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", f, st.Mode().Perm(), err, want)
		}
	}
	// The kubeconfig up writes reaches the Kubernetes API with an admin
	// identity; the built-in broker's class is there.
	kubectl, _ := filepath.Abs(filepath.Join("..", "..", "bin", "kubectl"))
	eventually.Succeeds(t, 30*time.Second, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", filepath.Join(dataDir, "kubeconfig"),
			"get", "clusterserviceclasses", "-o", "custom-columns=NAME:.spec.externalName", "--no-headers").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "postgresql" {
			return fmt.Errorf("kubectl with up's kubeconfig: %v\n%s", err, out)
		}
		return nil
	})
	c := osb{t: t, base: base, user: shown["broker username"], pass: shown["broker password"]}
	c.must(201, "PUT", "/v2/service_instances/up-1", provisionBody())
	creds := c.must(201, "PUT", "/v2/service_instances/up-1/service_bindings/b", map[string]any{"service_id": serviceID, "plan_id": planSmall})["credentials"].(map[string]any)
	if err := p.interrupt(t); err != nil {
		t.Fatalf("up after Ctrl-C: %v\n%s", err, p.stderr.String())
	}
	if strings.Contains(p.stderr.String(), shown["broker password"]) || strings.Contains(p.stderr.String(), creds["password"].(string)) {
		t.Error("a credential appears in the log")
	}

	// With up stopped, `bindery token` starts the data directory's
	// PostgreSQL for the moment it needs it, on the port issued
	// credentials name, and stops it afterwards.
	port, err := os.ReadFile(filepath.Join(dataDir, "pg", "port"))
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenCmd(t, nil, 0, "token", "create", "--data-dir", dataDir, "--role", "developer", "--name", "made-offline")
	offline := strings.TrimSpace(tok)
	if !strings.HasPrefix(offline, "bdy_") {
		t.Fatalf("token create printed %q", tok)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "pg", "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token create left the embedded PostgreSQL running (%v)", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dataDir, "pg", "port")); string(again) != string(port) {
		t.Fatalf("token create moved the embedded PostgreSQL from port %s to %s", port, again)
	}

	p, again, base := run()
	c.base = base
	if again["broker password"] != shown["broker password"] {
		t.Error("the broker password changed across a restart")
	}
	// While up runs, `bindery token` uses its PostgreSQL and leaves it
	// running; the data directory comes from BINDERY_DATA_DIR too.
	rest := api{t: t, base: strings.TrimSuffix(again["REST API"], "/api/v1"), token: offline}
	rest.must(http.StatusOK, "GET", "/instances", nil)
	list := tokenCmd(t, []string{"BINDERY_DATA_DIR=" + dataDir}, 0, "token", "list", "-o", "json")
	if !strings.Contains(list, `"made-offline"`) || strings.Contains(list, offline) {
		t.Fatalf("token list while up runs:\n%s", list)
	}
	tokenCmd(t, nil, 0, "token", "revoke", "--data-dir", dataDir, "made-offline")
	// Revoked by another process: up's REST API forgets the tokens it
	// kept when PostgreSQL's announcement reaches it, a few milliseconds
	// after the revocation committed (docs/security.md, Tokens).
	eventually.Succeeds(t, 2*time.Second, func(context.Context) error {
		if code, _ := rest.do("GET", "/instances", nil); code != http.StatusUnauthorized {
			return fmt.Errorf("GET /instances with a revoked token: %d, want 401", code)
		}
		return nil
	})
	tokenCmd(t, nil, 3, "token", "revoke", "--data-dir", dataDir, "made-offline")
	rest.token = again["admin token"]
	rest.must(http.StatusOK, "GET", "/instances", nil)
	checkBannerLinks(t, again)
	if _, err := os.Stat(filepath.Join(dataDir, "pg", "data", "postmaster.pid")); err != nil {
		t.Fatalf("the token commands stopped the PostgreSQL up runs: %v", err)
	}
	fetched := c.must(200, "GET", "/v2/service_instances/up-1/service_bindings/b", nil)["credentials"].(map[string]any)
	if fetched["uri"] != creds["uri"] {
		t.Errorf("binding credentials changed across a restart")
	}
	conn, err := pgx.Connect(context.Background(), creds["uri"].(string))
	if err != nil {
		t.Fatalf("the binding issued before the restart does not connect: %v", err)
	}
	conn.Close(context.Background())
	c.must(200, "DELETE", "/v2/service_instances/up-1?service_id="+serviceID+"&plan_id="+planSmall, nil)
	if err := p.interrupt(t); err != nil {
		t.Fatalf("second stop: %v\n%s", err, p.stderr.String())
	}

	// A wrong but valid key refuses to start, saying why and where the
	// key came from, rather than sealing new secrets with a key that
	// cannot open the old ones; so does a key that is no key.
	keyFile := filepath.Join(dataDir, "encryption.key")
	rightKey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		file string
		says []string
	}{
		{[]string{keyring.EnvVar + "=" + keyring.Generate()}, "", []string{"not the keys it was sealed with", "from " + keyring.EnvVar}},
		{nil, keyring.Generate(), []string{"not the keys it was sealed with", "from " + keyFile}},
		{[]string{keyring.EnvVar + "=c2hvcnQ="}, "", []string{"has 5 bytes", "from " + keyring.EnvVar}},
		{nil, "c2hvcnQ=", []string{"has 5 bytes", "from " + keyFile}},
	} {
		if tc.file != "" {
			if err := os.WriteFile(keyFile, []byte(tc.file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		p = start(t, tc.env, "up", "--data-dir", dataDir,
			"--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0",
			"--apiserver-listen", "127.0.0.1:0")
		err := p.wait(t)
		for _, want := range tc.says {
			if err == nil || !strings.Contains(p.stderr.String(), want) {
				t.Errorf("up with key %v file %q: %v; stderr does not say %q:\n%s", tc.env, tc.file, err, want, p.stderr.String())
			}
		}
		if strings.Count(p.stderr.String(), "bindery: ") != 1 {
			t.Errorf("the error is not printed exactly once:\n%s", p.stderr.String())
		}
		if err := os.WriteFile(keyFile, rightKey, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// tokenCmd runs `bindery token ...` to its end, expecting exit code want,
// and returns its stdout.
func tokenCmd(t *testing.T, env []string, want int, args ...string) string {
	t.Helper()
	p := start(t, append([]string{"HOME=" + t.TempDir()}, env...), args...)
	err := p.wait(t)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	if code != want {
		t.Fatalf("bindery %s: exit %d (%v), want %d\n%s", strings.Join(args, " "), code, err, want, p.stderr.String())
	}
	return p.stdout.String()
}

// printed reads the "  name: value" lines of up's banner.
// checkBannerLinks pastes the banner's login line with the admin token on
// standard input, as a person does, and opens its web UI address.
func checkBannerLinks(t *testing.T, shown map[string]string) {
	t.Helper()
	login := strings.Fields(shown["CLI login"])
	if len(login) != 3 || login[1] != "login" {
		t.Fatalf("up printed the login line %q", shown["CLI login"])
	}
	cmd := exec.Command(login[0], login[1:]...)
	cmd.Env = []string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "XDG_CONFIG_HOME=" + t.TempDir()}
	cmd.Stdin = strings.NewReader(shown["admin token"] + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the banner's login line: %v\n%s", err, out)
	}
	resp, err := http.Get(shown["web UI"] + "login")
	if err != nil {
		t.Fatalf("the banner's web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the banner's web UI %s: %s", shown["web UI"], resp.Status)
	}
}

func printed(out string) map[string]string {
	m := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), ":")
		if ok {
			// A value may be followed by a note in parentheses.
			v, note, _ := strings.Cut(strings.TrimSpace(v), " (")
			m[k] = v
			if note != "" {
				m[k+" note"] = strings.TrimSuffix(note, ")")
			}
		}
	}
	return m
}

// TestSnapshotLimitChecked: the processes that read long lists from one
// snapshot take --snapshot-limit, and refuse one that is not positive
// before they start.
func TestSnapshotLimitChecked(t *testing.T) {
	t.Parallel()
	db := "DATABASE_URL=postgres://x@127.0.0.1:1/x"
	for _, args := range [][]string{
		{"serve", "catalog", "--listen", "127.0.0.1:0", "--snapshot-limit", "-1s"},
		{"up", "--data-dir", t.TempDir(), "--snapshot-limit", "0s"},
	} {
		p := start(t, []string{db, "BINDERY_ENCRYPTION_KEY=" + keyring.Generate()}, args...)
		if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), "--snapshot-limit: must be positive") {
			t.Errorf("%v: %v\n%s", args, err, p.stderr.String())
		}
	}
}
