package controller

import (
	"testing"
	"time"
)

// TestBackoffCurve: the wait doubles from the base to the cap, and jitter
// only ever shortens it, by at most a fifth.
func TestBackoffCurve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		random float64
		want   []time.Duration
	}{
		{0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}},
		{0.5, []time.Duration{900 * time.Millisecond, 1800 * time.Millisecond, 3600 * time.Millisecond}},
	} {
		b := backoff{base: time.Second, cap: 20 * time.Minute, random: func() float64 { return tc.random }}
		for i, want := range tc.want {
			if got := b.delay(i + 1); got != want {
				t.Errorf("random %v: delay after %d failures = %s, want %s", tc.random, i+1, got, want)
			}
		}
	}
	b := backoff{base: time.Second, cap: 20 * time.Minute, random: func() float64 { return 0 }}
	for _, n := range []int{12, 40, 63, 64, 1000} {
		if got := b.delay(n); got != 20*time.Minute {
			t.Errorf("delay after %d failures = %s, want the cap", n, got)
		}
	}
}

// TestFirstMinute: with the default curve, a broker failing for a minute
// gets at most 10 calls per object and operation, however the jitter
// falls (the shortest waits are 0.8 of the curve).
func TestFirstMinute(t *testing.T) {
	t.Parallel()
	b := backoff{base: DefaultRetryBase, cap: DefaultRetryCap, random: func() float64 { return 0.999999 }}
	calls, at := 1, time.Duration(0)
	for {
		at += b.delay(calls)
		if at > time.Minute {
			break
		}
		calls++
	}
	if calls > 10 {
		t.Errorf("%d calls in the first minute, want at most 10", calls)
	}
	t.Logf("at most %d calls in the first minute", calls)
}

// TestFirstMinuteMitigated: a provision or bind that fails and is
// orphan-mitigated costs the broker two calls (the attempt and the
// cleanup); the first minute still holds at most 10 calls per object,
// however the jitter falls.
func TestFirstMinuteMitigated(t *testing.T) {
	t.Parallel()
	b := backoff{base: DefaultRetryBase, cap: DefaultRetryCap, random: func() float64 { return 0.999999 }}
	attempts, at := 1, time.Duration(0)
	for {
		at += b.delay(2 * attempts) // each attempt cost two requests
		if at > time.Minute {
			break
		}
		attempts++
	}
	if calls := 2 * attempts; calls > 10 {
		t.Errorf("%d calls (%d attempts, each with its cleanup) in the first minute, want at most 10", calls, attempts)
	}
	t.Logf("at most %d attempts with their cleanup in the first minute", attempts)
}
