package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/web/csrf"
)

// shutdownBound is how long every server may take to exit after SIGTERM,
// whatever it has open (docs/operations.md): well inside Kubernetes'
// default grace period of 30 seconds, so a rolling update never waits for
// the kill.
const shutdownBound = 10 * time.Second

// terminate sends SIGTERM, as the kubelet does, and returns how long the
// process took to exit; it fails t if the process exits with an error or
// not within shutdownBound.
func (p *proc) terminate(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM:\n%s", p.name(), err, p.stderr.String())
		}
		if took > shutdownBound {
			t.Errorf("%s took %s to exit after SIGTERM, more than %s", p.name(), took.Round(time.Millisecond), shutdownBound)
		}
		return took
	case <-time.After(2 * shutdownBound):
		t.Errorf("%s had not exited %s after SIGTERM:\n%s", p.name(), 2*shutdownBound, p.stderr.String())
		return 2 * shutdownBound
	}
}

// name is the command line of the process, for messages.
func (p *proc) name() string { return "bindery " + strings.Join(p.cmd.Args[1:], " ") }

// TestServersStopWithinGracePeriod runs the broker, the catalog, the
// engine and the Kubernetes API as processes, each with what holds a
// server open at a shutdown — Kubernetes watches, the web UI's event
// streams, an engine call to a broker that does not answer, a broker
// operation stuck in PostgreSQL — then sends all of them SIGTERM at once
// and checks that each exits, successfully, within shutdownBound. (The
// node agent with the kubelet's stream open, and the webhook, are checked
// the same way in TestServeNodeagent and TestUpWebhook.)
func TestServersStopWithinGracePeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, key := pgtest.New(t), keyring.Generate()
	env := brokerEnv(dbURL, key)
	token := adminToken(t, dbURL)

	brokerProc := start(t, env, "serve", "broker", "--listen", "127.0.0.1:0")
	brokerURL := serving(t, brokerProc, "serving the OSB API")
	catalogProc := start(t, env, "serve", "catalog", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	catalogURL := serving(t, catalogProc, "serving the REST API")
	engine := start(t, env, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback")
	dataDir := t.TempDir()
	apiProc := start(t, []string{"DATABASE_URL=" + dbURL}, "serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	servingURL(t, apiProc, "serving the Kubernetes API")

	// Kubernetes watches, open before anything changes.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var watches []watch.Interface
	for range 3 {
		w, err := sc.ServicecatalogV1beta1().ServiceInstances("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}

	// The web UI's event streams.
	streams := openEventStreams(t, catalogURL, token, 3)

	// An engine call to a broker that holds its answer.
	slow := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	slow.Fail(osbtest.VerbProvision, osbtest.Failure{Delay: 10 * time.Minute})
	a := api{t: t, base: catalogURL, token: token}
	a.must(201, "POST", "/brokers", map[string]any{"name": "slow", "url": slow.URL(),
		"auth": map[string]any{"basic": map[string]any{"username": "u", "password": "p"}}})
	a.must(201, "POST", "/instances", map[string]any{"name": "db", "namespace": "demo",
		"spec": map[string]any{"clusterServiceClassExternalName": osbtest.DefaultService, "clusterServicePlanExternalName": osbtest.PlanSync}})
	eventually.Succeeds(t, 60*time.Second, func(context.Context) error {
		if slow.Count(osbtest.VerbProvision) == 0 {
			return fmt.Errorf("the engine never called the broker:\n%s", engine.stderr.String())
		}
		return nil
	})
	for i, w := range watches {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("watch %d: %s, want ADDED", i, ev.Type)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("watch %d saw no event", i)
		}
	}

	// A broker operation held inside PostgreSQL: a role the test is
	// creating in an open transaction blocks the provision's.
	id := fmt.Sprintf("held-%d", time.Now().UnixNano())
	admin, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the test's end
	if _, err := tx.Exec(ctx, "CREATE ROLE "+pgx.Identifier{postgresql.InstanceNames(id).Owner}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	c := osb{t: t, base: brokerURL, user: "osb-user", pass: "osb-password-1234"}
	c.must(202, "PUT", "/v2/service_instances/"+id+"?accepts_incomplete=true", provisionBody())
	waitLockedOn(t, pgtest.AdminURL(t), postgresql.InstanceNames(id).Owner)

	procs := []*proc{brokerProc, catalogProc, engine, apiProc}
	took := make([]time.Duration, len(procs))
	done := make(chan struct{})
	for i, p := range procs {
		go func() {
			defer func() { done <- struct{}{} }()
			took[i] = p.terminate(t)
		}()
	}
	for range procs {
		<-done
	}
	for i, p := range procs {
		t.Logf("%s exited %s after SIGTERM", p.name(), took[i].Round(time.Millisecond))
	}
	for i, s := range streams {
		if err := s.ended(5 * time.Second); err != nil {
			t.Errorf("event stream %d: %v", i, err)
		}
	}
}

// adminToken makes an admin token with `bindery token create`.
func adminToken(t *testing.T, dbURL string) string {
	t.Helper()
	tok := start(t, []string{"DATABASE_URL=" + dbURL}, "token", "create", "--role", "admin")
	if err := tok.wait(t); err != nil {
		t.Fatalf("token create: %v\n%s", err, tok.stderr.String())
	}
	return strings.TrimSpace(tok.stdout.String())
}

// eventStream is an open server-sent event stream of the web UI.
type eventStream struct {
	res  *http.Response
	done chan error
}

// ended waits for the stream to end, at most d.
func (s *eventStream) ended(d time.Duration) error {
	select {
	case err := <-s.done:
		return err
	case <-time.After(d):
		s.res.Body.Close()
		return fmt.Errorf("still open %s after the server exited", d)
	}
}

// openEventStreams signs in to the web UI with token and opens n event
// streams of its instance list, each read up to its first event.
func openEventStreams(t *testing.T, base, token string, n int) []*eventStream {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(base)
	var token32 string
	for _, c := range jar.Cookies(u) {
		if c.Name == csrf.CookieName {
			token32 = c.Value
		}
	}
	res, err = hc.PostForm(base+"/login", url.Values{"token": {token}, csrf.FieldName: {token32}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %s", res.Status)
	}
	var out []*eventStream
	for range n {
		req, _ := http.NewRequest("GET", base+"/live/instances", nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET /live/instances: %s %s", res.Status, res.Header.Get("Content-Type"))
		}
		r := bufio.NewReader(res.Body)
		// The stream begins with its reconnection delay, then its first
		// event.
		for i := 0; ; i++ {
			line, err := r.ReadString('\n')
			if err == nil && strings.HasPrefix(line, "event: ") {
				break
			}
			if err != nil || i == 3 {
				t.Fatalf("no event at the start of the stream: %q, %v", line, err)
			}
		}
		s := &eventStream{res: res, done: make(chan error, 1)}
		go func() {
			for {
				if _, err := r.ReadString('\n'); err != nil {
					s.done <- nil
					return
				}
			}
		}()
		out = append(out, s)
	}
	return out
}
