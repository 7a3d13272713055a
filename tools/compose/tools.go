//go:build tools

// Package compose records the command that build.sh builds, so that `go
// mod tidy` in this module keeps its dependencies. It is never compiled.
package compose

import _ "github.com/docker/compose/v2/cmd"
