#!/usr/bin/env bash
# The whole test suite: formatting, vet, workflowcheck, then every Go test
# (unit, fuzz seeds, replay, integration on the real Temporal dev server).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache="${SWEEPFLOW_CACHE:-$HOME/.cache/sweepflow}"

"$root/scripts/install-temporal.sh"
export SWEEPFLOW_TEMPORAL_BIN="$root/bin/temporal"
# Tests read the shared reference data (GSM8K, InferenceX configs) in place.
export SWEEPFLOW_SHARED="${SWEEPFLOW_SHARED:-$(cd "$root/.." && pwd)/shared}"
export SWEEPFLOW_INFERENCEX="${SWEEPFLOW_INFERENCEX:-$SWEEPFLOW_SHARED/inferencex}"
export SWEEPFLOW_GSM8K_DIR="${SWEEPFLOW_GSM8K_DIR:-$SWEEPFLOW_SHARED/datasets/gsm8k}"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:" $unformatted >&2
  exit 1
fi

echo "== go vet"
go vet ./...

echo "== workflowcheck"
if [ ! -x "$cache/bin/workflowcheck" ]; then
  (cd /tmp && GOBIN="$cache/bin" GOFLAGS=-mod=mod go install go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0)
fi
"$cache/bin/workflowcheck" -show-pos ./workflows/...

echo "== go test"
go test -count=1 -timeout 25m "$@" ./...

# The compose stack test is its own module (Docker's libraries): only with an engine.
if docker info >/dev/null 2>&1; then (cd deploy/composetest && go test -count=1 -timeout 30m ./...)
else echo "compose stack test: skipped (no Docker engine)"; fi
