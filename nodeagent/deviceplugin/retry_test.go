package deviceplugin

import (
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/backofftest"
)

// TestRegisterRetry: the first retry comes at once, none waits longer than
// a second (the bound on finding a kubelet that came back without an
// event), and the capped waits are jittered.
func TestRegisterRetry(t *testing.T) {
	t.Parallel()
	backofftest.Check(t, registerRetry, 10*time.Millisecond, time.Second)
}
