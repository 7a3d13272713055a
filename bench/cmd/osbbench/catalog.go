package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// loadResult is what GET /v2/catalog load measured on one broker.
type loadResult struct {
	requests int
	elapsed  time.Duration
	latency  []time.Duration
}

// add appends another run's figures.
func (r *loadResult) add(o loadResult) {
	r.requests += o.requests
	r.elapsed += o.elapsed
	r.latency = append(r.latency, o.latency...)
}

// loadCatalog sends GET /v2/catalog from workers goroutines, each one
// request after another over keep-alive connections, for d, and records
// the latency of every request (until its body is read).
func loadCatalog(ctx context.Context, c *osbClient, workers int, d time.Duration) (loadResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		all      = make([][]time.Duration, workers)
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) {
				t := time.Now()
				if _, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil, http.StatusOK); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t))
			}
			all[w] = lat
		})
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start)}
	if firstErr != nil {
		return loadResult{}, fmt.Errorf("catalog load on %s: %w", c.base, firstErr)
	}
	for _, lat := range all {
		res.latency = append(res.latency, lat...)
	}
	res.requests = len(res.latency)
	return res, nil
}

// compareCatalog loads each broker for d in all, in slices that take
// turns (alternating which broker goes first), so that a change in the
// machine's background load weighs on every broker alike.
func compareCatalog(ctx context.Context, clients []*osbClient, workers int, d, slice time.Duration) ([]loadResult, error) {
	results := make([]loadResult, len(clients))
	rounds := max(1, int((d+slice-1)/slice))
	for r := range rounds {
		for i := range clients {
			k := i
			if r%2 == 1 {
				k = len(clients) - 1 - i
			}
			res, err := loadCatalog(ctx, clients[k], workers, d/time.Duration(rounds))
			if err != nil {
				return nil, err
			}
			results[k].add(res)
		}
	}
	return results, nil
}

// loadSpec describes a catalogue comparison: which brokers, with which
// credentials, and for how long.
type loadSpec struct {
	URLs        []string
	Username    string
	Password    string
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	Slice       time.Duration
}

// loadReport is the summary of one broker's catalogue load.
type loadReport struct {
	Requests int
	Elapsed  time.Duration
	P50      time.Duration
	P99      time.Duration
}

// throughput is requests per second.
func (r loadReport) throughput() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// runLoad warms every broker up, then compares them under load.
func runLoad(ctx context.Context, spec loadSpec) ([]loadReport, error) {
	clients := make([]*osbClient, len(spec.URLs))
	for i, u := range spec.URLs {
		clients[i] = &osbClient{base: u, username: spec.Username, password: spec.Password,
			http: &http.Client{Transport: newTransport(spec.Concurrency)}}
		if _, err := loadCatalog(ctx, clients[i], spec.Concurrency, spec.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	runtime.GC()
	results, err := compareCatalog(ctx, clients, spec.Concurrency, spec.Duration, spec.Slice)
	if err != nil {
		return nil, err
	}
	reports := make([]loadReport, len(results))
	for i, r := range results {
		s := summarize(r.latency)
		reports[i] = loadReport{Requests: r.requests, Elapsed: r.elapsed, P50: s.p50, P99: s.p99}
	}
	return reports, nil
}

// loadgenEnv, set to 1, makes this program a load generator: it reads a
// loadSpec as JSON on stdin and writes its []loadReport as JSON on stdout.
const loadgenEnv = "OSBBENCH_LOADGEN"

// runLoadProcess runs runLoad in a child process, so that the load
// generator's goroutines and garbage do not share the brokers' Go runtime,
// as a platform's requests would not.
func runLoadProcess(ctx context.Context, spec loadSpec) ([]loadReport, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), loadgenEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	var reports []loadReport
	if err := json.Unmarshal(out, &reports); err != nil {
		return nil, fmt.Errorf("load generator: decode its report: %w", err)
	}
	if len(reports) != len(spec.URLs) {
		return nil, fmt.Errorf("load generator: %d reports for %d brokers", len(reports), len(spec.URLs))
	}
	return reports, nil
}

// loadgenMain is the child's side of runLoadProcess.
func loadgenMain(ctx context.Context) error {
	var spec loadSpec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return fmt.Errorf("read load spec: %w", err)
	}
	reports, err := runLoad(ctx, spec)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(reports)
}
