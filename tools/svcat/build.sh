#!/usr/bin/env bash
# Builds Service Catalog's own CLI, svcat v0.3.1, from the Go module proxy into
# ./bin/svcat (or $BINDERY_KUBE_BIN/svcat), so the tests can drive Bindery with
# the tool Service Catalog users already have. The module's sources are copied
# out of the module cache (which is read-only) and built in that copy with its
# own go.mod: nothing of it enters Bindery's module. Also prints nothing and
# does nothing when ./bin/svcat is already there.
#
# The same module holds the walkthrough manifests
# (contrib/examples/walkthrough) and svcat's golden outputs
# (cmd/svcat/testdata/output) that the tests compare against; they find them
# with `go mod download -json`.
set -euo pipefail

version=v0.3.1
module=github.com/kubernetes-sigs/service-catalog
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${BINDERY_KUBE_BIN:-$root/bin}
out=$bin/svcat

[[ -x $out ]] && exit 0
mkdir -p "$bin"
exec 9>"$bin/.svcat-build.lock"
flock 9
[[ -x $out ]] && exit 0

work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Outside any module, so that no go.mod or go.sum is touched.
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n $dir ]] || { echo "svcat: go mod download of $module@$version gave no directory" >&2; exit 1; }

cp -r "$dir" "$work/sc"
chmod -R u+w "$work/sc"
# Its vendor/ holds only modules.txt; resolve through the module proxy instead.
rm -rf "$work/sc/vendor"
echo "svcat: building $module@$version into $bin"
start=$SECONDS
(cd "$work/sc" && GOFLAGS="-mod=mod -buildvcs=false" nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin/.svcat.tmp" ./cmd/svcat)
mv -f "$bin/.svcat.tmp" "$out"
echo "svcat: built in $((SECONDS - start))s"
