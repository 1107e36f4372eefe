#!/bin/sh
# Regenerates the Go code of the E2B-compatible API's protocol buffers
# (internal/e2bcompat/proto/<pkg>/<pkg>.proto): the messages with
# protoc-gen-go, the Connect handlers with protoc-gen-connect-go, both at
# the versions go.mod pins (run with `go run`, so nothing else is
# installed). For developers only: the generated files are committed and
# the build never runs this. protoc comes from Debian's protobuf-compiler
# (with libprotobuf-dev for the well-known types), installed with apt-get
# when it is missing.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd -P)

if ! command -v protoc >/dev/null 2>&1 || [ ! -f /usr/include/google/protobuf/timestamp.proto ]; then
  echo "==> installing protobuf-compiler" >&2
  sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y protobuf-compiler libprotobuf-dev >&2 ||
    { $sudo apt-get update >&2 && $sudo apt-get install -y protobuf-compiler libprotobuf-dev >&2; }
fi

# protoc wants plugin executables: these wrappers run the pinned plugins.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for p in google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go; do
  printf '#!/bin/sh\nexec go run -C "%s" %s "$@"\n' "$root" "$p" >"$bin/${p##*/}"
  chmod +x "$bin/${p##*/}"
done

module=$(go list -m)
# Files are named relative to the proto directory (filesystem/filesystem.proto),
# the name the descriptors register under.
cd internal/e2bcompat/proto
for f in */*.proto; do
  echo "==> $f" >&2
  PATH="$bin:$PATH" protoc -I . -I /usr/include \
    --go_out="$root" --go_opt=module="$module" \
    --connect-go_out="$root" --connect-go_opt=module="$module" \
    "$f"
done
