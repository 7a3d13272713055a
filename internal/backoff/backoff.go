// Package backoff is the one exponential backoff formula of the processes
// that keep a failure count in rows (the engine's status.retries, the
// catalog's relist_failures): a pure function of the count, so that every
// replica and a restarted process compute the same wait. Loops that retry
// in memory use k8s.io/apimachinery/pkg/util/wait.Backoff instead. It
// also reads the wait a server asks for (RetryAfter).
package backoff

import (
	"net/http"
	"strconv"
	"time"
)

// RetryAfter reads a Retry-After header as of now: seconds, or an HTTP
// date; 0 when absent, negative or unreadable.
func RetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// Delay is the wait after the n-th failure in a row (n ≥ 1): base·2^(n−1),
// at most limit, less the share jitter (in [0, 1)) of it — callers draw
// jitter at random so that objects that failed together do not come back
// together.
func Delay(base, limit time.Duration, n int, jitter float64) time.Duration {
	d := limit
	if shift := n - 1; shift >= 0 && shift < 62 {
		if x := base << shift; x>>shift == base && x < limit {
			d = x
		}
	}
	return d - time.Duration(float64(d)*jitter)
}
