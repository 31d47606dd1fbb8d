#!/usr/bin/env bash
# The demo: the seed GB200 sweep (8 points) on a simulated 18-node GB200
# partition, end to end on the embedded Temporal dev server.
#   --keep-running   leave the dev server and worker up afterwards
#   --slurm          run on the emulated 18-node Slurm partition
#                    (scripts/slurm-emu.sh: real slurmctld/slurmd, needs root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
keep=0
profile=local-sim
for a in "$@"; do
  case "$a" in
    --keep-running) keep=1 ;;
    --slurm) profile=slurm-emu ;;
    *) echo "usage: $0 [--keep-running] [--slurm]" >&2; exit 2 ;;
  esac
done

home="${SWEEPFLOW_HOME:-$root/.sweepflow}"
export SWEEPFLOW_HOME="$home" SWEEPFLOW_DATA_DIR="$home"
mkdir -p "$home"

echo "== building (the Temporal CLI is built once and cached)"
./scripts/install-temporal.sh
go build -o bin/ ./starter ./worker

gsm8k="${SWEEPFLOW_GSM8K_DIR:-}"
if [ -z "$gsm8k" ] && [ -f "$root/../shared/datasets/gsm8k/test.jsonl" ]; then
  gsm8k="$root/../shared/datasets/gsm8k"
fi

worker_pid=""
cleanup() {
  if [ "$keep" = 0 ]; then
    [ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null || true
    bin/starter server stop >/dev/null 2>&1 || true
    [ "$profile" = slurm-emu ] && ./scripts/slurm-emu.sh stop || true
  fi
}
trap cleanup EXIT

echo "== simulated checkpoint on the simulated shared filesystem"
bin/starter sim checkpoint --dir "$home/$profile/shared/models/DeepSeek-V4-Pro-0813" --shards 8 --shard-mib 4

if [ "$profile" = slurm-emu ]; then
  echo "== emulated 18-node GB200 Slurm partition"
  ./scripts/slurm-emu.sh start
  eval "$(./scripts/slurm-emu.sh env)"
fi

echo "== Temporal dev server"
bin/starter server start

echo "== worker for the simulated GB200 partition (log: $home/worker.log)"
args=(--cluster configs/clusters/$profile.yaml --sim-time-scale "${SWEEPFLOW_TIME_SCALE:-1}" --perf-duration "${SWEEPFLOW_PERF_DURATION:-15s}")
[ -n "$gsm8k" ] && args+=(--gsm8k-dir "$gsm8k")
nohup bin/worker "${args[@]}" >"$home/worker.log" 2>&1 &
worker_pid=$!

echo "== the seed sweep"
bin/starter plan --sweep configs/sweeps/dsv4-gb200-agentx.yaml --cluster configs/clusters/$profile.yaml
id="dsv4-gb200-agentx-demo-$(date +%Y%m%d-%H%M%S)"
status=0
bin/starter sweep start --sweep configs/sweeps/dsv4-gb200-agentx.yaml --cluster configs/clusters/$profile.yaml \
  --id "$id" --fast-retries --wait || status=$?

echo
echo "== results ($id)"
bin/starter status "$id" || true
echo
echo "Web UI: http://127.0.0.1:8233/namespaces/default/workflows?query=SweepID%3D%22$id%22"
if [ "$keep" = 1 ]; then
  echo "dev server and worker (pid $worker_pid) left running; stop with: bin/starter server stop; kill $worker_pid"
fi
exit $status
