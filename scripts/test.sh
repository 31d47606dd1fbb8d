#!/usr/bin/env bash
# The whole test suite: formatting, vet, workflowcheck, then every Go test
# (unit, fuzz seeds, replay, integration on the real Temporal dev server).
#
# It does its own set-up: as root on Debian or Ubuntu it installs the system
# packages the tests use (Slurm, munge, Chromium, PostgreSQL) when missing;
# without root, a test whose tool is missing skips with one line naming the
# package. Go modules, the pinned Temporal CLI, sweepflow-devserver and
# workflowcheck are fetched or built once and cached under ~/.cache/sweepflow.
#
# Reference tests compare sweepflow with InferenceX, lm-eval and srt-slurm on
# their own data, which users do not have. They run when these name it, and
# skip with one line each otherwise (counted at the end):
#   SWEEPFLOW_INFERENCEX  an InferenceX reference directory (configs,
#                         expected matrices, golden AL tables)
#   SWEEPFLOW_GSM8K_DIR   a directory holding GSM8K test.jsonl and train.jsonl
#   SWEEPFLOW_SRT_SLURM   srt-slurm's rendered process sets
# Arguments go to `go test` (e.g. -run X, -short).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache="${SWEEPFLOW_CACHE:-$HOME/.cache/sweepflow}"

echo "== system packages"
pkgs=(chromium postgresql slurmctld slurmd slurm-client munge)
need=()
if command -v dpkg >/dev/null; then
  for pkg in "${pkgs[@]}"; do
    # A removed package keeps a dpkg entry ("deinstall ok config-files").
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
  done
fi
if [ ${#need[@]} -eq 0 ]; then
  echo "present (or not a Debian system): ${pkgs[*]}"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "missing: ${need[*]} (not root: the tests that need them skip; install them to run those)"
fi

echo "== Go modules, Temporal CLI, workflowcheck"
go mod download
"$root/scripts/install-temporal.sh"
export SWEEPFLOW_TEMPORAL_BIN="$root/bin/temporal" SWEEPFLOW_DEVSERVER_BIN="$root/bin/sweepflow-devserver"
if [ ! -x "$cache/bin/workflowcheck" ]; then
  (cd /tmp && GOBIN="$cache/bin" GOFLAGS=-mod=mod go install go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0)
fi

# Each skipped reference test appends a line here (internal/reftest).
skiplog="${SWEEPFLOW_REFSKIP_LOG:-}"
if [ -z "$skiplog" ]; then
  skiplog=$(mktemp)
  skiplog_tmp=1
  trap 'rm -f "$skiplog"' EXIT
fi
export SWEEPFLOW_REFSKIP_LOG="$skiplog"
: >"$skiplog"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "not gofmt-formatted:" $unformatted >&2
  exit 1
fi

echo "== go vet"
go vet ./...
(cd devserver && go vet .)

echo "== workflowcheck"
"$cache/bin/workflowcheck" -show-pos ./workflows/... ./nightly/...

status=0
# The compose stack test is its own module (Docker's libraries): only with
# an engine. It spends most of its time waiting on its stack's sweeps, so it
# runs beside `go test ./...` rather than after it; its output (-v: the
# figures: build, up, sweep times) is kept in a file and printed, each line
# prefixed, when it ends.
compose_pid=""
if docker info >/dev/null 2>&1; then
  compose_log=$(mktemp)
  # Stopped early: interrupt the compose test too (go test hands SIGINT to
  # the test binary, whose cleanups take the stack down).
  trap 'if [ -n "$compose_pid" ] && kill -0 "$compose_pid" 2>/dev/null; then kill -INT "$compose_pid"; wait "$compose_pid" 2>/dev/null; fi; rm -f "$compose_log"; [ -z "${skiplog_tmp:-}" ] || rm -f "$skiplog"' EXIT
  echo "== compose stack test (deploy/composetest), in the background: its output follows go test's"
  (cd deploy/composetest && exec go test -count=1 -timeout 75m -v ./...) >"$compose_log" 2>&1 &
  compose_pid=$!
  compose_t0=$SECONDS
else
  echo "compose stack test: skipped (no Docker engine)"
fi

# Tests that need both cores to themselves run after everything else: the
# slo-versus-brute-force test drives the seed's 2P1D deployment at c768-c1280
# on the engine's own clock, and beside other packages the simulator falls
# behind its schedule (a fresh-clone run measured p99 TTFT 17.7 s at c768
# instead of 1.2 s, and no candidate met the SLO). With arguments, go test
# gets them as given.
alone='^TestIntegrationAdaptiveSLOMatchesBruteForce$'
skip=()
[ $# -eq 0 ] && skip=(-skip "$alone")

echo "== go test"
go_t0=$SECONDS
go test -count=1 -timeout 50m "${skip[@]}" "$@" ./... || status=$?
echo "go test: $((SECONDS - go_t0)) s"

if [ -n "$compose_pid" ]; then
  cstatus=0
  wait "$compose_pid" || cstatus=$?
  echo
  echo "== compose stack test (deploy/composetest): exit $cstatus after $((SECONDS - compose_t0)) s"
  sed 's/^/composetest| /' "$compose_log"
  [ "$cstatus" = 0 ] || status=$cstatus
fi

if [ ${#skip[@]} -gt 0 ]; then
  echo "== go test, alone on the machine: $alone (e2e)"
  alone_t0=$SECONDS
  go test -count=1 -timeout 20m -run "$alone" ./e2e || status=$?
  echo "alone: $((SECONDS - alone_t0)) s"
fi

echo
n=$(grep -c . "$skiplog" || true)
if [ "$n" -gt 0 ]; then
  vars=$(grep -o 'set SWEEPFLOW_[A-Z0-9_]*' "$skiplog" | sort -u | sed 's/^set //' | paste -sd, - | sed 's/,/, /g')
  echo "reference tests: $n skipped (set $vars to run them)"
else
  echo "reference tests: 0 skipped"
fi
exit $status
