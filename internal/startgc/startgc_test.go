package startgc

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestRestore checks that the collector is off after init and that
// Restore brings back the default, once.
func TestRestore(t *testing.T) {
	if !off {
		t.Skip("GOGC or GOMEMLIMIT is set: init left the collector alone")
	}
	if got := debug.SetMemoryLimit(-1); got != MemoryLimit {
		t.Errorf("memory limit after init = %d, want %d", got, MemoryLimit)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent after init = %d, want -1 (off)", got)
	}
	Restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after Restore = %d, want 100", got)
	}
	want := int64(math.MaxInt64)
	if l, ok := cgroupMemoryLimit(cgroupRoot); ok {
		want = softLimit(l)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Errorf("memory limit after Restore = %d, want %d", got, want)
	}
	debug.SetGCPercent(50)
	Restore() // a second time: does nothing
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("a second Restore changed GC percent to %d", got)
	}
}
