package pgserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLockRetryIsCappedAndJittered: looks at a busy lock start at 50 ms,
// never wait more than a second apart, vary once capped, and stop before
// the deadline.
func TestLockRetryIsCappedAndJittered(t *testing.T) {
	t.Parallel()
	b := lockRetry
	capped := map[time.Duration]bool{}
	for i := range 200 {
		d := b.Step()
		if i == 0 && (d < 50*time.Millisecond || d > 100*time.Millisecond) {
			t.Errorf("first look after %s, want about 50ms", d)
		}
		if d > time.Second {
			t.Fatalf("look %d after %s: over a second", i, d)
		}
		if i >= 20 {
			capped[d] = true
		}
	}
	if len(capped) < 2 {
		t.Errorf("capped looks all wait %v: no jitter", capped)
	}
	retry := lockRetry
	if err := backoff(context.Background(), &retry, time.Now().Add(10*time.Millisecond)); !errors.Is(err, errLockWait) {
		t.Errorf("a wait past the deadline: %v, want errLockWait", err)
	}
}
