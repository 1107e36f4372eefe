#!/bin/sh
# Builds the SDK packages a withruntime server serves at /sdk/ (see
# internal/sdkdist) into OUTDIR:
#
#   OUTDIR/python/withruntime_sdk-VERSION-py3-none-any.whl  the Python SDK
#   OUTDIR/npm/withruntime-VERSION.tgz                      the TypeScript SDK and npx launcher
#   OUTDIR/npm/withruntime-cli-PLATFORM-VERSION.tgz         the CLI, per platform (scripts/npm-pack.sh)
#
# Users then install from their own server, e.g.
#   pip install 'withruntime-sdk @ http://HOST:7878/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl'
#   npm install http://HOST:7878/sdk/npm/withruntime.tgz
# and `withruntime sdk python|typescript` prints the command for theirs.
#
# The build runs in scratch copies (the checkout is left as it is) and
# replaces OUTDIR's python/ and npm/ whole once both are built, so a server
# reading OUTDIR meanwhile sees the old packages or the new ones, and no
# older version stays behind. A part whose tool is missing (python3 with
# pip or venv; node and npm) is skipped with a warning, its old packages
# kept.
#
# Usage: scripts/sdk-build.sh OUTDIR (default /var/cache/withruntime/sdk)
# NPM_PACK_PLATFORMS="linux-x64 ..." builds only those CLI packages.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/var/cache/withruntime/sdk}
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/withruntime-sdk-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# replace moves the built folder $1 to $out/$2, in place of the old one.
replace() {
  rm -rf "$out/$2.old"
  if [ -e "$out/$2" ]; then
    mv "$out/$2" "$out/$2.old"
  fi
  mv "$1" "$out/$2"
  rm -rf "$out/$2.old"
}

echo "==> Python SDK wheel"
python=""
if python3 -m pip --version >/dev/null 2>&1; then
  python=python3
elif python3 -m venv "$work/venv" >/dev/null 2>&1; then
  python=$work/venv/bin/python
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Debian's python3 has venv but ensurepip only with python3-venv (as
  # scripts/pyenv.sh finds too).
  rm -rf "$work/venv"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2 &&
    python3 -m venv "$work/venv" >&2 && python=$work/venv/bin/python
fi
if [ -z "$python" ]; then
  echo "warning: python3 with pip (or venv) is missing: no Python wheel built (apt-get install python3-venv)" >&2
else
  mkdir -p "$work/python-src" "$work/python"
  (cd "$root/sdk/python" && tar -cf - --exclude='./build' --exclude='*.egg-info' --exclude='__pycache__' \
    --exclude='./tests' --exclude='./.pytest_cache' .) | (cd "$work/python-src" && tar -xf -)
  "$python" -m pip wheel --disable-pip-version-check --progress-bar off --quiet --no-deps \
    -w "$work/python" "$work/python-src" >&2
  ls "$work/python"/withruntime_sdk-*-py3-none-any.whl >/dev/null
  replace "$work/python" python
  echo "    $(ls "$out/python")"
fi

echo "==> npm packages"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "warning: node and npm are missing: no npm packages built" >&2
else
  "$root/scripts/npm-pack.sh" "$work/npm"
  replace "$work/npm" npm
fi
