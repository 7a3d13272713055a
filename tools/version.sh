#!/usr/bin/env bash
# Prints Bindery's version, for `go build -ldflags "-X
# github.com/bindery-dev/bindery/internal/version.version=$(tools/version.sh)"`
# (make build, make image, the Dockerfile's VERSION argument). Always a
# semantic version, as Kubernetes clients parse the one the API server
# reports (`kubectl version`):
#
#   v1.2.3                          the commit tagged v1.2.3
#   v1.2.3-4-gabcdef012345          4 commits after tag v1.2.3
#   v0.0.0-20260102150405-abcdef012345   before the first tag: the commit's
#                                   time (UTC) and hash, as Go's pseudo-versions
#
# with "+dirty" appended when the work tree has uncommitted changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "version: not a git work tree; pass the version explicitly (VERSION=...)" >&2
	exit 1
fi
if v=$(git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --abbrev=12 2>/dev/null); then
	:
else
	v="v0.0.0-$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)-$(git rev-parse --short=12 HEAD)"
fi
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	v+="+dirty"
fi
echo "$v"
