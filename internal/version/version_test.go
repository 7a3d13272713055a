package version_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/version"
)

// TestLinkerVariable: a build given the version with -X reports it; one
// given none reports v0.0.0-unset, a version kubectl can parse too.
func TestLinkerVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ldflags, want string }{
		{"-X " + version.LinkerVariable + "=v1.2.3-4-gabcdef012345+dirty", "v1.2.3-4-gabcdef012345+dirty"},
		{"", "v0.0.0-unset"},
	} {
		bin := filepath.Join(t.TempDir(), "print")
		build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", tc.ldflags, "-o", bin, "./testdata/print")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("built with %q: %q, want %q", tc.ldflags, got, tc.want)
		}
		if _, err := version.Parse(tc.want); err != nil {
			t.Error(err)
		}
	}
}

// TestScript: tools/version.sh gives a version Parse accepts.
func TestScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	out, err := exec.Command("../../tools/version.sh").Output()
	if err != nil {
		t.Fatalf("tools/version.sh: %v", err)
	}
	v := strings.TrimSpace(string(out))
	if _, err := version.Parse(v); err != nil {
		t.Errorf("tools/version.sh printed %q: %v", v, err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{
		"v1.2.3": true, "v0.0.0-20260102150405-abcdef012345": true, "v1.2.3-4-gabcdef012345+dirty": true,
		"1.2.3": false, "b7f502b": false, "v0.0.0-master+$Format:%H$": false, "": false,
	} {
		if _, err := version.Parse(v); (err == nil) != ok {
			t.Errorf("Parse(%q): %v", v, err)
		}
	}
}
