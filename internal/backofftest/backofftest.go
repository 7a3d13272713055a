// Package backofftest checks the wait.Backoff of a retry loop in its
// package's tests: that it starts soon, that no wait passes the bound the
// loop promises (so the cap is there), and that the capped waits differ
// (so the jitter is there, and processes that failed together do not
// retry in step).
package backofftest

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// steps is how many waits Check looks at: enough to reach any cap a loop
// here uses, and to see the jitter many times over.
const steps = 200

// Check steps a copy of b and reports on t a first wait over first, any
// wait over longest, or capped waits that are all alike.
func Check(t testing.TB, b wait.Backoff, first, longest time.Duration) {
	t.Helper()
	var prev time.Duration
	capped := map[time.Duration]bool{}
	for i := range steps {
		d := b.Step()
		if i == 0 && d > first {
			t.Errorf("first wait %s, want at most %s", d, first)
		}
		if d > longest {
			t.Errorf("wait %d is %s, over %s: no cap", i, d, longest)
			return
		}
		if i >= steps/2 {
			capped[d] = true
		}
		prev = d
	}
	if len(capped) < 2 {
		t.Errorf("the waits settle at %s each: no jitter", prev)
	}
}
