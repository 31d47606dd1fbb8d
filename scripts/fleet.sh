#!/usr/bin/env bash
# The whole fleet on the emulated Slurm partition: one point per launchable
# GB200 (or GB300) key of InferenceX's nvidia-master.yaml, launched from
# InferenceX's recipes laid over an srt-slurm checkout as InferenceX's
# launchers lay them, through the real launcher, each through bring-up,
# warmup, perf, eval and teardown. Every figure it measures is simulated.
#
#   scripts/fleet.sh [--gb200|--gb300] [--chaos SEED] [--keys GLOB]
#                    [--inferencex DIR] [--srt-slurm DIR]
#
#   --gb200 | --gb300  which rack's keys and profile (default --gb200)
#   --chaos SEED       inject seeded faults (`sweep start --chaos`) and
#                      reconcile them with the ledger
#   --keys GLOBS       only these config keys, comma-separated globs
#                      (default '*gb200*' / '*gb300*')
#   --inferencex DIR   InferenceX checkout (default $SWEEPFLOW_INFERENCEX)
#   --srt-slurm DIR    srt-slurm v1.0.68 checkout (default $SWEEPFLOW_SRT_SLURM)
#
# From a bare clone plus the two checkouts it builds starter and worker,
# installs the Temporal dev server, writes the emulated profile of the rack
# (`starter cluster emulate`: the emulation's 18 nodes standing in for the
# rack, its model aliases on simulated checkpoints written here), takes the
# emulated partition's lock (it waits while a test holds it), starts the
# partition, a dev server and a worker, forecasts the fleet, runs it, and
# prints: wall time, node-hours beside the forecast's, points completed and
# at the operator gate (with reasons), the ledger's node-minutes by class,
# faults injected against the ledger's failed attempts (--chaos), and what
# was left in squeue and as simulator role processes (must be nothing).
#
# The emulation is scaled down in time, not in nodes: its 18 nodes hold the
# biggest key (a whole rack). Perf runs sweepflow's load generator for
# SWEEPFLOW_FLEET_PERF (default 5s) on a 10x engine clock, and GSM8K scores
# its first SWEEPFLOW_FLEET_EVAL_LIMIT (default 40) questions, so a whole
# fleet fits in minutes on two cores. The forecast is the rack's (20 min
# bring-ups); its --from-ledger figure uses the times this run measured.
# GSM8K comes from SWEEPFLOW_GSM8K_DIR as in scripts/demo.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

rack=gb200 seed="" keys="" ix="${SWEEPFLOW_INFERENCEX:-}" srt="${SWEEPFLOW_SRT_SLURM:-}"
usage() { echo "usage: $0 [--gb200|--gb300] [--chaos SEED] [--keys GLOB] [--inferencex DIR] [--srt-slurm DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --gb200) rack=gb200 ;;
    --gb300) rack=gb300 ;;
    --chaos) [ $# -ge 2 ] || usage; seed=$2; shift ;;
    --keys) [ $# -ge 2 ] || usage; keys=$2; shift ;;
    --inferencex) [ $# -ge 2 ] || usage; ix=$2; shift ;;
    --srt-slurm) [ $# -ge 2 ] || usage; srt=$2; shift ;;
    *) usage ;;
  esac
  shift
done
[ -n "$ix" ] && [ -n "$srt" ] || { echo "fleet: give --inferencex DIR and --srt-slurm DIR (or SWEEPFLOW_INFERENCEX, SWEEPFLOW_SRT_SLURM)" >&2; exit 2; }
ix=$(cd "$ix" && pwd) srt=$(cd "$srt" && pwd)
keys=${keys:-"*$rack*"}
for f in nvidia-master.yaml runners.yaml; do
  [ -f "$ix/$f" ] || { echo "fleet: $ix/$f: not an InferenceX checkout" >&2; exit 2; }
done

home="${SWEEPFLOW_HOME:-$root/.sweepflow}/fleet-$rack"
export SWEEPFLOW_HOME="$home" SWEEPFLOW_DATA_DIR="$home"
rm -rf "$home"
mkdir -p "$home"
port=${SWEEPFLOW_FLEET_PORT:-27233}
export TEMPORAL_ADDRESS="127.0.0.1:$port"
server_args=(--data-dir "$home/temporal" --port "$port" --ui-port "$((port + 1000))")

# The shared reference copies are trees, not checkouts: lay them out as
# checkouts are (recipes/ in srt-slurm, benchmarks/multi_node/ in
# InferenceX), as starter's TestLaunchableInferenceX does.
if [ ! -d "$srt/recipes" ] && [ -d "$srt/recipes-v1.0.68" ]; then
  mkdir -p "$home/checkouts/srt-slurm"
  ln -s "$srt/recipes-v1.0.68" "$home/checkouts/srt-slurm/recipes"
  srt="$home/checkouts/srt-slurm"
fi
if [ ! -d "$ix/benchmarks/multi_node/srt-slurm-recipes" ] && [ -d "$ix/srt-slurm-recipes" ]; then
  mkdir -p "$home/checkouts/InferenceX/benchmarks/multi_node"
  ln -s "$ix/srt-slurm-recipes" "$home/checkouts/InferenceX/benchmarks/multi_node/srt-slurm-recipes"
  for f in nvidia-master.yaml runners.yaml; do ln -s "$ix/$f" "$home/checkouts/InferenceX/$f"; done
  ix="$home/checkouts/InferenceX"
fi
recipes=(--inferencex "$ix" --srt-slurm "$srt")

worker_pid="" server_started=0 emu_started=0
cleanup() {
  status=$?
  if [ -f "$home/worker.pid" ]; then
    pid=$(cat "$home/worker.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  [ "$server_started" = 1 ] && { bin/starter server stop "${server_args[@]}" >/dev/null 2>&1 || true; }
  [ "$emu_started" = 1 ] && { ./scripts/slurm-emu.sh stop || true; }
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building"
./scripts/install-temporal.sh 2>/dev/null
go build -o bin/ ./starter ./worker

profile="$home/slurm-emu-$rack.yaml"
echo "== emulated $rack profile and simulated checkpoints ($profile)"
bin/starter cluster emulate "configs/clusters/$rack-nvl72.yaml" "${recipes[@]}" --checkpoints --out "$profile"

sweep="$home/fleet-$rack.yaml"
cat >"$sweep" <<EOF
# scripts/fleet.sh: InferenceX's $rack keys, one point each.
name: fleet-$rack
config-files: [$ix/nvidia-master.yaml]
runner-config: $ix/runners.yaml
config-keys: ['*$rack*']
cluster: $profile
evals: true
EOF

echo "== launchable keys of $keys"
IFS=, read -ra globs <<<"$keys"
bin/starter plan --sweep "$sweep" --config-keys "${globs[@]}" "${recipes[@]}" --launchable --json >"$home/launchable.json"
mapfile -t launch < <(jq -r '.keys[] | select(.launchable) | .["config-key"]' "$home/launchable.json")
jq -r '"\([.keys[] | select(.launchable)] | length) of \(.keys | length) keys launch on the emulated \(.cluster // "profile")"' "$home/launchable.json"
jq -r '.keys[] | select(.launchable | not) | "  left out: \(.["config-key"]): \(.reason)"' "$home/launchable.json"
[ ${#launch[@]} -gt 0 ] || { echo "fleet: no key of $keys launches" >&2; exit 1; }
# The reviewer checklist's failures on InferenceX's own rows (a matrix that
# disagrees with its recipe: the recipe launches, as InferenceX's launcher
# runs it) are allowed by rule, each named here.
bin/starter check --sweep "$sweep" --config-keys "${launch[@]}" "${recipes[@]}" --json >"$home/check.json" 2>/dev/null || true
allow=()
for rule in $(jq -r '[.findings[]? | select(.allowed | not) | .rule] | unique | .[]' "$home/check.json"); do
  allow+=(--allow "$rule")
done
jq -r '.findings[]? | select(.allowed | not) | "  allowed (--allow \(.rule)): \(.config_key // .field // "\(.pos.file):\(.pos.line)"): got \(.got); want \(.want)"' "$home/check.json"

echo "== waiting for the emulated partition's lock (/tmp/sweepflow-slurm-emu.lock)"
exec 9>/tmp/sweepflow-slurm-emu.lock
flock 9
if ! ./scripts/slurm-emu.sh status 2>/dev/null; then
  emu_started=1
  SWEEPFLOW_SLURM_EMU_OWNER=fleet ./scripts/slurm-emu.sh start
else
  echo "fleet: the emulated partition runs already (started by $(./scripts/slurm-emu.sh owner)): joining it"
fi
eval "$(./scripts/slurm-emu.sh env)"

echo "== Temporal dev server on $TEMPORAL_ADDRESS"
server_started=1
bin/starter server start "${server_args[@]}"

echo "== worker (log $home/worker.log)"
wargs=(--cluster "$profile" --sim-time-scale 0.1 --perf-duration "${SWEEPFLOW_FLEET_PERF:-5s}" --eval-limit "${SWEEPFLOW_FLEET_EVAL_LIMIT:-40}")
[ -n "${SWEEPFLOW_GSM8K_DIR:-}" ] && wargs+=(--gsm8k-dir "$SWEEPFLOW_GSM8K_DIR")
nohup bin/worker "${wargs[@]}" >"$home/worker.log" 2>&1 &
echo $! >"$home/worker.pid"
for _ in $(seq 1 600); do
  grep -q 'worker ready' "$home/worker.log" 2>/dev/null && break
  kill -0 "$(cat "$home/worker.pid")" 2>/dev/null || { echo "fleet: the worker stopped:" >&2; tail -n 5 "$home/worker.log" >&2; exit 1; }
  sleep 0.5
done

echo "== forecast (the rack's assumptions)"
bin/starter forecast --sweep "$sweep" --config-keys "${launch[@]}" "${recipes[@]}" --one-point-per-key --json >"$home/forecast.json"

id="fleet-$rack-$(date -u +%Y%m%d-%H%M%S)"
start=(bin/starter sweep start --sweep "$sweep" --config-keys "${launch[@]}" "${recipes[@]}" --one-point-per-key --id "$id" --fast-retries --node-hold 1s "${allow[@]}")
echo "== sweep start --one-point-per-key over ${#launch[@]} keys${seed:+ --chaos $seed}"
t0=$(date +%s)
rc=0
if [ -n "$seed" ]; then
  "${start[@]}" --chaos "$seed" --chaos-worker "$home/worker.pid" --chaos-server "$home/temporal/temporal.pid" --json >"$home/chaos.out" &
else
  "${start[@]}" --wait >"$home/sweep.log" &
fi
start_pid=$!
# A point at the operator gate waits for a person: once nothing else runs
# or waits for nodes, the gate points are written down with their reasons
# and aborted, so the sweep (and a chaos run's account) can end.
: >"$home/gate.json"
while kill -0 "$start_pid" 2>/dev/null; do
  sleep 5
  bin/starter status "$id" --json >"$home/status.json" 2>/dev/null || continue
  if jq -e '[.points[].status] | (any(. == "awaiting-operator")) and (all(. != "pending" and . != "running"))' "$home/status.json" >/dev/null; then
    jq -c '.points[] | select(.status == "awaiting-operator")' "$home/status.json" >>"$home/gate.json"
    bin/starter abort --sweep "$id" --reason "scripts/fleet.sh: at the operator gate when the rest of the fleet had ended" >/dev/null || true
  fi
done
wait "$start_pid" || rc=$?
t1=$(date +%s)
# The account is the JSON line of the output (the SDK may log before it).
[ -n "$seed" ] && { grep '^{' "$home/chaos.out" >"$home/chaos.json" || echo '{}' >"$home/chaos.json"; }
set +e # the summary prints what it can

bin/starter forecast --sweep "$sweep" --config-keys "${launch[@]}" "${recipes[@]}" --one-point-per-key --from-ledger --json >"$home/forecast-ledger.json" 2>/dev/null || true
bin/starter status "$id" --json >"$home/status.json"
bin/starter stats --sweep "$id" --json >"$home/stats.json"

echo
echo "== fleet $rack ($id): every figure simulated"
echo "command:      scripts/fleet.sh --$rack${seed:+ --chaos $seed} --keys '$keys' (sweep start --config-keys: the ${#launch[@]} launchable keys)"
printf 'wall time:    %dm%02ds\n' $(((t1 - t0) / 60)) $(((t1 - t0) % 60))
jq -r '"node-hours:   \(.total_node_minutes / 60 | . * 1000 | round / 1000) (useful fraction \(.useful_fraction * 100 | round)%)"' "$home/stats.json"
jq -r '[.clusters[] | .node_hours] | "forecast:     \(add * 1000 | round / 1000) node-hours (rack assumptions)"' "$home/forecast.json"
[ -s "$home/forecast-ledger.json" ] && jq -r '[.clusters[] | .node_hours] | "              \(add * 1000 | round / 1000) node-hours (the same with this run'"'"'s stage times where the ledger has them: --from-ledger)"' "$home/forecast-ledger.json"
jq -r '(.points | length) as $n | .points | group_by(.status) | map("\(.[0].status): \(length)") | "points:       \($n) planned; " + join(", ")' "$home/status.json"
jq -rs '"at the gate:  \(length) (aborted after the rest ended)"' "$home/gate.json"
jq -r '"  \(.config_key) at \(.stage): \([.failure_class, .last_error] | map(select(. != null and . != "")) | join(": ") | .[:240])"' "$home/gate.json"
jq -r '.points[] | select(.status != "completed") | "  \(.config_key) \(.status) at \(.stage): \([.failure_class, .reason, .last_error, .failure_excerpt] | map(select(. != null and . != "")) | join(": ") | .[:240])"' "$home/status.json"
echo "node-minutes by class:"
jq -r '.category_order[] as $c | "  \($c): \(.categories[$c] * 10 | round / 10)"' "$home/stats.json"
jq -r '.failure_classes[]? | "  failed attempts \(.class): \(.attempts) (\(.node_minutes * 10 | round / 10) node-minutes)"' "$home/stats.json"
if [ -n "$seed" ]; then
  jq -r '"faults:       \(.faults | length) injected (seed \(.seed)), \(.failed_attempts) failed attempts in the ledger, mismatches: \(.mismatches | length)"' "$home/chaos.json"
  jq -r '.faults[] | "  \(.kind) \(.point) \(.stage) -> \(.expect)"' "$home/chaos.json"
  jq -r '.mismatches[]? | "  MISMATCH \(.)"' "$home/chaos.json"
  jq -r '.notes[]? | "  note: \(.)"' "$home/chaos.json"
fi
left=$(squeue -h -o '%i %j %T' 2>/dev/null || true)
echo "squeue:       ${left:-none}"
roles=$(pgrep -af "$root/bin/starter sim role" || true)
echo "role procs:   ${roles:-none}"
[ -z "$left" ] && [ -z "$roles" ] || rc=1
exit $rc
