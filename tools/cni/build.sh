#!/usr/bin/env bash
# Builds the reference CNI plugins that bindery-cni's tests chain it after —
# bridge and host-local from containernetworking/plugins v1.9.1, which speak
# CNI spec 1.1.0 (the distribution's packaged plugins stop at 1.0.0) — into
# ./bin/cni (or $BINDERY_CNI_BIN). A plugin is rebuilt only when it is missing
# or older than tools/cni/go.mod or go.sum, so a second run does nothing.
# With --check it builds nothing and only loads the plugins' packages with
# -mod=readonly, which fails when go.mod or go.sum lacks a line they need.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${BINDERY_CNI_BIN:-$root/bin/cni}
mkdir -p "$bin"
cd "$here"

export GOFLAGS="-mod=mod -buildvcs=false"

targets=(
	"bridge=github.com/containernetworking/plugins/plugins/main/bridge"
	"host-local=github.com/containernetworking/plugins/plugins/ipam/host-local"
)

if [[ ${1:-} == --check ]]; then
	pkgs=()
	for t in "${targets[@]}"; do pkgs+=("${t#*=}"); done
	go list -mod=readonly -deps "${pkgs[@]}" >/dev/null
	exit 0
fi

stale() {
	[[ ! -x "$bin/$1" || "$here/go.mod" -nt "$bin/$1" || "$here/go.sum" -nt "$bin/$1" ]]
}

exec 9>"$bin/.cni-build.lock"
flock 9

for t in "${targets[@]}"; do
	name=${t%%=*} pkg=${t#*=}
	if ! stale "$name"; then continue; fi
	echo "cni: building $name ($pkg) into $bin"
	go build -trimpath -ldflags "-s -w" -o "$bin/.$name.tmp" "$pkg"
	# Renamed only when complete, so an interrupted build never looks up to date.
	mv -f "$bin/.$name.tmp" "$bin/$name"
done
