#!/usr/bin/env bash
# Builds the Kubernetes control plane that Bindery's tests run against —
# kube-apiserver, kube-controller-manager, etcd and kubectl — from the Go
# module proxy into ./bin (or $BINDERY_KUBE_BIN). A binary is rebuilt only when
# it is missing or older than tools/kube/go.mod or go.sum, so a second run does
# nothing.
# The first build takes several minutes on 2 cores; later ones use the Go build cache.
#
# With --check it builds nothing: it only loads every package the binaries are
# built from with -mod=readonly (about 2 s), which fails when go.mod or go.sum
# lacks a line the build needs. `make test` runs it, so that the module cannot
# drift without the build noticing (building it is 5+ minutes).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${BINDERY_KUBE_BIN:-$root/bin}
mkdir -p "$bin"
cd "$here"

# Only the versions recorded in go.mod/go.sum are used; -mod=mod lets go build
# fill in go.sum lines it needs without a separate download step.
export GOFLAGS="-mod=mod -buildvcs=false"

# name=package for every binary this script owns.
targets=(
	"kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver"
	"kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager"
	"kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler"
	"kubelet=k8s.io/kubernetes/cmd/kubelet"
	"kubectl=k8s.io/kubernetes/cmd/kubectl"
	"etcd=go.etcd.io/etcd/server/v3"
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

todo=()
for t in "${targets[@]}"; do
	if stale "${t%%=*}"; then todo+=("$t"); fi
done
if ((${#todo[@]} == 0)); then
	echo "kube: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl and etcd in $bin are up to date"
	exit 0
fi

# Two builds of this size at once would only slow each other down.
exec 9>"$bin/.kube-build.lock"
flock 9

# Without these the binaries report v0.0.0-master, and kubectl warns about skew.
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean"
done

for t in "${todo[@]}"; do
	name=${t%%=*} pkg=${t#*=}
	# Another run may have built it while this one waited for the lock.
	if ! stale "$name"; then continue; fi
	echo "kube: building $name ($pkg) into $bin"
	start=$SECONDS
	nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg"
	# Renamed only when complete, so an interrupted build never looks up to date.
	mv -f "$bin/.$name.tmp" "$bin/$name"
	echo "kube: built $name in $((SECONDS - start))s"
done
