package deviceplugin

import (
	"testing"
	"time"
)

// TestRegisterRetryIsCappedAndJittered: the first retry comes at once,
// none waits longer than a second (the bound on finding a kubelet that
// came back without an event), and the capped waits vary.
func TestRegisterRetryIsCappedAndJittered(t *testing.T) {
	t.Parallel()
	b := registerRetry
	capped := map[time.Duration]bool{}
	for i := range 200 {
		d := b.Step()
		if i == 0 && d > 10*time.Millisecond {
			t.Errorf("first retry after %s, want at once", d)
		}
		if d > time.Second {
			t.Fatalf("retry %d after %s: over a second", i, d)
		}
		if i >= 20 {
			capped[d] = true
		}
	}
	if len(capped) < 2 {
		t.Errorf("capped retries all wait %v: no jitter", capped)
	}
}
