#!/usr/bin/env bash
# Builds Helm from the Go module proxy into ./bin (or $BINDERY_KUBE_BIN):
# bin/helm is Helm v4 (this module), bin/helm3 is Helm v3 (module v3/), so that
# the chart in deploy/helm/bindery is tested with both. A binary is rebuilt
# only when it is missing or older than its module's go.mod or go.sum, so a
# second run does nothing. A cold build takes about 6 minutes each on 2 cores;
# later ones use the Go build cache.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${BINDERY_KUBE_BIN:-$root/bin}
mkdir -p "$bin"

export GOFLAGS="-mod=mod -buildvcs=false"

# name=module directory=module path
targets=(
	"helm=$here=helm.sh/helm/v4"
	"helm3=$here/v3=helm.sh/helm/v3"
)

stale() { # name dir
	[[ ! -x "$bin/$1" || "$2/go.mod" -nt "$bin/$1" || "$2/go.sum" -nt "$bin/$1" ]]
}

exec 9>"$bin/.helm-build.lock"
flock 9

for t in "${targets[@]}"; do
	IFS== read -r name dir module <<<"$t"
	if ! stale "$name" "$dir"; then continue; fi
	echo "helm: building $name ($module) into $bin (a cold build takes minutes)"
	start=$SECONDS
	version=$(cd "$dir" && go list -m -f '{{.Version}}' "$module")
	ldflags="-s -w -X $module/internal/version.version=$version"
	if [[ $module == helm.sh/helm/v3 ]]; then
		# The Kubernetes version `helm template` assumes and `helm lint`
		# checks deprecations against; Helm v3's own release build sets
		# it from its client-go (v4 reads it from the build info).
		minor=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)
		for pkg in pkg/chartutil pkg/lint/rules; do
			ldflags+=" -X $module/$pkg.k8sVersionMajor=1 -X $module/$pkg.k8sVersionMinor=$minor"
		done
	fi
	(cd "$dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.tmp" "$module/cmd/helm")
	# Renamed only when complete, so an interrupted build never looks up to date.
	mv -f "$bin/.$name.tmp" "$bin/$name"
	echo "helm: built $name $version in $((SECONDS - start))s"
done
