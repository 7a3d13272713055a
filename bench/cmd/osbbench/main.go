// Command osbbench measures Bindery's OSB broker and prints its figures:
//
//   - GET /v2/catalog throughput and latency at a fixed concurrency, side
//     by side with a broker built on github.com/pivotal-cf/brokerapi/v12
//     serving the same catalogue;
//   - the time of a synchronous provision, bind, unbind and deprovision
//     cycle through Bindery's HTTP API, side by side with the same DDL run
//     directly through pgx.
//
// Both brokers run in this process on loopback listeners; the catalogue
// load comes from a child process (this program again), as a platform's
// requests would come from elsewhere, unless -inprocess. PostgreSQL is
// DATABASE_URL when it is set (a superuser's postgres:// URL on a network
// address), otherwise a private server with fsync off, started from the
// system's binaries and removed at the end. Logs are discarded; stdout
// carries the report.
//
// Usage:
//
//	cd bench && go run ./cmd/osbbench [-duration 5s] [-cycles 30] [-only catalog|cycle] [-cpuprofile FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Targets of issue 2.
const (
	minCatalogRatio = 1.2                  // Bindery's catalogue throughput over brokerapi's
	maxCatalogP99   = 5 * time.Millisecond // Bindery's catalogue p99
	maxCycleRatio   = 1.15                 // Bindery's cycle time over the raw DDL's
)

// options are the command's flags.
type options struct {
	duration     time.Duration
	warmup       time.Duration
	slice        time.Duration
	concurrency  int
	cycles       int
	warmupCycles int
	only         string
	inProcess    bool
	cpuprofile   string
	memprofile   string
}

func main() {
	if os.Getenv(loadgenEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := loadgenMain(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "osbbench load generator:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration of the catalogue load, per broker")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up before the catalogue load, per broker")
	flag.DurationVar(&o.slice, "slice", 500*time.Millisecond, "length of one turn of a broker in the catalogue load")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent catalogue clients")
	flag.IntVar(&o.cycles, "cycles", 30, "measured provision-to-deprovision cycles, per path")
	flag.IntVar(&o.warmupCycles, "warmup-cycles", 3, "warm-up cycles, per path")
	flag.BoolVar(&o.inProcess, "inprocess", false, "run the catalogue load generator in this process, sharing the brokers' Go runtime")
	flag.StringVar(&o.only, "only", "", `run one benchmark only: "catalog" or "cycle"`)
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the brokers, and the load generator with -inprocess) to this file")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile of the whole run to this file")
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "osbbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "osbbench:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	var errs []error
	if o.duration <= 0 || o.slice <= 0 || o.warmup < 0 {
		errs = append(errs, errors.New("-duration and -slice must be positive and -warmup not negative"))
	}
	if o.concurrency <= 0 {
		errs = append(errs, errors.New("-concurrency must be positive"))
	}
	if o.cycles <= 0 || o.warmupCycles < 0 {
		errs = append(errs, errors.New("-cycles must be positive and -warmup-cycles not negative"))
	}
	if o.only != "" && o.only != "catalog" && o.only != "cycle" {
		errs = append(errs, fmt.Errorf("-only: %q is neither catalog nor cycle", o.only))
	}
	return errors.Join(errs...)
}

// run sets up PostgreSQL and both brokers, runs the benchmarks and writes
// the report to out.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	// cleanup runs fn when run returns and keeps its error.
	cleanup := func(fn func() error) {
		if cerr := fn(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	}

	cl, err := startCluster(ctx)
	if err != nil {
		return err
	}
	defer cleanup(cl.stop)
	dbURL, drop, err := cl.createDatabase(ctx, "osbbench_"+randomHex(6))
	if err != nil {
		return err
	}
	defer cleanup(func() error {
		ctx, cancel := stopCtx()
		defer cancel()
		return drop(ctx)
	})
	poolCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("bench database url: %w", err)
	}
	bookkeeping := &queryCounter{}
	poolCfg.ConnConfig.Tracer = bookkeeping
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("connect to the bench database: %w", err)
	}
	defer pool.Close()
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fmt.Errorf("server version: %w", err)
	}

	username, password := "osbbench", randomHex(16)
	b, err := startBindery(ctx, pool, dbURL, username, password)
	if err != nil {
		return err
	}
	defer cleanup(func() error {
		ctx, cancel := stopCtx()
		defer cancel()
		return b.stop(ctx)
	})
	bsrv, err := serveLoopback(b.broker.Handler())
	if err != nil {
		return err
	}
	defer cleanup(func() error {
		ctx, cancel := stopCtx()
		defer cancel()
		return bsrv.close(ctx)
	})
	body, _ := b.catalog.Body()
	peer, err := newCatalogBroker(body)
	if err != nil {
		return err
	}
	psrv, err := serveLoopback(brokerapiHandler(peer, username, password))
	if err != nil {
		return err
	}
	defer cleanup(func() error {
		ctx, cancel := stopCtx()
		defer cancel()
		return psrv.close(ctx)
	})

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer cleanup(f.Close)
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if o.memprofile != "" {
		defer cleanup(func() error { return writeAllocs(o.memprofile) })
	}

	fmt.Fprintf(out, "osbbench: %s %s/%s, NumCPU %d, GOMAXPROCS %d\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if load, ok := loadAverage(); ok {
		fmt.Fprintf(out, "load average (1 min) at start: %s\n", load)
	}
	fmt.Fprintf(out, "postgresql: %s (%s)\n", version, cl.about)
	if o.only != "cycle" {
		bc := &osbClient{base: bsrv.url, username: username, password: password,
			http: &http.Client{Transport: newTransport(o.concurrency)}}
		pc := &osbClient{base: psrv.url, username: username, password: password,
			http: &http.Client{Transport: newTransport(o.concurrency)}}
		if err := catalogBench(ctx, o, out, bc, pc); err != nil {
			return err
		}
	}
	if o.only != "catalog" {
		c := &osbClient{base: bsrv.url, username: username, password: password,
			http: &http.Client{Transport: newTransport(1)}}
		if err := cycleBench(ctx, o, out, b, c, dbURL, bookkeeping); err != nil {
			return err
		}
	}
	return nil
}

// catalogBench measures GET /v2/catalog on Bindery and on the brokerapi
// peer and writes the table.
func catalogBench(ctx context.Context, o options, out io.Writer, bindery, peer *osbClient) error {
	names := []string{"bindery", "brokerapi v12"}
	clients := []*osbClient{bindery, peer}
	spec := loadSpec{Username: bindery.username, Password: bindery.password, Concurrency: o.concurrency,
		Warmup: o.warmup, Duration: o.duration, Slice: o.slice}
	sizes := make([]int64, len(clients))
	for i, c := range clients {
		n, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil, http.StatusOK)
		if err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		sizes[i] = n
		spec.URLs = append(spec.URLs, c.base)
	}
	load, where := runLoadProcess, "a child process"
	if o.inProcess {
		load, where = runLoad, "this process"
	}
	reports, err := load(ctx, spec)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\nGET /v2/catalog: %d clients in %s, keep-alive, %s warm-up, then %s each in %s turns\n",
		o.concurrency, where, o.warmup, o.duration, o.slice)
	fmt.Fprintf(out, "%-14s %9s %10s %8s %8s %8s\n", "broker", "requests", "req/s", "p50 ms", "p99 ms", "body B")
	for i, r := range reports {
		fmt.Fprintf(out, "%-14s %9d %10.0f %8.2f %8.2f %8d\n",
			names[i], r.Requests, r.throughput(), ms(r.P50), ms(r.P99), sizes[i])
	}
	ratio := reports[0].throughput() / reports[1].throughput()
	fmt.Fprintf(out, "%-40s %-16s %s\n", fmt.Sprintf("throughput bindery/brokerapi: %.2fx", ratio),
		fmt.Sprintf("target >= %.2fx", minCatalogRatio), verdict(ratio >= minCatalogRatio))
	fmt.Fprintf(out, "%-40s %-16s %s\n", fmt.Sprintf("p99 bindery: %.2f ms", ms(reports[0].P99)),
		fmt.Sprintf("target < %d ms", maxCatalogP99.Milliseconds()), verdict(reports[0].P99 < maxCatalogP99))
	return nil
}

// cycleBench runs provision, bind, unbind and deprovision cycles through
// Bindery and as raw DDL, alternating which goes first, and writes the
// table. bookkeeping counts the queries on the broker's own pool.
func cycleBench(ctx context.Context, o options, out io.Writer, b *bindery, c *osbClient, targetURL string, bookkeeping *queryCounter) error {
	serviceID, planID, plan, err := b.smallPlan()
	if err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(targetURL)
	if err != nil {
		return fmt.Errorf("target url: %w", err)
	}
	target, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to the target: %w", err)
	}
	defer target.Close(context.WithoutCancel(ctx))

	var (
		viaBindery, raw []cycleTimes
		queries0        int64
		queryTime0      time.Duration
	)
	for i := range o.warmupCycles + o.cycles {
		if i == o.warmupCycles {
			queries0, queryTime0 = bookkeeping.snapshot()
		}
		runBindery := func() error {
			t, err := binderyCycle(ctx, c, serviceID, planID)
			if err == nil && i >= o.warmupCycles {
				viaBindery = append(viaBindery, t)
			}
			return err
		}
		runRaw := func() error {
			t, err := rawCycle(ctx, target, cfg, plan)
			if err == nil && i >= o.warmupCycles {
				raw = append(raw, t)
			}
			return err
		}
		first, second := runBindery, runRaw
		if i%2 == 1 {
			first, second = runRaw, runBindery
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	queries, queryTime := bookkeeping.snapshot()
	bs, rs := summarizeCycles(viaBindery), summarizeCycles(raw)

	fmt.Fprintf(out, "\nprovision -> bind -> unbind -> deprovision, synchronous, plan %q:\n", "small")
	fmt.Fprintf(out, "%d cycles each after %d warm-up, alternating which goes first\n", o.cycles, o.warmupCycles)
	fmt.Fprintf(out, "%-22s %8s %8s %8s %8s %8s %8s %8s\n", "path", "mean ms", "p50 ms", "min ms",
		"p50 prov", "bind", "unbind", "deprov")
	for _, r := range []struct {
		name string
		s    cycleStats
	}{{"bindery (OSB, HTTP)", bs}, {"raw DDL through pgx", rs}} {
		fmt.Fprintf(out, "%-22s %8.1f %8.1f %8.1f", r.name, ms(r.s.total.mean), ms(r.s.total.p50), ms(r.s.total.min))
		for _, d := range r.s.steps {
			fmt.Fprintf(out, " %8.1f", ms(d))
		}
		fmt.Fprintln(out)
	}
	ratio := float64(bs.total.mean) / float64(rs.total.mean)
	fmt.Fprintf(out, "%-40s %-16s %s\n",
		fmt.Sprintf("mean bindery/raw: %.2fx (p50 %.2fx)", ratio, float64(bs.total.p50)/float64(rs.total.p50)),
		fmt.Sprintf("target <= %.2fx", maxCycleRatio), verdict(ratio <= maxCycleRatio))
	fmt.Fprintf(out, "bindery overhead per cycle: %.1f ms mean, %.1f ms p50\n",
		ms(bs.total.mean-rs.total.mean), ms(bs.total.p50-rs.total.p50))
	fmt.Fprintf(out, "broker's own database work: %.1f queries, %.1f ms per cycle (River's background queries included)\n",
		float64(queries-queries0)/float64(o.cycles), ms((queryTime-queryTime0)/time.Duration(o.cycles)))
	return nil
}

// writeAllocs writes the allocation profile of the run so far to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	return f.Close()
}

// loadAverage is the machine's one-minute load average, where Linux tells
// it: figures taken on a busy machine are noisier.
func loadAverage() (string, bool) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "", false
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return "", false
	}
	return fields[0], true
}
