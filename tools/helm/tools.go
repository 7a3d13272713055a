//go:build tools

// Package helm records the command that build.sh builds, so that `go mod
// tidy` in this module keeps its dependencies. It is never compiled.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
