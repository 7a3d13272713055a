// Package roottest is how a test says it needs root (network namespaces,
// veth pairs, nftables): on a developer's machine without root it is
// skipped, and in CI, where every test must run, it fails saying why.
package roottest

import (
	"os"
	"testing"
)

// Require skips t when the process is not root, or fails it when the
// CI environment variable is "true": CI must run what needs root, and a
// silent skip there would leave a part untested. why says what needs root.
func Require(t testing.TB, why string) {
	t.Helper()
	switch decide(os.Geteuid(), os.Getenv("CI")) {
	case fail:
		t.Fatalf("%s needs root, and CI=true: run the tests as root", why)
	case skip:
		t.Skipf("%s needs root (CI=true makes this a failure)", why)
	}
}

type verdict int

const (
	run verdict = iota
	skip
	fail
)

func decide(euid int, ci string) verdict {
	switch {
	case euid == 0:
		return run
	case ci == "true":
		return fail
	default:
		return skip
	}
}
