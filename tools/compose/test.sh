#!/usr/bin/env bash
# `make test-compose`: runs docs/install.md's Docker Compose steps for real
# and checks that a binding's credentials open the database from the host.
#
# The Docker engine: the one DOCKER_HOST (or the default socket) names when
# it answers. Otherwise, as root with dockerd installed, a private one in a
# network namespace of its own, so that its iptables rules (it sets the
# FORWARD policy to DROP) and published ports stay out of the host's; the
# steps' host-side commands then run in that namespace, which is the host
# as far as the published ports go. Without either it fails, saying why.
#
# Compose v2 is built from the Go module proxy (tools/compose/build.sh) and
# used as the docker CLI's plugin. postgres:17 is pulled when a registry
# serves it, else built from Debian's packages (postgres-image.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/bin
work=$(mktemp -d /tmp/bindery-compose.XXXXXX)
chmod 0755 "$work"
ns="" dockerd_pid="" began=$SECONDS
step() { echo "test-compose: $* ($((SECONDS - began))s)"; }
fail() { echo "test-compose: FAIL: $*" >&2; exit 1; }

cleanup() {
	set +e
	if [[ -f $work/project/docker-compose.yaml ]]; then
		(cd "$work/project" && docker compose down -v --remove-orphans >/dev/null 2>&1)
	fi
	if [[ -n $dockerd_pid ]]; then
		kill "$dockerd_pid" 2>/dev/null
		for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
		kill -9 "$dockerd_pid" 2>/dev/null
		grep -q " $work/" /proc/mounts && awk -v w="$work/" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | xargs -r umount -l
	fi
	[[ -n $ns ]] && ip netns delete "$ns" 2>/dev/null
	rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work"; }
}
trap cleanup EXIT

# host runs a command where the published ports are: here, or in the
# private engine's network namespace.
host() { if [[ -n $ns ]]; then nsenter --net="/run/netns/$ns" "$@"; else "$@"; fi; }

command -v docker >/dev/null || fail "no docker command line: install docker.io (Debian) or Docker's packages"
if docker info >/dev/null 2>&1; then
	step "using the Docker engine at ${DOCKER_HOST:-the default socket}"
elif [[ $(id -u) == 0 ]] && command -v dockerd >/dev/null; then
	ns=bindery-compose-$$
	ip netns add "$ns" || fail "cannot make a network namespace for a private Docker engine"
	ip netns exec "$ns" ip link set lo up
	export DOCKER_HOST=unix://$work/docker.sock
	# nsenter, not `ip netns exec`, which mounts a fresh /sys without the
	# cgroup hierarchies dockerd needs.
	nsenter --net="/run/netns/$ns" dockerd --data-root "$work/data" --exec-root "$work/exec" \
		--pidfile "$work/docker.pid" -H "$DOCKER_HOST" >"$work/dockerd.log" 2>&1 &
	dockerd_pid=$!
	for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; kill -0 $dockerd_pid 2>/dev/null || break; sleep 0.5; done
	docker info >/dev/null 2>&1 || fail "dockerd did not start: $(grep -E 'level=(error|fatal)|failed' "$work/dockerd.log" | tail -3)"
	step "started a private Docker engine ($(docker version -f '{{.Server.Version}}')) in network namespace $ns"
else
	fail "no Docker engine answers (docker info: $(docker info 2>&1 | grep -m1 -iE 'cannot|error')), and none can be started here (needs root and dockerd: apt-get install docker.io)"
fi

"$here/build.sh"
mkdir -p "$work/config/cli-plugins"
ln -s "$bin/docker-compose" "$work/config/cli-plugins/docker-compose"
export DOCKER_CONFIG=$work/config
step "$(docker compose version)"

(cd "$root" && make -s build image >/dev/null)
docker load -i "$root/dist/bindery.tar" >/dev/null
step "loaded Bindery's image"
if docker pull -q postgres:17 >/dev/null 2>&1; then
	step "pulled postgres:17"
else
	export BINDERY_POSTGRES_IMAGE=bindery.test/postgres:debian
	# Kept in bin/ once built: a private engine's images go with it.
	saved=$bin/postgres-debian.tar
	if ! docker image inspect "$BINDERY_POSTGRES_IMAGE" >/dev/null 2>&1; then
		if [[ -f $saved ]]; then
			docker load -i "$saved" >/dev/null
			step "no registry serves postgres:17: loaded $BINDERY_POSTGRES_IMAGE from $saved"
		else
			step "no registry serves postgres:17: building $BINDERY_POSTGRES_IMAGE from Debian's packages"
			"$here/postgres-image.sh" "$BINDERY_POSTGRES_IMAGE"
			docker save -o "$saved.tmp" "$BINDERY_POSTGRES_IMAGE" && mv "$saved.tmp" "$saved"
		fi
	fi
fi

mkdir -p "$work/project" "$work/home"
cp "$root/docker-compose.yaml" "$work/project/"
cd "$work/project"
export PATH=$bin:$PATH XDG_CONFIG_HOME=$work/home

# docs/install.md, "Container image and Docker Compose", step by step.
umask 077
cat >.env <<EOF
POSTGRES_PASSWORD=$(openssl rand -hex 24)
BINDERY_ENCRYPTION_KEY=$(openssl rand -base64 32)
BINDERY_BROKER_PASSWORD=$(openssl rand -hex 24)
EOF
umask 022
up=$SECONDS
docker compose up -d --wait --wait-timeout 180 || { docker compose ps; docker compose logs --tail 20; fail "docker compose up"; }
step "every service healthy $((SECONDS - up))s after docker compose up"
docker compose run --rm catalog token create --role admin | host bindery login http://127.0.0.1:8080
grep BINDERY_BROKER_PASSWORD .env | cut -d= -f2 | host bindery brokers register bindery http://postgres:8081 -u bindery
docker compose cp apiserver:/var/lib/bindery/apiserver/kubeconfig bindery.kubeconfig
for _ in $(seq 60); do
	host kubectl --kubeconfig bindery.kubeconfig get clusterserviceclasses 2>/dev/null | grep -q postgresql && break
	sleep 1
done
host kubectl --kubeconfig bindery.kubeconfig get clusterserviceclasses
host kubectl --kubeconfig bindery.kubeconfig get clusterserviceclasses | grep -q postgresql || fail "the broker's classes never appeared"
prov=$SECONDS
host bindery provision db -c postgresql -p small --wait
host bindery bind app --instance db --wait
step "provisioned and bound in $((SECONDS - prov))s"

# The credentials, as an application on the host uses them.
uri=$(host bindery credentials app -o json | sed -n 's/.*"uri": *"\([^"]*\)".*/\1/p')
[[ $uri == postgres*://*@127.0.0.1:* ]] || fail "the binding's uri ${uri%%:*}://...@${uri#*@} does not name 127.0.0.1"
got=$(host psql "$uri" -XtAc 'SELECT current_user') || fail "psql with the binding's credentials, from the host"
step "an application on the host connects with the binding's credentials (as $got)"
step "PASS in $((SECONDS - began))s"
echo "1 passed, 0 failed"
