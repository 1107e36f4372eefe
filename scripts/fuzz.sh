#!/bin/sh
# Runs every fuzz target for a few seconds each (FUZZTIME, default 5s):
# the parsers of what a sandbox sends (TLS ClientHello, HTTP Host, DNS
# queries), the agent's tar extraction, the template layers' extraction
# (an image's layers, a sandbox's upper layer), what a client sends to
# build a template (its build specification and Dockerfile), and the
# images an import reads (their archives, and the accounts files of the
# platform layer). The committed corpora under testdata/fuzz/ also run as
# plain tests in `go test`. Fails if a target finds a failing input; it is
# written to testdata/fuzz/<Target>/ and printed here, so that it can be
# committed as a regression seed.
set -eu
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}
# No minimizing: it would eat the time box (and cut a run short with a
# bogus "context deadline exceeded" when the time ends mid-way).
for target in \
  ./internal/egress:FuzzClientHello \
  ./internal/egress:FuzzClientHelloRoundTrip \
  ./internal/egress:FuzzHTTPHost \
  ./internal/egress:FuzzDNSQuery \
  ./internal/agent:FuzzExtract \
  ./internal/layer:FuzzImport \
  ./internal/tarx:FuzzName \
  ./internal/template/build:FuzzParseDockerfile \
  ./internal/template/build:FuzzDecode \
  ./internal/ociimage:FuzzReadFile \
  ./internal/ociimage:FuzzPlatformLayer; do
  pkg=${target%%:*}
  name=${target##*:}
  echo "==> fuzz $name ($pkg, $fuzztime)"
  log=$(mktemp)
  tries=0
  while :; do
    tries=$((tries + 1))
    if go test -count=1 -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime 0 "$pkg" >"$log" 2>&1; then
      cat "$log"
      break
    fi
    cat "$log"
    inputs=$(git status --porcelain --untracked-files=all -- "$pkg/testdata/fuzz/$name" | awk '{print $2}')
    # Go's fuzzer can end a run with "context deadline exceeded" when the
    # time box closes while a worker is busy, with no failing input: that
    # run is tried once more. A failing input always fails the script.
    if [ -z "$inputs" ] && [ "$tries" -lt 2 ] && grep -q "context deadline exceeded" "$log"; then
      echo "(the time box closed under a busy worker, with no failing input: once more)"
      continue
    fi
    for f in $inputs; do
      echo "--- failing input $f:"
      cat "$f"
    done
    rm -f "$log"
    exit 1
  done
  rm -f "$log"
done
