// Package version is Bindery's version, set when it is built:
//
//	go build -ldflags "-X github.com/bindery-dev/bindery/internal/version.version=$(tools/version.sh)"
//
// as make build, make image (tools/image) and the Dockerfile do. The API
// server reports it at /version, where kubectl version reads it.
package version

import (
	"fmt"
	"runtime/debug"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// LinkerVariable is the variable a build sets to the version, with
// -ldflags "-X LinkerVariable=v1.2.3".
const LinkerVariable = "github.com/bindery-dev/bindery/internal/version.version"

// version is set by the linker (-X); empty in a build without it.
var version string

// unset is the version of a build that was given none and has no module
// version either (go test, go run): a valid semantic version, which says
// it is no release.
const unset = "v0.0.0-unset"

// String is the version Bindery was built as: the one given to the
// linker, else the main module's version the Go toolchain recorded (a
// build of a tagged module with go install), else v0.0.0-unset.
func String() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return unset
}

// Parse checks that v is a semantic version with a leading v, as
// tools/version.sh writes them and Kubernetes clients expect.
func Parse(v string) (*utilversion.Version, error) {
	if len(v) < 2 || v[0] != 'v' {
		return nil, fmt.Errorf("version %q does not start with v and a number", v)
	}
	sv, err := utilversion.ParseSemantic(v)
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", v, err)
	}
	return sv, nil
}
