#!/bin/sh
# Makes the Python virtual environment the SDK's tests run in: the system
# python3, the pinned packages of sdk/python/requirements-test.txt and the
# SDK itself (editable, from this checkout). Idempotent and fast when done:
# a stamp in the environment records what it was made from (the
# requirements, pyproject.toml, the checkout's path, the interpreter), and
# only a change remakes it. Prints the environment's path last, on stdout;
# progress goes to stderr.
#
#   WITHRUNTIME_PYENV   where the environment lives (default /var/cache/withruntime/pyenv)
set -eu
cd "$(dirname "$0")/.."
root=$(pwd -P)
venv=${WITHRUNTIME_PYENV:-/var/cache/withruntime/pyenv}
req=sdk/python/requirements-test.txt
python=/usr/bin/python3

say() { echo "==> $*" >&2; }

mkdir -p "$(dirname "$venv")"
# Two runs at once (a developer and CI) would install into one directory
# together: the second waits for the first, then finds the stamp current.
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

stamp=$( { cat "$req" sdk/python/pyproject.toml; echo "$root"; "$python" -VV; } | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.withruntime-stamp" 2>/dev/null)" = "$stamp" ]; then
  say "python environment $venv is current"
  echo "$venv"
  exit 0
fi

if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  say "installing python3-venv"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
fi

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c '' 2>/dev/null; then
  say "making the python environment $venv"
  rm -rf "$venv"
  if ! "$python" -m venv "$venv" >&2; then
    # Debian's python3 has venv but ensurepip only with python3-venv.
    say "installing python3-venv"
    rm -rf "$venv"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    "$python" -m venv "$venv" >&2
  fi
fi
rm -f "$venv/.withruntime-stamp"

say "installing the pinned test packages ($req)"
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r "$req" >&2

say "installing the SDK from $root/sdk/python (editable)"
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off --no-deps -e sdk/python >&2

echo "$stamp" >"$venv/.withruntime-stamp"
say "python environment ready"
echo "$venv"
