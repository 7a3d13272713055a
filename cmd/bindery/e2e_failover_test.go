package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// failovers is how many times TestFailoverLosesNoAcknowledgedWrite fails
// the database over.
const failovers = 3

// TestFailoverLosesNoAcknowledgedWrite runs `bindery up` on a database
// that fails over: a primary and a synchronous streaming standby from the
// system's PostgreSQL binaries, durable (fsync on), and a database URL
// that names both with target_session_attrs=read-write. While REST
// creates go on and the engine provisions what they create (through a
// broker that counts its calls, and Bindery's own broker, whose River
// jobs run on the same database), the primary crashes and the standby is
// promoted, three times, each time with a fresh standby: the crashed
// primary, which first comes back as a primary — and is never written to
// (the fence) — and then rejoins with pg_rewind. At the end: every
// acknowledged create is there and every instance is Ready; no broker got
// the same provision twice but one that was in flight at a crash; a
// Kubernetes watch opened before the first crash saw every change of
// the feed once, in order; a token removed after a failover is refused
// at once. It logs the write unavailability of each failover, from the
// crash to the first acknowledged write (docs/operations.md).
func TestFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	r := newFailoverRig(t)
	r.writer.start()
	token := r.viewerToken()
	var gaps []time.Duration
	for round := range failovers {
		r.waitHealthy(round)
		r.provisionBuiltin(round)
		gap := r.failOver(round)
		gaps = append(gaps, gap)
		if round == 0 {
			r.revokeAfterFailover(token)
		}
	}
	r.writer.stop()
	r.checkAcknowledgedWrites()
	r.checkBrokerCalls()
	r.checkWatch()
	slices.Sort(gaps)
	t.Logf("write unavailability over %d failovers: p50 %s, max %s (each: %v); 0 acknowledged writes lost of %d",
		failovers, gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), gaps, r.writer.acknowledged())
}

// failoverRig is the cluster, Bindery on it, and what the test watches.
type failoverRig struct {
	t    *testing.T
	base string
	// servers are the two PostgreSQL servers by name; primary names the
	// one that is.
	servers map[string]*pgserver.Server
	primary string
	opts    pgserver.Options
	up      *proc
	api     api
	broker  *osbtest.Broker
	writer  *writer
	watched *watchLog
	// kills are when each crash happened, recovered when writes were
	// acknowledged again.
	kills, recovered []time.Time
}

func newFailoverRig(t *testing.T) *failoverRig {
	t.Helper()
	ctx := t.Context()
	base, err := os.MkdirTemp("", "bindery-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &failoverRig{t: t, base: base, servers: map[string]*pgserver.Server{}, primary: "a",
		opts: pgserver.Options{Settings: pgserver.ReplicationSettings()}}
	a, err := pgserver.Start(ctx, filepath.Join(base, "a"), r.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.servers["a"] = a
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(r.logs())
		}
		r.stopServers()
	})
	dbURL, err := a.EnsureDatabase(ctx, "bindery")
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Standby(ctx, filepath.Join(base, "b"), "b", r.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.servers["b"] = b
	if err := a.SetSynchronous(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", a.Port(), b.Port())
	u.RawQuery = "sslmode=disable&target_session_attrs=read-write"
	dataDir := filepath.Join(base, "up")
	r.up = start(t, []string{"DATABASE_URL=" + u.String(), "BINDERY_TARGET_DATABASE_URL=" + pgtest.New(t)},
		"up", "--data-dir", dataDir, "--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0",
		"--controller-listen", "127.0.0.1:0", "--apiserver-listen", "127.0.0.1:0", "--webhook-listen", "")
	eventually.Succeeds(t, 2*time.Minute, func(context.Context) error {
		r.up.failIfExited(t)
		if !strings.Contains(r.up.stdout.String(), "Press Ctrl-C") {
			return fmt.Errorf("no banner:\n%s\n%s", r.up.stdout.String(), r.up.stderr.String())
		}
		return nil
	})
	shown := printed(r.up.stdout.String())
	r.api = api{t: t, base: strings.TrimSuffix(shown["web UI"], "/"), token: shown["admin token"]}
	r.broker = osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	r.api.must(201, "POST", "/brokers", map[string]any{"name": "counted", "url": r.broker.URL(),
		"auth": map[string]any{"basic": map[string]any{"username": "u", "password": "p"}}})
	r.watched = watchInstances(t, filepath.Join(dataDir, "kubeconfig"))
	r.writer = &writer{t: t, api: r.api}
	return r
}

// stopServers stops whatever PostgreSQL servers run.
func (r *failoverRig) stopServers() {
	for _, s := range r.servers {
		_ = s.Stop()
	}
}

// standby names the server that is not the primary.
func (r *failoverRig) standby() string {
	if r.primary == "a" {
		return "b"
	}
	return "a"
}

// waitHealthy waits for writes to be acknowledged and the standby to be
// synchronous.
func (r *failoverRig) waitHealthy(round int) {
	r.t.Helper()
	from := r.writer.acknowledged()
	eventually.Succeeds(r.t, time.Minute, func(context.Context) error {
		r.up.failIfExited(r.t)
		if r.writer.acknowledged() < from+20 {
			return fmt.Errorf("round %d: writes are not acknowledged:\n%s", round, r.up.stderr.String())
		}
		var state string
		err := r.query(r.primary, `SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE application_name = $1), 'none')`,
			[]any{r.standby()}, &state)
		if err != nil || state != "sync" {
			return fmt.Errorf("round %d: standby %s is %q (%v), not synchronous\n%s", round, r.standby(), state, err, r.logs())
		}
		return nil
	})
}

// provisionBuiltin asks for an instance of Bindery's own broker, whose
// asynchronous operation runs as a River job on the failing database.
func (r *failoverRig) provisionBuiltin(round int) {
	r.api.must(201, "POST", "/instances", map[string]any{"name": fmt.Sprintf("builtin-%d", round), "namespace": "river",
		"spec": map[string]any{"clusterServiceClassExternalName": "postgresql", "clusterServicePlanExternalName": "small"}})
}

// failOver crashes the primary, promotes the standby, brings the crashed
// primary back as a primary for a while (it must not be written to),
// then makes it the new primary's synchronous standby. It returns the
// write unavailability: from the crash to the first acknowledged write.
func (r *failoverRig) failOver(round int) time.Duration {
	t, ctx := r.t, r.t.Context()
	old, next := r.primary, r.standby()
	killed := time.Now()
	if err := r.servers[old].Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.servers[next].Promote(ctx); err != nil {
		t.Fatal(err)
	}
	// No standby yet: commits must not wait for one.
	if err := r.servers[next].SetSynchronous(ctx, ""); err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(killed)
	r.primary = next
	back := r.writer.firstAckAfter(killed)
	r.kills, r.recovered = append(r.kills, killed), append(r.recovered, back)
	gap := back.Sub(killed)
	t.Logf("failover %d: promoted %s after the crash, writes acknowledged again %s after it", round+1,
		promoted.Round(time.Millisecond), gap.Round(time.Millisecond))
	r.fenceOldPrimary(round, old)
	rejoined, err := pgserver.Rejoin(ctx, filepath.Join(r.base, old), r.servers[next], old, r.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.servers[old] = rejoined
	if err := r.servers[next].SetSynchronous(ctx, old); err != nil {
		t.Fatal(err)
	}
	return gap
}

// fenceOldPrimary starts the crashed primary again as a primary that
// accepts writes, checks that neither the running Bindery nor a process
// that starts meanwhile (`bindery token create`) writes to it, and stops
// it.
func (r *failoverRig) fenceOldPrimary(round int, old string) {
	t, ctx := r.t, r.t.Context()
	rogue, err := pgserver.Start(ctx, filepath.Join(r.base, old), r.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.servers[old] = rogue
	if err := rogue.SetSynchronous(ctx, ""); err != nil {
		t.Fatal(err)
	}
	tokenName := fmt.Sprintf("fenced-%d", round)
	var before int64
	if err := r.query(old, `SELECT value FROM catalog.revision`, nil, &before); err != nil {
		t.Fatal(err)
	}
	from := r.writer.acknowledged()
	dbURL := r.up.envValue("DATABASE_URL")
	tok := start(t, []string{"DATABASE_URL=" + dbURL}, "token", "create", "--role", "viewer", "--name", tokenName)
	if err := tok.wait(t); err != nil {
		t.Fatalf("token create while the old primary is back: %v\n%s", err, tok.stderr.String())
	}
	eventually.Succeeds(t, time.Minute, func(context.Context) error {
		if r.writer.acknowledged() < from+20 {
			return fmt.Errorf("writes are not acknowledged while the old primary is back:\n%s", r.up.stderr.String())
		}
		return nil
	})
	var after, tokens int64
	if err := r.query(old, `SELECT value FROM catalog.revision`, nil, &after); err != nil {
		t.Fatal(err)
	}
	if err := r.query(old, `SELECT count(*) FROM catalog.api_tokens WHERE name = $1`, []any{tokenName}, &tokens); err != nil {
		t.Fatal(err)
	}
	if after != before || tokens != 0 {
		t.Errorf("the old primary %s was written to after the failover: revision %d then %d, %d tokens", old, before, after, tokens)
	}
	if err := r.query(r.primary, `SELECT count(*) FROM catalog.api_tokens WHERE name = $1`, []any{tokenName}, &tokens); err != nil || tokens != 1 {
		t.Errorf("the token made while the old primary was back is not on the new one (%d, %v)", tokens, err)
	}
	if err := rogue.Stop(); err != nil {
		t.Fatal(err)
	}
	// The process that started while it was back tried it (it comes first
	// in the URL in rounds 1 and 3) and was refused.
	if r.primary != "a" && !strings.Contains(tok.stderr.String(), "not using a former primary") {
		t.Errorf("the old primary %s was never refused: the checks above prove nothing\n%s", old, tok.stderr.String())
	}
}

// viewerToken makes a token and uses it once, so that the REST API keeps
// it in its cache.
func (r *failoverRig) viewerToken() map[string]any {
	tok := r.api.must(201, "POST", "/tokens", map[string]any{"role": "viewer", "name": "revoked-after-failover"})
	viewer := api{t: r.t, base: r.api.base, token: tok["token"].(string)}
	viewer.must(200, "GET", "/brokers", nil)
	return tok
}

// revokeAfterFailover removes the token on the new primary, as another
// replica would, and checks that the REST API refuses it at once: it
// listens again, or keeps nothing it cannot confirm.
func (r *failoverRig) revokeAfterFailover(tok map[string]any) {
	if err := r.exec(r.primary, `DELETE FROM catalog.api_tokens WHERE id = $1`, tok["id"]); err != nil {
		r.t.Fatal(err)
	}
	viewer := api{t: r.t, base: r.api.base, token: tok["token"].(string)}
	if status, _ := viewer.do("GET", "/brokers", nil); status != http.StatusUnauthorized {
		r.t.Errorf("a token removed after the failover: %d, want 401", status)
	}
}

// checkAcknowledgedWrites: every create answered 201 is on the primary,
// and the engine made every instance Ready.
func (r *failoverRig) checkAcknowledgedWrites() {
	t := r.t
	want := r.writer.names()
	eventually.Succeeds(t, 2*time.Minute, func(context.Context) error {
		var missing, notReady []string
		rows := map[string]bool{}
		conn := r.connect(r.primary)
		defer conn.Close(context.Background())
		res, err := conn.Query(t.Context(), `SELECT name, coalesce((SELECT c->>'status' = 'True' FROM jsonb_array_elements(status->'conditions') c
			WHERE c->>'type' = 'Ready'), false) FROM catalog.instances`)
		if err != nil {
			return err
		}
		for res.Next() {
			var name string
			var ready bool
			if err := res.Scan(&name, &ready); err != nil {
				return err
			}
			rows[name] = true
			if !ready {
				notReady = append(notReady, name)
			}
		}
		if err := res.Err(); err != nil {
			return err
		}
		for _, n := range want {
			if !rows[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Fatalf("%d acknowledged creates lost: %v", len(missing), missing)
		}
		if len(notReady) > 0 {
			return fmt.Errorf("%d instances not Ready: %v\n%s", len(notReady), notReady, r.up.stderr.String())
		}
		return nil
	})
}

// checkBrokerCalls: a broker got a provision twice only when the first
// was in flight at a crash (the engine could not record its answer).
func (r *failoverRig) checkBrokerCalls() {
	first := map[string]time.Time{}
	count := map[string]int{}
	for _, req := range r.broker.Requests() {
		if req.Verb != osbtest.VerbProvision {
			continue
		}
		id := strings.TrimPrefix(req.Path, "/v2/service_instances/")
		if count[id] == 0 {
			first[id] = req.Time
		}
		count[id]++
	}
	repeated := 0
	for id, n := range count {
		if n == 1 {
			continue
		}
		repeated++
		inFlight := false
		for i, k := range r.kills {
			inFlight = inFlight || (first[id].After(k.Add(-5*time.Second)) && first[id].Before(r.recovered[i]))
		}
		if n > 2 || !inFlight {
			r.t.Errorf("instance %s provisioned %d times, first at %s; crashes at %v", id, n, first[id].Format(time.StampMilli), r.kills)
		}
	}
	r.t.Logf("%d provisions at the counting broker, %d repeated after a crash", len(count), repeated)
	if len(count) < r.writer.acknowledged() {
		r.t.Errorf("the broker got %d provisions for %d instances", len(count), r.writer.acknowledged())
	}
}

// checkWatch: the watch saw the feed's changes of instances after it
// began, each once, in order.
func (r *failoverRig) checkWatch() {
	t := r.t
	var want []string
	eventually.Succeeds(t, time.Minute, func(context.Context) error {
		want = want[:0]
		conn := r.connect(r.primary)
		defer conn.Close(context.Background())
		rows, err := conn.Query(t.Context(), `SELECT revision, name, type FROM catalog.changes
			WHERE kind = 'ServiceInstance' AND revision > $1 ORDER BY revision, object_id`, r.watched.from)
		if err != nil {
			return err
		}
		for rows.Next() {
			var rev int64
			var name, typ string
			if err := rows.Scan(&rev, &name, &typ); err != nil {
				return err
			}
			want = append(want, fmt.Sprintf("%d %s %s", rev, typ, name))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if got := r.watched.events(); len(got) < len(want) {
			return fmt.Errorf("the watch has %d of the feed's %d changes", len(got), len(want))
		}
		return nil
	})
	got := r.watched.events()
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("the watch differs from the feed at change %d: %q, want %q (%d and %d changes)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("the watch has %d changes, the feed %d", len(got), len(want))
	}
	t.Logf("the watch saw the feed's %d changes of instances once each, in order (%d watches)", len(got), r.watched.restarts+1)
}

// sqlTimeout bounds the test's own statements: a commit that waits for
// a standby that never comes must fail the test, not hang it.
const sqlTimeout = 30 * time.Second

func (r *failoverRig) connect(name string) *pgx.Conn {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), sqlTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.servers[name].URL("bindery"))
	if err != nil {
		r.t.Fatal(err)
	}
	return conn
}

func (r *failoverRig) query(name, sql string, args []any, dest ...any) error {
	conn := r.connect(name)
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(r.t.Context(), sqlTimeout)
	defer cancel()
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

func (r *failoverRig) exec(name, sql string, args ...any) error {
	conn := r.connect(name)
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(r.t.Context(), sqlTimeout)
	defer cancel()
	_, err := conn.Exec(ctx, sql, args...)
	return err
}

// logs are the ends of the PostgreSQL servers' logs, for a failure.
func (r *failoverRig) logs() string {
	var b strings.Builder
	for _, name := range []string{"a", "b"} {
		raw, _ := os.ReadFile(filepath.Join(r.base, name, "postgres.log"))
		if len(raw) > 3000 {
			raw = raw[len(raw)-3000:]
		}
		fmt.Fprintf(&b, "--- %s (primary %s):\n%s\n", name, r.primary, raw)
	}
	return b.String()
}

// envValue is the value of a variable the process was started with.
func (p *proc) envValue(name string) string {
	for _, kv := range p.cmd.Env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// writer creates instances through the REST API, one after another, and
// records which creates were acknowledged and when.
type writer struct {
	t    *testing.T
	api  api
	mu   sync.Mutex
	acks []ack
	halt chan struct{}
	done chan struct{}
}

type ack struct {
	name string
	at   time.Time
}

func (w *writer) start() {
	w.halt, w.done = make(chan struct{}), make(chan struct{})
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.halt:
				return
			default:
			}
			name := "w-" + strconv.Itoa(i)
			if w.create(client, name) {
				w.mu.Lock()
				w.acks = append(w.acks, ack{name, time.Now()})
				w.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// create asks for an instance of the counting broker's service.
func (w *writer) create(client *http.Client, name string) bool {
	body := fmt.Sprintf(`{"name":%q,"namespace":"demo","spec":{"clusterServiceClassExternalName":%q,"clusterServicePlanExternalName":%q}}`,
		name, osbtest.DefaultService, osbtest.PlanSync)
	req, _ := http.NewRequest("POST", w.api.base+"/api/v1/instances", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.api.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusCreated
}

func (w *writer) stop() { close(w.halt); <-w.done }

func (w *writer) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *writer) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.acks))
	for i, a := range w.acks {
		out[i] = a.name
	}
	return out
}

// firstAckAfter waits for a create acknowledged after t and returns when.
func (w *writer) firstAckAfter(t time.Time) time.Time {
	var at time.Time
	eventually.Succeeds(w.t, 2*time.Minute, func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, a := range w.acks {
			if a.at.After(t) {
				at = a.at
				return nil
			}
		}
		return fmt.Errorf("no write acknowledged since %s", t.Format(time.StampMilli))
	})
	return at
}

// watchLog is a Kubernetes watch of every namespace's instances, opened
// again from the last resourceVersion should it end, as clients do.
type watchLog struct {
	from     int64
	mu       sync.Mutex
	seen     []string
	restarts int
}

func (l *watchLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

func watchInstances(t *testing.T, kubeconfig string) *watchLog {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	instances := sc.ServicecatalogV1beta1().ServiceInstances("")
	list, err := instances.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &watchLog{}
	l.from, _ = strconv.ParseInt(list.ResourceVersion, 10, 64)
	rv := list.ResourceVersion
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := instances.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				m, err := metaOf(ev)
				if err != nil {
					continue
				}
				rv = m.GetResourceVersion()
				l.mu.Lock()
				l.seen = append(l.seen, rv+" "+string(ev.Type)+" "+m.GetName())
				l.mu.Unlock()
			}
			w.Stop()
			l.mu.Lock()
			l.restarts++
			l.mu.Unlock()
		}
	}()
	return l
}

func metaOf(ev watch.Event) (metav1.Object, error) {
	if ev.Type == watch.Error || ev.Type == watch.Bookmark {
		return nil, fmt.Errorf("%s", ev.Type)
	}
	m, ok := ev.Object.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", ev.Object)
	}
	return m, nil
}
