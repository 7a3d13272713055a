#!/usr/bin/env bash
# Builds a PostgreSQL image from Debian's packages, for `make test-compose`
# where no image registry serves postgres:17: debootstrap makes a minimal
# Debian root with postgresql, and `docker import` turns it into the image
# IMAGE (default bindery.test/postgres:debian). Its entrypoint does what the
# official image's does for docker-compose.yaml: on an empty PGDATA it runs
# initdb with POSTGRES_USER's password (scram-sha-256 for TCP, trust on the
# socket) and creates POSTGRES_DB; then it runs the command (postgres and
# its flags) as the postgres user. Needs root, debootstrap and a Docker
# engine (DOCKER_HOST).
set -euo pipefail

image=${1:-bindery.test/postgres:debian}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "postgres-image: debootstrap $suite with postgresql from $mirror"
debootstrap --variant=minbase --include=postgresql,locales-all "$suite" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -20 "$work/debootstrap.log" >&2
	exit 1
}
bindir=$(ls -d "$work"/root/usr/lib/postgresql/*/bin | head -1)
bindir=${bindir#"$work/root"}
# The cluster Debian's package made is not used: the entrypoint makes one
# in PGDATA, as the official image does.
rm -rf "$work"/root/var/lib/postgresql/* "$work"/root/etc/postgresql/* "$work"/root/var/cache/apt/archives/*.deb
mkdir -p "$work/root/var/run/postgresql"
chroot "$work/root" chown postgres:postgres /var/run/postgresql /var/lib/postgresql
cat >"$work/root/usr/local/bin/docker-entrypoint.sh" <<'ENTRY'
#!/bin/sh
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export PGDATA
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 0700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
	pw=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
	initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f "$pw"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
	if [ "$POSTGRES_DB" != postgres ]; then
		createdb -h /var/run/postgresql -U "$POSTGRES_USER" "$POSTGRES_DB"
	fi
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-}" = postgres ]; then
	shift
	exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
fi
exec "$@"
ENTRY
chmod 0755 "$work/root/usr/local/bin/docker-entrypoint.sh"
echo "postgres-image: importing $image"
tar -C "$work/root" -c . | docker import \
	--change "ENV PATH=$bindir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
	--change "ENV PGDATA=/var/lib/postgresql/data" \
	--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
	--change 'CMD ["postgres"]' \
	- "$image" >/dev/null
echo "postgres-image: $image built"
