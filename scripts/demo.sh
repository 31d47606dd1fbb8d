#!/usr/bin/env bash
# The demo: the seed GB200 sweep (8 points) on a simulated 18-node GB200
# partition, end to end on the embedded Temporal dev server.
#   --keep-running   leave the dev server and worker up afterwards (also
#                    when the demo fails; it says what it left running)
#   --slurm          run on the emulated 18-node Slurm partition
#                    (scripts/slurm-emu.sh: real slurmctld/slurmd, needs root)
# GSM8K comes from SWEEPFLOW_GSM8K_DIR (a directory holding test.jsonl and
# train.jsonl), else from the cache (~/.cache/sweepflow/gsm8k), else it is
# downloaded once from its canonical URL and verified.
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

worker_pid=""
server_started=0
emu_started=0
# Simulated engines that the worker's local backend started (one process
# group per job; the pid files sit under the simulated cluster's jobs/).
engines() {
  for f in "$home"/local-cluster/jobs/*/server.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  done
  return 0
}
cleanup() {
  status=$?
  if [ "$keep" = 1 ]; then
    echo
    echo "left running (--keep-running):"
    [ "$server_started" = 1 ] && echo "  Temporal dev server: stop with bin/starter server stop"
    [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null && echo "  worker (pid $worker_pid, log $home/worker.log): stop with kill $worker_pid"
    for pid in $(engines); do echo "  simulated engine (pid $pid): stop with kill -- -$pid"; done
    [ "$emu_started" = 1 ] && echo "  emulated Slurm partition: stop with scripts/slurm-emu.sh stop"
    exit $status
  fi
  if [ -n "$worker_pid" ]; then
    kill "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
  fi
  # A point cut off mid-sweep may leave its engine up: stop its group.
  for pid in $(engines); do kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  [ "$server_started" = 1 ] && { bin/starter server stop >/dev/null 2>&1 || true; }
  [ "$emu_started" = 1 ] && { ./scripts/slurm-emu.sh stop || true; }
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building (the Temporal CLI is built once and cached)"
./scripts/install-temporal.sh
go build -o bin/ ./starter ./worker

echo "== simulated checkpoint on the simulated shared filesystem"
bin/starter sim checkpoint --dir "$home/$profile/shared/models/DeepSeek-V4-Pro-0813" --shards 8 --shard-mib 4

if [ "$profile" = slurm-emu ]; then
  echo "== emulated 18-node GB200 Slurm partition"
  emu_started=1
  ./scripts/slurm-emu.sh start
  eval "$(./scripts/slurm-emu.sh env)"
fi

echo "== Temporal dev server"
server_started=1
bin/starter server start

echo "== worker for the simulated GB200 partition (log: $home/worker.log)"
args=(--cluster "configs/clusters/$profile.yaml" --sim-time-scale "${SWEEPFLOW_TIME_SCALE:-1}" --perf-duration "${SWEEPFLOW_PERF_DURATION:-10s}")
[ -n "${SWEEPFLOW_GSM8K_DIR:-}" ] && args+=(--gsm8k-dir "$SWEEPFLOW_GSM8K_DIR")
nohup bin/worker "${args[@]}" >"$home/worker.log" 2>&1 &
worker_pid=$!
# The worker finds GSM8K (and everything else it needs) before it polls:
# wait for it to say so, or show why it stopped.
for _ in $(seq 1 600); do
  grep -q 'worker ready' "$home/worker.log" 2>/dev/null && break
  if ! kill -0 "$worker_pid" 2>/dev/null; then
    wait "$worker_pid" 2>/dev/null || true
    worker_pid=""
    echo "demo: the worker stopped before it was ready:" >&2
    tail -n 5 "$home/worker.log" >&2
    exit 1
  fi
  sleep 0.5
done
grep -q 'worker ready' "$home/worker.log" || { echo "demo: the worker was not ready after 5 minutes (log: $home/worker.log)" >&2; exit 1; }

echo "== the seed sweep"
bin/starter plan --sweep configs/sweeps/dsv4-gb200-agentx.yaml --cluster "configs/clusters/$profile.yaml"
id="dsv4-gb200-agentx-demo-$(date +%Y%m%d-%H%M%S)"
status=0
bin/starter sweep start --sweep configs/sweeps/dsv4-gb200-agentx.yaml --cluster "configs/clusters/$profile.yaml" \
  --id "$id" --fast-retries --wait || status=$?

echo
echo "== results ($id)"
bin/starter status "$id" || true
bin/starter report --sweep "$id" --out "$home/report.html" >/dev/null && echo "report (Pareto, E2EL and energy frontiers): $home/report.html"
echo
echo "Web UI: http://127.0.0.1:8233/namespaces/default/workflows?query=SweepID%3D%22$id%22"
exit $status
