package backoff_test

import (
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/backoff"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base, limit time.Duration
		n           int
		jitter      float64
		want        time.Duration
	}{
		{time.Second, time.Minute, 1, 0, time.Second},
		{time.Second, time.Minute, 3, 0, 4 * time.Second},
		{time.Second, time.Minute, 7, 0, time.Minute},
		{time.Second, time.Minute, 63, 0, time.Minute},
		{time.Second, time.Minute, 1000, 0, time.Minute},
		{time.Second, time.Minute, 0, 0, time.Minute},
		{time.Second, time.Minute, 2, 0.5, time.Second},
		{5 * time.Second, 10 * time.Minute, 2, 0.2, 8 * time.Second},
		{time.Duration(1) << 61, time.Duration(1<<62) + 1, 3, 0, time.Duration(1<<62) + 1},
	} {
		if got := backoff.Delay(tc.base, tc.limit, tc.n, tc.jitter); got != tc.want {
			t.Errorf("Delay(%s, %s, %d, %v) = %s, want %s", tc.base, tc.limit, tc.n, tc.jitter, got, tc.want)
		}
	}
}

// TestRetryAfter reads both forms of the header, as of a given time.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-3":                            0,
		"soon":                          0,
		"Sun, 29 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Sun, 29 Nov 2026 11:59:00 GMT": 0,
	} {
		if got := backoff.RetryAfter(h, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}
