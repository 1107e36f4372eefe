#!/bin/sh
# Runs the Python SDK's tests against a real server that this script starts
# on a free loopback port with a fresh data dir, and stops afterwards.
set -eu
cd "$(dirname "$0")/.."
data=$(mktemp -d)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
withruntime serve --listen "127.0.0.1:$port" --data-dir "$data" >"$data/server.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1 && break
  sleep 0.1
done
export WITHRUNTIME_BASE_URL="http://127.0.0.1:$port"
WITHRUNTIME_API_KEY=$(cat "$data/admin.key")
export WITHRUNTIME_API_KEY
export PYTHONPATH="$PWD/sdk/python${PYTHONPATH:+:$PYTHONPATH}"
/usr/bin/python3 -m pytest -q sdk/python/tests "$@"
