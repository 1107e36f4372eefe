#!/bin/sh
# Runs the whole test suite: the host set-up first (as scripts/up.sh does),
# then every Go package, and the Python and TypeScript SDKs against a real
# server.
# Run as root from the project's checkout; CI calls exactly this.
set -eu
cd "$(dirname "$0")/.."

./scripts/up.sh
# up.sh's command started the local daemon: the daemon tests need the
# default address free.
withruntime daemon stop

echo "==> Python test environment (pinned frameworks in a virtual environment)"
PYENV="$(./scripts/pyenv.sh)"

echo "==> PostgreSQL for the store suite and the cluster tier (a private server on 127.0.0.1:55432, stopped on exit)"
./scripts/postgres.sh start
trap './scripts/postgres.sh stop' EXIT
WITHRUNTIME_TEST_POSTGRES="$(./scripts/postgres.sh url)"
export WITHRUNTIME_TEST_POSTGRES

echo "==> tmux (test/e2e's TestShellUnderTmux types into the CLI's terminal through it)"
if ! command -v tmux >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi

echo "==> chromium (test/e2e's TestPreview drives Debian's headless chromium to a sandbox's preview; never a downloaded build)"
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "==> web console (internal/console/assets rebuilt from console/'s pinned packages: the committed bundle must match byte for byte)"
./scripts/console-build.sh --check

# Where tests leave what a person looks at afterwards (test/e2e's
# TestConsole: screenshots of the web console).
WITHRUNTIME_TEST_ARTIFACTS="${WITHRUNTIME_TEST_ARTIFACTS:-/tmp/withruntime-test-artifacts}"
export WITHRUNTIME_TEST_ARTIFACTS

echo "==> go vet"
go vet ./...

# The packages with concurrency run once, under the race detector; every
# other package once without it.
RACE_PKGS="$(go list ./internal/manager/ ./internal/store/ ./internal/httpapi/ \
  ./internal/egress/ ./internal/agent/ ./internal/agentlink/ ./internal/network/ ./internal/server/ \
  ./internal/backend/gvisor/ ./client/ ./internal/e2bcompat/ ./internal/selfcall/ ./internal/mcptools/ \
  ./internal/cluster/ ./internal/node/ ./internal/noderpc/ ./internal/clusterpki/ ./internal/membudget/ \
  ./internal/admission/ ./internal/accounts/ ./internal/templates/ ./internal/layer/ ./internal/webhooks/ \
  ./internal/volume/)"

echo "==> go test"
# Two cores: run packages one at a time so the gVisor suites do not starve
# each other.
# shellcheck disable=SC2046 # one word per package
go test -p 1 -timeout 40m $(go list ./... | grep -vxF "$RACE_PKGS")

echo "==> go test -race (the packages with concurrency)"
# shellcheck disable=SC2086 # one word per package
go test -race -count=1 -p 1 -timeout 20m $RACE_PKGS

echo "==> deployment files (Kubernetes manifests decoded strictly, systemd units verified)"
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
(cd deploy && go vet ./... && CI=true go test -count=1 ./...)

echo "==> fuzz (seconds per target; the committed corpora also ran in go test)"
./scripts/fuzz.sh

echo "==> Python SDK"
# The session starts its own server (the withruntime that up.sh installed).
# The frameworks (smolagents, LangChain, OpenAI Agents, MCP) come from the
# environment; under CI=true a skipped test fails the run.
CI=true "$PYENV/bin/python" -m pytest -q -rs sdk/python/tests

echo "==> TypeScript SDK and agent tools (node --test against a real server)"
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
(cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error && WITHRUNTIME_CLI="$(command -v withruntime)" CI=true npm test)

echo "==> E2B's own JavaScript SDK and code interpreter, unmodified, against --e2b-listen"
(cd test/e2b-js && npm ci --no-audit --no-fund --loglevel=error && WITHRUNTIME_CLI="$(command -v withruntime)" CI=true npm test)
