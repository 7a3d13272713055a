package pgserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/backofftest"
)

// TestLockRetry: looks at a busy lock start within 100 ms, are never more
// than a second apart, are jittered, and stop before the deadline.
func TestLockRetry(t *testing.T) {
	t.Parallel()
	backofftest.Check(t, lockRetry, 100*time.Millisecond, time.Second)
	retry := lockRetry
	if err := backoff(context.Background(), &retry, time.Now().Add(10*time.Millisecond)); !errors.Is(err, errLockWait) {
		t.Errorf("a wait past the deadline: %v, want errLockWait", err)
	}
}
