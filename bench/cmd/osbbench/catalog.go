package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// loadResult is what one run of GET /v2/catalog load measured.
type loadResult struct {
	requests int
	elapsed  time.Duration
	latency  summary
}

// throughput is requests per second.
func (r loadResult) throughput() float64 { return float64(r.requests) / r.elapsed.Seconds() }

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
			lat := make([]time.Duration, 0, 1<<16)
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
	elapsed := time.Since(start)
	if firstErr != nil {
		return loadResult{}, fmt.Errorf("catalog load on %s: %w", c.base, firstErr)
	}
	var merged []time.Duration
	for _, lat := range all {
		merged = append(merged, lat...)
	}
	return loadResult{requests: len(merged), elapsed: elapsed, latency: summarize(merged)}, nil
}
