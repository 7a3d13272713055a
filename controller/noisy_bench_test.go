package controller_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
)

// BenchmarkNoisyNeighbours: an engine (`bindery serve controller` with
// its default flags, in a process of its own so that its memory is its
// own) with three brokers — a healthy one; one that never answers (not even
// its catalogue, once registered) with 100 instances; one that answers 500
// to every request but its catalogue's, each time with a new 4 MB
// description, with 100 instances — beside another engine with the
// healthy broker alone, each on its own database. Both run at the same
// time, so that the machine's load (shared, and busy) falls on both alike:
// each is warmed up with 20 instances and bindings of its healthy broker,
// the hostile objects go to the first, and 10 s later both get 100
// instances and 100 bindings of their healthy broker, created in turns.
// Each is timed from creation to Ready (its Ready condition's transition);
// NOISY_ROUNDS (3) rounds, and the medians over the rounds of p50 and p99
// of both and their ratios. It reports the CPU each engine used from the
// hostile objects' creation until the healthy objects were Ready (what
// the neighbours cost the first, which the second also shared the
// machine with). The last round keeps running for NOISY_WINDOW (2m) from
// the hostile objects' creation, and reports the engine's RSS before the
// hostile objects and at the end, and the live bytes (pg_column_size of
// the rows) each hostile object holds in the instances, history and
// change-feed tables at the end, once the feed's retention has cycled
// (everything before the newest revision pruned, as a full cycle leaves
// it). Then it abandons the hanging broker's 100 instances and reports
// how long each took to be gone (p50 and the longest).
//
//	go test -run '^$' -bench NoisyNeighbours -benchtime 1x ./controller/
func BenchmarkNoisyNeighbours(b *testing.B) {
	window := 2 * time.Minute
	if s := os.Getenv("NOISY_WINDOW"); s != "" {
		window, _ = time.ParseDuration(s)
	}
	rounds := 3
	if s := os.Getenv("NOISY_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	bin := buildBindery(b)
	for b.Loop() {
		var alone50, alone99, noisy50, noisy99, aloneCPU, noisyCPU []float64
		var last noisyResult
		for i := range rounds {
			w := time.Duration(0)
			if i == rounds-1 {
				w = window
			}
			alone, noisy := noisyRound(b, bin, w)
			b.Logf("round %d: alone p50 %.3fs p99 %.3fs cpu %.2fs; beside the others p50 %.3fs p99 %.3fs cpu %.2fs",
				i+1, alone.p50, alone.p99, alone.cpu, noisy.p50, noisy.p99, noisy.cpu)
			alone50, alone99, aloneCPU = append(alone50, alone.p50), append(alone99, alone.p99), append(aloneCPU, alone.cpu)
			noisy50, noisy99, noisyCPU = append(noisy50, noisy.p50), append(noisy99, noisy.p99), append(noisyCPU, noisy.cpu)
			last = noisy
		}
		b.ReportMetric(median(alone50), "p50-alone-s")
		b.ReportMetric(median(alone99), "p99-alone-s")
		b.ReportMetric(median(noisy50), "p50-noisy-s")
		b.ReportMetric(median(noisy99), "p99-noisy-s")
		b.ReportMetric(median(noisy50)/median(alone50), "p50-ratio")
		b.ReportMetric(median(noisy99)/median(alone99), "p99-ratio")
		b.ReportMetric(median(aloneCPU), "cpu-alone-s")
		b.ReportMetric(median(noisyCPU), "cpu-noisy-s")
		b.ReportMetric(last.rssBefore/(1<<20), "rss-before-MB")
		b.ReportMetric(last.rssAfter/(1<<20), "rss-after-MB")
		b.ReportMetric((last.rssAfter-last.rssBefore)/(1<<20), "rss-added-MB")
		b.ReportMetric(last.hangBytes, "hang-live-B/object")
		b.ReportMetric(last.hostileBytes, "hostile-live-B/object")
		b.ReportMetric(last.hostileRequests, "hostile-requests/object")
		b.ReportMetric(last.abandon50, "abandon-p50-s")
		b.ReportMetric(last.abandonMax, "abandon-max-s")
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// buildBindery builds the bindery binary once for the benchmark.
func buildBindery(b *testing.B) string {
	dir := b.TempDir()
	bin := filepath.Join(dir, "bindery")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/bindery-dev/bindery/cmd/bindery")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("build bindery: %v", err)
	}
	return bin
}

type noisyResult struct {
	p50, p99                float64
	cpu                     float64
	rssBefore, rssAfter     float64
	hangBytes, hostileBytes float64
	hostileRequests         float64
	abandon50, abandonMax   float64
}

// noisyBroker registers an osbtest broker serving one service, named
// service, in store.
func noisyBroker(b *testing.B, store *catalog.Store, name, service string) *osbtest.Broker {
	services := osbtest.DefaultCatalog()
	services[0].Name = service
	fake := osbtest.New(b, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(services))
	ctx := context.Background()
	br := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	br.Name = name
	br, err := store.CreateBroker(ctx, br, &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: "u", Password: "p"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.Relist(ctx, br.ID); err != nil {
		b.Fatal(err)
	}
	return fake
}

// noisyEngine is one engine of a round, with its database and brokers.
type noisyEngine struct {
	pool                *pgxpool.Pool
	store               *catalog.Store
	engine              *engineProcess
	hang, hostile       *osbtest.Broker
	hangIDs, hostileIDs []string
	instances, bindings []string
}

// newNoisyEngine starts an engine on a fresh database with the healthy
// broker, and the hostile ones when neighbours, warmed up with 20
// instances and bindings of the healthy broker.
func newNoisyEngine(b *testing.B, bin string, neighbours bool) *noisyEngine {
	ctx := context.Background()
	url := pgtest.New(b)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	for _, s := range migrations.Schemas() {
		if err := migrations.Up(ctx, pool, s); err != nil {
			b.Fatal(err)
		}
	}
	key := keyring.Generate()
	keys, _ := keyring.Parse(key)
	n := &noisyEngine{pool: pool, store: catalog.NewStore(pool, keys, slog.New(slog.DiscardHandler))}
	noisyBroker(b, n.store, "ok", "ok-svc")
	if neighbours {
		n.hang = noisyBroker(b, n.store, "hang", "hang-svc")
		n.hostile = noisyBroker(b, n.store, "hostile", "hostile-svc")
		for _, v := range []osbtest.Verb{osbtest.VerbCatalog, osbtest.VerbProvision, osbtest.VerbDeprovision, osbtest.VerbLastOperation} {
			n.hang.Fail(v, osbtest.Failure{Delay: 24 * time.Hour})
		}
		// 4 MB that do not compress, each answer's different.
		raw := make([]byte, 3<<20)
		_, _ = rand.Read(raw)
		big := base64.StdEncoding.EncodeToString(raw)
		var count atomic.Int64
		for _, v := range []osbtest.Verb{osbtest.VerbProvision, osbtest.VerbDeprovision, osbtest.VerbLastOperation} {
			n.hostile.Fail(v, osbtest.Failure{Status: 500, Describe: func() string { return strconv.FormatInt(count.Add(1), 10) + big }})
		}
	}
	n.engine = startEngine(b, bin, url, key)
	b.Cleanup(n.engine.stop)
	var warmIns, warmBindings []string
	for i := range 20 {
		warmIns = append(warmIns, noisyInstance(b, n.store, fmt.Sprintf("warm-%d", i), "ok-svc").ID)
		warmBindings = append(warmBindings, noisyBinding(b, n.store, fmt.Sprintf("warm-app-%d", i), fmt.Sprintf("warm-%d", i)).ID)
	}
	timesToReady(b, n.store, warmIns, warmBindings, n.engine)
	return n
}

// noisyRound runs an engine alone and one beside the hostile brokers at
// the same time; the second keeps running for window from the hostile
// objects' creation, for its memory and live bytes.
func noisyRound(b *testing.B, bin string, window time.Duration) (alone, noisy noisyResult) {
	ctx := context.Background()
	a, n := newNoisyEngine(b, bin, false), newNoisyEngine(b, bin, true)
	defer a.engine.stop()
	defer n.engine.stop()
	noisy.rssBefore = n.engine.rss(b)
	start := time.Now()
	cpuA, cpuN := a.engine.cpu(b), n.engine.cpu(b)
	for i := range 100 {
		n.hangIDs = append(n.hangIDs, noisyInstance(b, n.store, fmt.Sprintf("hang-%d", i), "hang-svc").ID)
		n.hostileIDs = append(n.hostileIDs, noisyInstance(b, n.store, fmt.Sprintf("hostile-%d", i), "hostile-svc").ID)
	}
	time.Sleep(10*time.Second - time.Since(start))
	for i := range 100 {
		for _, e := range []*noisyEngine{a, n} {
			e.instances = append(e.instances, noisyInstance(b, e.store, fmt.Sprintf("db-%d", i), "ok-svc").ID)
			e.bindings = append(e.bindings, noisyBinding(b, e.store, fmt.Sprintf("app-%d", i), fmt.Sprintf("db-%d", i)).ID)
		}
	}
	alone.p50, alone.p99 = timesToReady(b, a.store, a.instances, a.bindings, a.engine)
	noisy.p50, noisy.p99 = timesToReady(b, n.store, n.instances, n.bindings, n.engine)
	alone.cpu, noisy.cpu = a.engine.cpu(b)-cpuA, n.engine.cpu(b)-cpuN
	if window == 0 {
		return alone, noisy
	}
	a.engine.stop()
	if rest := window - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	noisy.rssAfter = n.engine.rss(b)
	noisy.hostileRequests = float64(len(n.hostile.Requests())) / 100
	// The feed's retention cycled: everything before the newest revision
	// is pruned, as a full cycle leaves it.
	rev, err := n.store.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.store.Feed().PruneBefore(ctx, rev); err != nil {
		b.Fatal(err)
	}
	noisy.hangBytes = liveBytes(b, n.pool, n.hangIDs) / float64(len(n.hangIDs))
	noisy.hostileBytes = liveBytes(b, n.pool, n.hostileIDs) / float64(len(n.hostileIDs))
	noisy.abandon50, noisy.abandonMax = abandonTimes(b, n.store, n.hangIDs)
	return alone, noisy
}

// abandonTimes abandons the hanging broker's instances (their provisions
// in flight, waiting for a slot or held back by its open breaker) and
// returns the p50 and the longest time from each abandon to the
// instance's being gone, in seconds.
func abandonTimes(b *testing.B, store *catalog.Store, ids []string) (p50, longest float64) {
	ctx := context.Background()
	asked := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		if _, err := store.AbandonInstance(ctx, id, "the benchmark"); err != nil {
			b.Fatal(err)
		}
		asked[id] = time.Now()
	}
	var times []float64
	deadline := time.Now().Add(time.Minute)
	for len(asked) > 0 {
		for id, at := range asked {
			_, err := store.GetInstance(ctx, id)
			if errors.Is(err, catalog.ErrNotFound) {
				times = append(times, time.Since(at).Seconds())
				delete(asked, id)
			} else if err != nil {
				b.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d abandoned instances still there after a minute", len(asked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(times)
	return times[len(times)/2], times[len(times)-1]
}

func noisyInstance(b *testing.B, store *catalog.Store, name, service string) *catalog.Instance {
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: service, ClusterServicePlanExternalName: osbtest.PlanSync}}
	in.Name, in.Namespace = name, "bench"
	in, err := store.CreateInstance(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	return in
}

func noisyBinding(b *testing.B, store *catalog.Store, name, instance string) *catalog.Binding {
	bd := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: instance}}}
	bd.Name, bd.Namespace = name, "bench"
	bd, err := store.CreateBinding(context.Background(), bd)
	if err != nil {
		b.Fatal(err)
	}
	return bd
}

// timesToReady waits until every object is Ready and returns the p50 and
// p99 of creation to Ready, in seconds.
func timesToReady(b *testing.B, store *catalog.Store, instances, bindings []string, engine *engineProcess) (p50, p99 float64) {
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	var times []float64
	for {
		times = times[:0]
		for _, id := range instances {
			in, err := store.GetInstance(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if c, ok := catalog.FindCondition(in.Status.Conditions, catalog.ConditionReady); ok && c.Status == catalog.ConditionTrue {
				times = append(times, c.LastTransitionTime.Sub(in.CreationTimestamp).Seconds())
			}
		}
		for _, id := range bindings {
			bd, err := store.GetBinding(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if c, ok := catalog.FindCondition(bd.Status.Conditions, catalog.ConditionReady); ok && c.Status == catalog.ConditionTrue {
				times = append(times, c.LastTransitionTime.Sub(bd.CreationTimestamp).Seconds())
			}
		}
		if len(times) == len(instances)+len(bindings) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d objects Ready after 5 minutes; engine log:\n%s", len(times), len(instances)+len(bindings), engine.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(times)
	return times[len(times)/2], times[len(times)*99/100]
}

// liveBytes is the size of the rows of the objects ids in the catalog's
// instances, history and change-feed tables.
func liveBytes(b *testing.B, pool *pgxpool.Pool, ids []string) float64 {
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT sum(pg_column_size(t.*)) FROM catalog.instances t WHERE id = ANY($1::uuid[])), 0) +
		coalesce((SELECT sum(pg_column_size(t.*)) FROM catalog.events t WHERE object_id = ANY($1::uuid[])), 0) +
		coalesce((SELECT sum(pg_column_size(t.*)) FROM catalog.changes t WHERE object_id = ANY($1::uuid[])), 0)`, ids).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	return float64(n)
}

// engineProcess is `bindery serve controller` running for a benchmark.
type engineProcess struct {
	cmd  *exec.Cmd
	logs *strings.Builder
	done chan struct{}
	once sync.Once
}

func startEngine(b *testing.B, bin, url, key string) *engineProcess {
	cmd := exec.Command(bin, "serve", "controller", "--listen", "127.0.0.1:0", "--broker-allow-loopback", "--log-level", "info")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "BINDERY_ENCRYPTION_KEY="+key)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	e := &engineProcess{cmd: cmd, logs: &strings.Builder{}, done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		defer close(e.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			if e.logs.Len() < 1<<20 {
				e.logs.WriteString(line[:min(len(line), 500)] + "\n")
			}
			if !once && strings.Contains(line, "engine started") {
				once = true
				close(started)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		b.Fatalf("the engine did not start; log:\n%s", e.logs.String())
	}
	return e
}

func (e *engineProcess) log() string { return tail(e.logs.String()) }

// rss is the engine process's resident set, in bytes.
func (e *engineProcess) rss(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// cpu is the CPU time the engine process has used, in seconds.
func (e *engineProcess) cpu(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// utime and stime are the 14th and 15th fields, after the command's
	// parenthesised name.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func (e *engineProcess) stop() {
	e.once.Do(e.terminate)
}

func (e *engineProcess) terminate() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
	}
	_ = e.cmd.Wait()
}
