#!/usr/bin/env bash
# Builds Docker Compose v2 from the Go module proxy into ./bin/docker-compose
# (or $BINDERY_KUBE_BIN), for `make test-compose`. Rebuilt only when missing
# or older than this module's go.mod or go.sum.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${BINDERY_KUBE_BIN:-$root/bin}
out=$bin/docker-compose
mkdir -p "$bin"
cd "$here"
export GOFLAGS="-mod=mod -buildvcs=false"

if [[ -x $out && ! $here/go.mod -nt $out && ! $here/go.sum -nt $out ]]; then
	exit 0
fi
exec 9>"$bin/.compose-build.lock"
flock 9
version=$(go list -m -f '{{.Version}}' github.com/docker/compose/v2)
echo "compose: building docker-compose $version into $bin (a cold build takes minutes)"
start=$SECONDS
nice -n 10 go build -trimpath \
	-ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" \
	-o "$bin/.docker-compose.tmp" github.com/docker/compose/v2/cmd
mv -f "$bin/.docker-compose.tmp" "$out"
echo "compose: built docker-compose $version in $((SECONDS - start))s"
