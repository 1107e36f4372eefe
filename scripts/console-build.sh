#!/bin/sh
# Builds the web console (console/, see internal/console) into
# internal/console/assets/, which the server embeds: the page, one script
# and one style sheet, bundled by esbuild from the pinned packages of
# console/package-lock.json. The built files are committed, so that a
# plain `go build` of a fresh checkout serves the console; this script
# rebuilds them after a change to console/.
#
#   scripts/console-build.sh          rebuild internal/console/assets/
#   scripts/console-build.sh --check  rebuild into a scratch folder and fail
#                                     unless it matches the committed files
#                                     byte for byte (scripts/test.sh runs it)
#
# Needs node and npm; the packages come from npm ci (the lock file's
# versions and integrity hashes).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/console
dest=$root/internal/console/assets
check=false
if [ "${1:-}" = "--check" ]; then
  check=true
fi

cd "$src"
# npm ci again when the lock file changed since the last install.
if [ ! -x node_modules/.bin/esbuild ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/withruntime-console.XXXXXX")
trap 'rm -rf "$out"' EXIT

# One script for the whole console, and one style sheet: xterm.js's with
# the console's own. No source maps, no build time or path in the output,
# so that a rebuild is the same bytes.
node_modules/.bin/esbuild src/main.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=none --charset=utf8 --log-level=warning --outfile="$out/console.js"
node_modules/.bin/esbuild src/console.css --bundle --minify --legal-comments=none \
  --charset=utf8 --log-level=warning --outfile="$out/console.css"
cp src/index.html "$out/index.html"

if $check; then
  for f in index.html console.js console.css; do
    if ! cmp -s "$out/$f" "$dest/$f"; then
      echo "internal/console/assets/$f is stale: run scripts/console-build.sh and commit it" >&2
      exit 1
    fi
  done
  echo "console assets are up to date"
else
  mkdir -p "$dest"
  for f in index.html console.js console.css; do
    cp "$out/$f" "$dest/$f"
  done
fi

# The size a server's binary carries, and a browser downloads (before
# compression), once.
total=0
for f in index.html console.js console.css; do
  n=$(wc -c <"$out/$f")
  total=$((total + n))
  echo "console: $f $n bytes"
done
echo "console: $total bytes in all"
