package backofftest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// recorder keeps what Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheck: a capped, jittered backoff passes; one without its cap, its
// jitter, or starting late fails.
func TestCheck(t *testing.T) {
	t.Parallel()
	good := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.25, Steps: math.MaxInt32, Cap: time.Second}
	noCap, noJitter, late := good, good, good
	noCap.Cap = 0
	noJitter.Jitter = 0
	late.Duration = time.Second
	for _, tc := range []struct {
		name string
		b    wait.Backoff
		ok   bool
	}{{"good", good, true}, {"no cap", noCap, false}, {"no jitter", noJitter, false}, {"late", late, false}} {
		r := &recorder{TB: t}
		Check(r, tc.b, 20*time.Millisecond, 1250*time.Millisecond)
		if ok := len(r.errs) == 0; ok != tc.ok {
			t.Errorf("%s: passed %v, want %v (%v)", tc.name, ok, tc.ok, r.errs)
		}
	}
}
