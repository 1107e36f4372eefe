#!/bin/sh
# Builds every npm package of the project and writes its tarball into OUTDIR:
# withruntime-VERSION.tgz (the TypeScript SDK and the npx launcher) and one
# withruntime-cli-PLATFORM-VERSION.tgz per platform (the Go CLI, statically
# built). All of them take the version of sdk/typescript/package.json.
# The build runs in a scratch copy of sdk/typescript, so the checkout's
# node_modules and dist stay as they are; running it again rewrites the
# same tarballs.
#
# Usage: scripts/npm-pack.sh OUTDIR
# NPM_PACK_PLATFORMS="linux-x64 ..." builds only those platform packages
# (for a quicker local try; CI builds all five).
set -eu

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
sdk=$root/sdk/typescript

# npm's OS and CPU names with Go's for each platform package.
platforms="linux-x64:linux/amd64 linux-arm64:linux/arm64 darwin-x64:darwin/amd64 darwin-arm64:darwin/arm64 win32-x64:windows/amd64"

field() { node -p "require(process.argv[1]).$1" "$sdk/package.json"; }
version=$(field version)
license=$(field license)
echo "==> withruntime $version into $out"

work=$(mktemp -d "${TMPDIR:-/tmp}/withruntime-npm-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "==> TypeScript: npm ci && npm run build"
mkdir -p "$work/withruntime"
(cd "$sdk" && tar -cf - --exclude=./node_modules --exclude=./dist --exclude=./dist-test \
  --exclude='./*.tgz' --exclude='*.tsbuildinfo' .) | (cd "$work/withruntime" && tar -xf -)
(cd "$work/withruntime" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run --silent build)
rm -rf "$work/withruntime/node_modules"
# The checkout's package.json names no platform package: those of a new
# version are not published yet, so its lock file could not hold them and
# npm ci would refuse them. The packed package gets one optional dependency
# per platform here, at the same version, and loses its prepare script.
node -e '
  const fs = require("fs");
  const [file, version, ...names] = process.argv.slice(1);
  const j = JSON.parse(fs.readFileSync(file, "utf8"));
  j.optionalDependencies = Object.fromEntries(names.map((n) => ["@withruntime/cli-" + n, version]));
  // prepare builds dist/ in a checkout; the tarball ships dist/, and npm
  // would list the script among those an install may not run.
  delete j.scripts.prepare;
  fs.writeFileSync(file, JSON.stringify(j, null, 2) + "\n");
' "$work/withruntime/package.json" "$version" $(for p in $platforms; do printf '%s ' "${p%%:*}"; done)

echo "==> Go CLI for each platform"
failed=""
for p in $platforms; do
  npmname=${p%%:*}
  case " ${NPM_PACK_PLATFORMS:-$npmname} " in *" $npmname "*) ;; *) continue ;; esac
  goos=${p#*:}; goos=${goos%/*}
  goarch=${p#*/}
  dir=$work/cli-$npmname
  exe=withruntime
  [ "$goos" = windows ] && exe=withruntime.exe
  mkdir -p "$dir/bin"
  echo "    $npmname (GOOS=$goos GOARCH=$goarch)"
  if ! (cd "$root" && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
      -ldflags "-s -w -X main.version=v$version" -o "$dir/bin/$exe" ./cmd/withruntime) \
      >"$work/build-$npmname.log" 2>&1; then
    echo "    FAILED: $npmname" >&2
    sed 's/^/      /' "$work/build-$npmname.log" >&2
    failed="$failed $npmname"
    continue
  fi
  os=${npmname%-*}; cpu=${npmname#*-}
  for f in package.json README.md; do
    sed -e "s|@PLATFORM@|$npmname|g" -e "s|@VERSION@|$version|g" -e "s|@LICENSE@|$license|g" \
      -e "s|@OS@|$os|g" -e "s|@CPU@|$cpu|g" "$sdk/platform/$f.tmpl" >"$dir/$f"
  done
done
if [ -n "$failed" ]; then
  echo "error: the Go CLI did not build for:$failed (no tarball written)" >&2
  exit 1
fi

echo "==> npm pack"
for d in "$work/withruntime" "$work"/cli-*; do
  # --ignore-scripts: dist/ is built already, without the dev dependencies
  # removed above nothing could build it again.
  tgz=$(cd "$d" && npm pack --silent --ignore-scripts --pack-destination "$out")
  echo "    $out/$tgz ($(wc -c <"$out/$tgz" | tr -d ' ') bytes)"
done
