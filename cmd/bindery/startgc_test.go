package main

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestCLICollectsNoGarbage checks that a client command runs without a
// single garbage collection, package initialisation included
// (internal/startgc: without it, four ran before main).
func TestCLICollectsNoGarbage(t *testing.T) {
	t.Parallel()
	gc := regexp.MustCompile(`(?m)^gc \d+ @`)
	cmd := exec.Command(os.Args[0], "--help")
	cmd.Env = []string{runMainEnv + "=1", "HOME=" + t.TempDir(), "GODEBUG=gctrace=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bindery --help: %v\n%s", err, out)
	}
	if n := len(gc.FindAll(out, -1)); n > 0 {
		t.Errorf("bindery --help collected garbage %d times:\n%s", n, gc.FindAll(out, -1))
	}

}
