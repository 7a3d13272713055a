package controller_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// BenchmarkEngine1000 creates 1,000 instances and 1,000 bindings against a
// broker that answers synchronously and measures how long until all are
// Ready with 1,000 Secrets in a real kube-apiserver; then, with the
// instances Ready, how long each new binding takes to become a Secret.
// Beside it, in the same cluster: the floor of the Secret writes (as many
// Secrets created directly, from 16 clients), and the CPU the engine uses
// at rest with every object settled.
func BenchmarkEngine1000(b *testing.B) { benchEngine(b, 1000) }

// BenchmarkEngine10k is BenchmarkEngine1000 with 10,000 of each
// (`make bench-scale`); ENGINE_BENCH_N sets another count, for a quicker
// look while working on the engine:
//
//	ENGINE_BENCH_N=2000 go test -run '^$' -bench Engine10k -benchtime 1x ./controller/
func BenchmarkEngine10k(b *testing.B) {
	n := 10000
	if s := os.Getenv("ENGINE_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("ENGINE_BENCH_N=%q: want a count of at least 100", s)
		}
	}
	benchEngine(b, n)
}

// spent reads the engine's bindery_controller_wait_seconds_total by part,
// the sum of its reconciles' durations as "reconcile", their count as
// "reconciles" (and by kind as "reconciles-instance" and
// "reconciles-binding"), and the revision it has read the feed up to as
// "feed-revision".
func spent(b *testing.B, e *env) map[string]float64 {
	families, err := e.registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "bindery_controller_wait_seconds_total":
			for _, m := range f.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		case "bindery_controller_feed_revision":
			out["feed-revision"] = f.GetMetric()[0].GetGauge().GetValue()
		case "bindery_controller_reconcile_duration_seconds":
			for _, m := range f.GetMetric() {
				out["reconcile"] += m.GetHistogram().GetSampleSum()
				out["reconciles"] += float64(m.GetHistogram().GetSampleCount())
				out["reconciles-"+m.GetLabel()[0].GetValue()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func benchEngine(b *testing.B, n int) {
	cluster := kubetest.Start(b)
	kube := cluster.Client(b)
	e := setup(b, func(o *engineOptions) { o.kube = kube; o.workers = 16; o.timeout = 10 * time.Second })
	e.registerFake(osbtest.WithRetryAfter(0))
	ctx := context.Background()
	for _, ns := range []string{"test", "floor"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// The floor: n Secrets of the same size written straight to the
	// kube-apiserver, 16 at a time.
	floorStart := time.Now()
	var fwg sync.WaitGroup
	for w := range 16 {
		fwg.Go(func() {
			for i := w; i < n; i += 16 {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i), Namespace: "floor"},
					StringData: map[string]string{"uri": "postgresql://user:password@db.example:5432/db", "username": "user", "password": "password"}}
				if _, err := kube.CoreV1().Secrets("floor").Create(ctx, s, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	fwg.Wait()
	floor := time.Since(floorStart)

	for b.Loop() {
		spentBefore := spent(b, e)
		self0, pg0 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, e.pool)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 8 {
					e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil)
					e.createBinding(fmt.Sprintf("app-%d", i), fmt.Sprintf("db-%d", i))
				}
			}()
		}
		wg.Wait()
		created := time.Since(start)
		// All Ready: counted in SQL once a second, so that looking costs
		// the run little (a list of every binding each 20 ms took a large
		// share of the two cores at 10,000; counting with each condition
		// unnested, twice a second, a fifth of PostgreSQL's CPU at 5,000);
		// the time is that of the last Ready condition written, not of
		// the look that saw it.
		eventually.Succeeds(b, 5*time.Minute+time.Duration(n/10)*time.Second, func(ctx context.Context) error {
			var ready int
			if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.bindings
				WHERE namespace = 'test' AND status->'conditions' @> '[{"type": "Ready", "status": "True"}]'`).Scan(&ready); err != nil {
				b.Fatal(err)
			}
			if ready != n {
				time.Sleep(time.Second)
				return fmt.Errorf("%d of %d bindings Ready", ready, n)
			}
			return nil
		})
		var last time.Time
		if err := e.pool.QueryRow(ctx, `SELECT max((c->>'lastTransitionTime')::timestamptz)
			FROM catalog.bindings b, jsonb_array_elements(b.status->'conditions') c
			WHERE b.namespace = 'test' AND c->>'type' = 'Ready' AND c->>'status' = 'True'`).Scan(&last); err != nil {
			b.Fatal(err)
		}
		secrets, err := kube.CoreV1().Secrets("test").List(ctx, metav1.ListOptions{LabelSelector: controller.LabelManagedBy + "=" + controller.ManagedBy})
		if err != nil || len(secrets.Items) != n {
			b.Fatalf("%d Secrets (%v)", len(secrets.Items), err)
		}
		total := last.Sub(start)
		self1, pg1 := pgtest.SelfCPU(), pgtest.BackendsCPU(b, e.pool)
		var pg time.Duration
		for pid, t := range pg1 {
			pg += t - pg0[pid]
		}
		b.ReportMetric(total.Seconds(), "s-all-ready")
		b.ReportMetric(created.Seconds(), "s-to-create")
		b.ReportMetric(float64(2*n)/total.Seconds(), "objects/s")
		// The CPU each object cost (this process: the engine, the
		// creating clients and the fake broker; PostgreSQL's backends),
		// which the machine's other load changes less than the time.
		b.ReportMetric(float64((self1-self0).Microseconds())/1000/float64(2*n), "process-cpu-ms/object")
		b.ReportMetric(float64(pg.Microseconds())/1000/float64(2*n), "pg-cpu-ms/object")
		// Where the workers' time went meanwhile (worker-seconds; the
		// reconciles' own is what they spent beyond the parts).
		after := spent(b, e)
		for part, v := range after {
			if strings.HasPrefix(part, "reconciles") {
				b.ReportMetric(v-spentBefore[part], part)
			} else if part != "feed-revision" {
				b.ReportMetric(v-spentBefore[part], "s-"+part)
			}
		}
	}
	// At rest: every object settled, nothing changing, once the engine
	// has read the feed up to the catalog's revision and finished its last
	// reconciles (the Ready bindings count before the news of the last
	// writes has reached the engine).
	idle := time.Now()
	rev, err := e.store.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for last := -1.0; ; {
		time.Sleep(3 * time.Second)
		now := spent(b, e)
		if now["reconciles"] == last && now["feed-revision"] >= float64(rev) {
			break
		}
		last = now["reconciles"]
	}
	b.ReportMetric(time.Since(idle).Seconds(), "s-until-idle")
	before := spent(b, e)["reconciles"]
	rest := measureCPU(b, e, 20*time.Second)
	b.ReportMetric(rest.engine, "engine-cores-at-rest")
	b.ReportMetric(rest.postgres, "pg-cores-at-rest")
	b.ReportMetric(spent(b, e)["reconciles"]-before, "reconciles-at-rest")
	b.ReportMetric(floor.Seconds(), "s-secret-floor")

	// Latency: each binding of a Ready instance, from its creation to its
	// Secret's arrival in a watch. The watch starts at the Secrets'
	// resourceVersion now: without one it would first send every Secret
	// there is as ADDED (n of them, behind which the late ones would wait;
	// at 50,000 that was the whole of the latency measured).
	managed := metav1.ListOptions{LabelSelector: controller.LabelManagedBy + "=" + controller.ManagedBy, Limit: 1}
	now, err := kube.CoreV1().Secrets("test").List(ctx, managed)
	if err != nil {
		b.Fatal(err)
	}
	managed.Limit, managed.ResourceVersion = 0, now.ResourceVersion
	w, err := kube.CoreV1().Secrets("test").Watch(ctx, managed)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	arrived := map[string]time.Time{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			s := ev.Object.(*corev1.Secret)
			mu.Lock()
			arrived[s.Name] = time.Now()
			mu.Unlock()
		}
	}()
	const m = 100
	createdAt := map[string]time.Time{}
	// Where a late binding's time goes: until the engine's feed reader
	// passed its revision (sampled every millisecond), then the engine's
	// parts, as the workers' seconds over the late bindings.
	revOf := map[string]int64{}
	fed := map[string]time.Time{}
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-sampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
			at := spent(b, e)["feed-revision"]
			now := time.Now()
			mu.Lock()
			for name, rev := range revOf {
				if _, ok := fed[name]; !ok && float64(rev) <= at {
					fed[name] = now
				}
			}
			mu.Unlock()
		}
	}()
	lateBefore := spent(b, e)
	stats := statementStats(b)
	for i := range m {
		name := fmt.Sprintf("late-%d", i)
		t0 := time.Now()
		bd := e.createBinding(name, fmt.Sprintf("db-%d", i))
		mu.Lock()
		createdAt[name], revOf[name] = t0, bd.ResourceVersion
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a steady stream, not one burst
	}
	eventually.Succeeds(b, time.Minute, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		got := 0
		for name := range createdAt {
			if _, ok := arrived[name]; ok {
				got++
			}
		}
		if got != m {
			return fmt.Errorf("%d of %d Secrets arrived", got, m)
		}
		return nil
	})
	w.Stop()
	<-done
	close(sampling)
	<-sampled
	lateAfter := spent(b, e)
	stats()
	var lat, feedLat []float64
	for name, t0 := range createdAt {
		lat = append(lat, float64(arrived[name].Sub(t0).Microseconds())/1000)
		if f, ok := fed[name]; ok {
			feedLat = append(feedLat, float64(f.Sub(t0).Microseconds())/1000)
		}
	}
	sort.Float64s(lat)
	sort.Float64s(feedLat)
	b.ReportMetric(lat[len(lat)/2], "p50-ms-binding-to-secret")
	b.ReportMetric(lat[len(lat)*99/100], "p99-ms-binding-to-secret")
	if len(feedLat) > 0 {
		b.ReportMetric(feedLat[len(feedLat)/2], "p50-ms-binding-to-feed")
		b.ReportMetric(feedLat[len(feedLat)*99/100], "p99-ms-binding-to-feed")
	}
	for part, v := range lateAfter {
		if !strings.HasPrefix(part, "reconciles") && part != "feed-revision" {
			b.ReportMetric((v-lateBefore[part])*1000/m, "late-ms-"+part+"/binding")
		}
	}
	b.ReportMetric((lateAfter["reconciles"]-lateBefore["reconciles"])/m, "late-reconciles/binding")
}

// statementStats, when BINDERY_BENCH_PGSTAT=1 and the server loads
// pg_stat_statements (created in the admin database), resets PostgreSQL's
// statement statistics and returns a func that logs the statements that
// took the most time since.
func statementStats(b *testing.B) func() {
	if os.Getenv("BINDERY_BENCH_PGSTAT") != "1" {
		return func() {}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL(b))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatal(err)
	}
	return func() {
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 120)
			FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15`)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var calls int64
			var total, mean float64
			var q string
			if err := rows.Scan(&calls, &total, &mean, &q); err != nil {
				b.Fatal(err)
			}
			b.Logf("pg: %6d calls %9.1f ms total %8.3f ms mean  %s", calls, total, mean, q)
		}
	}
}
