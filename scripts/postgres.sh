#!/bin/bash
# A private PostgreSQL 15 for tests: start | stop | url.
#
# It is its own server (data in /var/tmp/withruntime-pg, port 55432,
# listening on 127.0.0.1 only, its Unix socket in its own directory), never
# Debian's system cluster, which a machine may also run and which this
# leaves alone. Tests reach it as the role withruntime (CREATEDB, a random
# password kept in /var/tmp/withruntime-pg/password) through the URL that
# `url` prints; each test makes and drops its own database.
#
# It is tuned for tests, not for data that matters: fsync is off.
# Run as root (it installs the package if missing and runs the server as
# the user postgres).
set -euo pipefail

BIN=/usr/lib/postgresql/15/bin
BASE=/var/tmp/withruntime-pg
DATA="$BASE/data"
SOCK="$BASE/sock"
PWFILE="$BASE/password"
LOGDIR="$BASE/log"
LOG="$LOGDIR/server.log"
PORT=55432
ROLE=withruntime
DB=withruntime

usage() {
	echo "usage: $0 start|stop|url" >&2
	exit 2
}

# as_pg runs a command as the user postgres, from a directory it may read.
as_pg() {
	(cd "$BASE" && runuser -u postgres -- "$@")
}

install_pg() {
	if [ -x "$BIN/initdb" ]; then
		return
	fi
	echo "postgres.sh: installing postgresql-15" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends postgresql-15 >&2; then
		apt-get update >&2
		apt-get install -y --no-install-recommends postgresql-15 >&2
	fi
}

password() {
	if [ ! -s "$PWFILE" ]; then
		# Hex: nothing in it needs quoting in a URL or in SQL.
		(umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$PWFILE.tmp" && mv "$PWFILE.tmp" "$PWFILE")
	fi
	chmod 0600 "$PWFILE"
	cat "$PWFILE"
}

init() {
	mkdir -p "$BASE"
	chmod 0755 "$BASE"
	password >/dev/null
	if [ -f "$DATA/PG_VERSION" ]; then
		return
	fi
	rm -rf "$DATA" "$SOCK" "$LOGDIR"
	install -d -o postgres -g postgres -m 0700 "$DATA" "$SOCK" "$LOGDIR"
	as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 --auth-local=peer --auth-host=scram-sha-256 >/dev/null
	cat >>"$DATA/postgresql.conf" <<EOF

# withruntime test server (scripts/postgres.sh)
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK'
password_encryption = 'scram-sha-256'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
	cat >"$DATA/pg_hba.conf" <<EOF
# withruntime test server: the superuser only over its own socket, every
# other role over 127.0.0.1 with a password.
local all postgres peer
host all all 127.0.0.1/32 scram-sha-256
EOF
	chown postgres:postgres "$DATA/postgresql.conf" "$DATA/pg_hba.conf"
}

running() {
	[ -f "$DATA/PG_VERSION" ] && as_pg "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1
}

# setup makes the role and its database, or sets the role's password
# again: idempotent.
setup() {
	local pw
	pw="$(password)"
	as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres -d postgres -v pw="$pw" >/dev/null <<'EOF'
SELECT format('CREATE ROLE withruntime LOGIN CREATEDB PASSWORD %L', :'pw')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'withruntime') \gexec
SELECT format('ALTER ROLE withruntime LOGIN CREATEDB PASSWORD %L', :'pw') \gexec
SELECT 'CREATE DATABASE withruntime OWNER withruntime'
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'withruntime') \gexec
EOF
}

start() {
	install_pg
	init
	if ! running; then
		# A server killed hard leaves its pid file: pg_ctl checks whether
		# that process still lives before it refuses to start.
		# No autovacuum: tests make and drop databases by the hundred, and
		# DROP DATABASE ... WITH (FORCE) by a role that is no superuser
		# fails while an autovacuum worker is in the database.
		as_pg "$BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 -s -o "-c autovacuum=off" >&2 || {
			echo "postgres.sh: the server did not start; its log:" >&2
			tail -n 30 "$LOG" >&2 || true
			exit 1
		}
	fi
	setup
}

stop() {
	if running; then
		as_pg "$BIN/pg_ctl" stop -D "$DATA" -m fast -w -t 60 -s >&2
	fi
}

url() {
	if [ ! -s "$PWFILE" ]; then
		echo "postgres.sh: no server made yet; run $0 start" >&2
		exit 1
	fi
	echo "postgres://$ROLE:$(cat "$PWFILE")@127.0.0.1:$PORT/$DB?sslmode=disable"
}

[ $# -eq 1 ] || usage
case "$1" in
start) start ;;
stop) stop ;;
url) url ;;
*) usage ;;
esac
