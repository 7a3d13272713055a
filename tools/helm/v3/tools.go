//go:build tools

// Package helm records the command that ../build.sh builds as bin/helm3, so
// that `go mod tidy` in this module keeps its dependencies. It is never
// compiled.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
