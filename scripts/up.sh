#!/bin/sh
# Brings up withruntime on this host and runs its main job: a sandbox
# answering a command. Idempotent: a second run reuses what the first built.
# Run as root from the project's checkout.
set -eu
cd "$(dirname "$0")/.."

echo "==> building withruntime and the sandbox agent"
mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/withruntime ./cmd/withruntime
install -m 0755 bin/withruntime /usr/local/bin/withruntime

echo "==> setting up the host (packages, runsc, image)"
withruntime setup --source .

echo "==> the SDK packages the server serves at /sdk/ (withruntime sdk python|typescript)"
scripts/sdk-build.sh /var/cache/withruntime/sdk || echo "warning: the SDK packages were not built; /sdk/ serves what it held" >&2

echo "==> a sandbox answering a command"
withruntime sandbox run -- python3 -c 'print(6 * 7)'
