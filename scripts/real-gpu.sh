#!/usr/bin/env bash
# The real-GPU run (issue 39; docs/performance.md "Real GPU"): sweepflow
# against a real engine on one lent GPU, in one call, on a bare machine that
# can download nothing.
#
#   1. a real model server: a Llama-architecture model of ~0.4 B parameters
#      with random bf16 weights and a word-level tokenizer built here
#      (e2e/realgpu/make_model.py), served by e2e/realgpu/server.py, a
#      minimal OpenAI-compatible front over transformers'
#      ContinuousBatchingManager. `transformers serve` needs fastapi,
#      uvicorn and openai, which the machine's image lacks: the probe
#      records which of them are missing;
#   2. the whole chain: the embedded Temporal dev server, a worker and the
#      local-gpu cluster profile (e2e/realgpu/cluster.yaml) run the sweep
#      e2e/realgpu/sweep.yaml (8k1k at conc 1 and 16, GSM8K at conc 16 with a
#      floor of 0) through bring-up, warmup, perf, eval and teardown;
#   3. the cross-check: a fresh server of the same build takes the requests
#      of each perf run again from e2e/realgpu/client.py (Python standard
#      library, its own clock), and `crosscheck` compares its figures with
#      sweepflow's (median TTFT, mean ITL, output throughput within 2 %);
#   4. the validity gate on a real engine: a good run with several tokens in
#      each chunk, and runs with the KV cache shrunk until requests queue, then
#      until they fail, each judged by `starter bench`'s gates;
#   5. power: GPU 0 sampled every 100 ms through NVML over the whole run,
#      the raw samples kept, mean watts over each perf window.
# It writes $OUT/summary.json (the figures), $OUT/realgpu-results.tar.gz
# (logs, request logs, power samples, verdicts), $OUT/fixtures/ (the
# cross-check fixtures e2e/realgpu's test reads) and $OUT/run.log.
#
# Before the call, on the development machine: scripts/real-gpu-prepare.sh
# DEST builds stripped linux/amd64 starter, worker, crosscheck and
# sweepflow-devserver binaries, compresses them and copies them with the
# GSM8K split into DEST (the carried folder, e.g. .devcarry of the checkout
# the device tool sends). Then, on the lent machine from the repository root:
#
#   bash scripts/real-gpu.sh [--carry .devcarry] [--smoke]
#
# --calibrate starts the fixture server once per flag set of
# REALGPU_CALIBRATE (';'-separated) and measures decode at c16 with
# `starter bench` (8k prompts, 128 tokens): how fast the engine is before
# a sweep is sized to fit the tool's 600 s. --smoke runs the same chain on e2e/realgpu/sweep-smoke.yaml (8k/128, conc
# 1 and 16, no eval) and small gate runs: a few minutes, to check a machine
# and calibrate. REALGPU_ENGINE=fake serves with the fixture's CPU stand-in
# (no GPU, no torch): the chain can be tried on any Linux host.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry=.devcarry
smoke=0
calibrate=0
while [ $# -gt 0 ]; do
  case "$1" in
    --carry) carry=$2; shift ;;
    --smoke) smoke=1 ;;
    --calibrate) calibrate=1 ;;
    *) echo "usage: $0 [--carry DIR] [--smoke|--calibrate]" >&2; exit 2 ;;
  esac
  shift
done
carry=$(cd "$carry" && pwd)
OUT=${OUT:-/tmp/realgpu-out}
mkdir -p "$OUT"
work=${REALGPU_WORK:-/tmp/realgpu}
rm -rf "$work"
mkdir -p "$work"/{bin,res,logs}
res=$work/res
exec > >(tee -a "$OUT/run.log") 2>&1
t_start=$(date +%s)
say() { echo "== $(date +%T) +$(( $(date +%s) - t_start ))s $*"; }
# The device tool stops a call at 10 minutes: each step past the sweep runs
# only if it fits before the deadline, so the summary is always written.
deadline=${REALGPU_DEADLINE:-540}
left() { echo $(( deadline - ($(date +%s) - t_start) )); }

PY=${REALGPU_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3); fi
fi
export SWEEPFLOW_REALGPU_PYTHON=$PY PYTHONUNBUFFERED=1
engine=${REALGPU_ENGINE:-cb}
# 768 KV blocks of 256 tokens (~6 GiB): 16 requests of 8k1k fit at once
# (transformers sized its own cache to 272 blocks, 7 of them, on the H100).
server_flags=${REALGPU_SERVER_FLAGS:---num-blocks 768}
[ "$engine" = fake ] && server_flags="--engine fake $server_flags"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  # Servers the worker's local backend started: one process group a job.
  for f in "$work"/home/local-cluster/jobs/*/server.pid; do
    [ -f "$f" ] && kill -- -"$(cat "$f")" 2>/dev/null
  done
  [ -x "$work/bin/starter" ] && "$work/bin/starter" server stop >/dev/null 2>&1
  # Only these: a bare `wait` also waits for the tee behind `exec >`, which
  # ends only when this script does (every call on the H100 ran on to the
  # tool's 600 s after "done").
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT

say "probe"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm --format=csv 2>&1 || echo "no nvidia-smi"
  "$PY" - <<'EOF'
import importlib, json, sys
info = {"python": sys.version.split()[0], "executable": sys.executable}
for m in ["torch", "transformers", "tokenizers", "pynvml", "fastapi", "uvicorn", "openai", "pydantic", "starlette", "aiohttp"]:
    try:
        mod = importlib.import_module(m)
        info[m] = getattr(mod, "__version__", "present")
    except Exception as e:
        info[m] = None
try:
    import torch
    info["cuda"] = torch.cuda.is_available() and torch.cuda.get_device_name(0)
except Exception:
    pass
# transformers serve needs fastapi, uvicorn, pydantic and openai's types.
info["transformers_serve_deps_missing"] = [m for m in ["fastapi", "uvicorn", "pydantic", "openai"] if info.get(m) is None]
print(json.dumps(info))
json.dump(info, open("/tmp/realgpu/res/probe.json", "w"), indent=2)
EOF
} 2>&1

say "binaries"
for b in starter worker crosscheck sweepflow-devserver; do
  if [ -f "$carry/bin/$b.xz" ]; then
    "$PY" -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$carry/bin/$b.xz" "$work/bin/$b"
  else
    cp "$carry/bin/$b" "$work/bin/$b"
  fi
  chmod +x "$work/bin/$b"
done
SF=$work/bin/starter
export SWEEPFLOW_HOME=$work/home SWEEPFLOW_DATA_DIR=$work/data SWEEPFLOW_DEVSERVER_BIN=$work/bin/sweepflow-devserver
mkdir -p "$SWEEPFLOW_HOME"

say "model: config and tokenizer (random weights are drawn at load)"
model_dir=$SWEEPFLOW_DATA_DIR/local-gpu/shared/models/random-llama-0.4b
if [ "$engine" = fake ]; then
  mkdir -p "$model_dir" && echo '{"parameters": 0, "architecture": "fake"}' >"$model_dir/model_info.json"
else
  "$PY" e2e/realgpu/make_model.py --out "$model_dir" --gsm8k-train "$carry/gsm8k/train.jsonl" \
    --gsm8k-test "$carry/gsm8k/test.jsonl" || exit 1
fi
cp "$model_dir/model_info.json" "$res/"

if [ "$calibrate" = 1 ]; then
  port=18400
  IFS=';' read -ra sets <<<"${REALGPU_CALIBRATE:---num-blocks 768;--num-blocks 768 --cuda-graph --cb-warmup;--num-blocks 160}"
  i=0
  for flags in "${sets[@]}"; do
    i=$((i + 1))
    [ "$(left)" -lt 60 ] && { say "calibrate: no time left for [$flags]"; break; }
    say "calibrate $i: server flags [$flags]"
    REALGPU_SERVER_ARGS="$server_flags $flags" "$PY" e2e/realgpu/server.py --listen 127.0.0.1:$port --model-dir "$model_dir" \
      --served-model-name sweepflow/random-llama-0.4b >"$work/logs/calibrate$i.log" 2>&1 &
    srv=$!
    up=0
    for _ in $(seq 1 240); do
      "$PY" -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$port/health" 2>/dev/null && { up=1; break; }
      kill -0 $srv 2>/dev/null || break
      sleep 0.5
    done
    if [ "$up" = 1 ]; then
      for shape in "1 8 8192 128" "16 32 8192 128"; do
        set -- $shape
        timeout 120 "$SF" bench --base-url "http://127.0.0.1:$port" --concurrency "$1" --num-prompts "$2" --num-warmups 2 \
          --isl "$3" --osl "$4" --ignore-eos --total-gpus 1 --request-timeout 100s --no-progress --output-dir "$res/calibrate$i-c$1" 2>&1 |
          grep -E "^Requests|^Duration|Token throughput|TTFT |ITL \(per token\)" | sed "s/^/  c$1: /"
      done
    else
      echo "  server did not come up:"; tail -5 "$work/logs/calibrate$i.log"
    fi
    kill $srv 2>/dev/null; wait $srv 2>/dev/null
  done
  cp "$work"/logs/*.log "$res/" 2>/dev/null
  tar -C "$work" -czf "$OUT/realgpu-results.tar.gz" res
  say "calibrate done"
  exit 0
fi

say "power sampling (NVML, 100 ms)"
"$PY" e2e/realgpu/power.py --out "$res/power.csv" 2>"$work/logs/power.log" &
pids+=($!)

say "Temporal dev server and worker"
"$SF" server start || exit 1
sweep=e2e/realgpu/sweep.yaml
limit=${REALGPU_EVAL_LIMIT:-64}
[ "$smoke" = 1 ] && sweep=e2e/realgpu/sweep-smoke.yaml
export REALGPU_SERVER_ARGS="$server_flags"
"$work/bin/worker" --cluster e2e/realgpu/cluster.yaml --thresholds e2e/realgpu/thresholds.yaml \
  --gsm8k-dir "$carry/gsm8k" --eval-limit "$limit" >"$work/logs/worker.log" 2>&1 &
worker=$!
pids+=($worker)
for _ in $(seq 1 240); do
  grep -q 'worker ready' "$work/logs/worker.log" && break
  kill -0 $worker 2>/dev/null || { echo "worker stopped:"; tail -5 "$work/logs/worker.log"; exit 1; }
  sleep 0.5
done

say "sweep $sweep"
id="realgpu-$(date +%Y%m%d-%H%M%S)"
"$SF" plan --sweep "$sweep"
sweep_rc=0
# engine-first (InferenceX's reviewer rule: a vLLM or SGLang entry before
# any other framework) does not apply to a test fixture's engine.
# --fast-retries: a stage out of retries reaches the operator gate's short
# timeout and fails, instead of holding the call until the deadline.
timeout $(( $(left) - 150 )) "$SF" sweep start --sweep "$sweep" --id "$id" --allow engine-first --fast-retries --wait || sweep_rc=$?
"$SF" status "$id" || true
"$SF" status "$id" --json >"$res/status.json" || true
say "sweep ended (exit $sweep_rc)"
kill $worker 2>/dev/null; wait $worker 2>/dev/null
# A sweep cut off by its deadline leaves its point's server holding the GPU
# (seen on the H100 on 2026-12-06: the cross-check server then ran out of
# memory): end them before the gate and cross-check servers start.
for f in "$work"/home/local-cluster/jobs/*/server.pid; do
  [ -f "$f" ] && kill -- -"$(cat "$f")" 2>/dev/null
done
cp -r "$work/home/local-cluster/jobs" "$res/jobs" 2>/dev/null
find "$work/home" -name '*_requests.jsonl' -o -name '*_conc*.json' -o -name 'eval_*' | grep -v '/artifacts/' >"$work/files.txt"
mkdir -p "$res/perf"
while read -r f; do cp "$f" "$res/perf/"; done <"$work/files.txt"

port=18400
start_server() { # name, extra flags
  REALGPU_SERVER_ARGS="$server_flags $2" "$PY" e2e/realgpu/server.py --listen 127.0.0.1:$port \
    --model-dir "$model_dir" --served-model-name sweepflow/random-llama-0.4b \
    --request-log "$res/$1-received.jsonl" >"$work/logs/$1.log" 2>&1 &
  srv=$!
  pids+=($srv)
  for _ in $(seq 1 600); do
    get "/health" >/dev/null 2>&1 && return 0
    kill -0 $srv 2>/dev/null || { echo "server $1 stopped:"; tail -20 "$work/logs/$1.log"; return 1; }
    sleep 0.5
  done
  return 1
}
get() { # GET a path of the fixture server (no curl on a bare machine)
  "$PY" -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "http://127.0.0.1:$port$1"
}
stop_server() { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
g=$res/gate
mkdir -p "$g" "$res/crosscheck" "$OUT/fixtures"
if [ "$(left)" -gt 110 ]; then
  say "gate: the KV cache shrunk to REALGPU_DEGRADED_BLOCKS blocks of 256 tokens"
  blocks=${REALGPU_DEGRADED_BLOCKS:-12}
  if start_server degraded "--num-blocks $blocks --block-size 256"; then
    get /server/info >"$res/server_info_degraded.json"
    # Room for one request at a time: the others queue.
    "$SF" bench --base-url "http://127.0.0.1:$port" --concurrency 8 --num-prompts 16 --num-warmups 0 --isl 2048 --osl 128 \
      --ignore-eos --total-gpus 1 --request-timeout 60s --no-progress --output-dir "$g/queue" >"$g/queue.txt" 2>&1
    echo "exit $?" >>"$g/queue.txt"
    tail -4 "$g/queue.txt"
    # Larger than the whole cache: no request can be served.
    "$SF" bench --base-url "http://127.0.0.1:$port" --concurrency 4 --num-prompts 4 --num-warmups 0 --isl 8192 --osl 1024 \
      --ignore-eos --total-gpus 1 --request-timeout 30s --no-progress --output-dir "$g/fail" >"$g/fail.txt" 2>&1
    echo "exit $?" >>"$g/fail.txt"
    tail -4 "$g/fail.txt"
    stop_server
  fi
else
  say "gate: degraded runs skipped, $(left) s left"
fi

received=$(ls "$res"/jobs/*/requests-received.jsonl 2>/dev/null | head -1)
if [ "$(left)" -gt 60 ] && start_server crosscheck ""; then
  get /server/info >"$res/server_info.json"
  say "gate: a good run with 4 tokens in each chunk"
  n=${REALGPU_GATE_PROMPTS:-48}
  "$SF" bench --base-url "http://127.0.0.1:$port" --concurrency 16 --num-prompts "$n" --isl 2048 --osl 256 \
    --random-range-ratio 0.8 --ignore-eos --total-gpus 1 --extra-body '{"stream_interval":4}' --no-progress \
    --output-dir "$g/chunk4" >"$g/chunk4.txt" 2>&1
  echo "exit $?" >>"$g/chunk4.txt"
  tail -4 "$g/chunk4.txt"

  if [ "$smoke" = 1 ]; then
    # The smoke sweep has no 8k1k row, so no eval of its own: GSM8K here,
    # through the same eval code, against the same server.
    say "smoke: GSM8K (64 questions, conc 16) through starter eval"
    "$SF" eval gsm8k --base-url "http://127.0.0.1:$port" --model sweepflow/random-llama-0.4b --mode lm-eval --limit 64 \
      --concurrency 16 --test "$carry/gsm8k/test.jsonl" --train "$carry/gsm8k/train.jsonl" \
      --thresholds e2e/realgpu/thresholds.yaml --model-prefix randllama \
      --output-json "$res/perf/eval_smoke.json" --samples-jsonl "$res/perf/eval_samples_smoke.jsonl" 2>&1 | tail -8
  fi

  say "cross-check: the same requests again, from the independent client, on a fresh server"
  for agg in $(ls "$res"/perf/*_conc*.json | sort -V); do
    conc=$(sed -n 's/.*"conc": \([0-9]*\).*/\1/p' "$agg" | head -1)
    took=$(sed -n 's/.*"duration": \([0-9.]*\).*/\1/p' "$agg" | head -1)
    reqs=${agg%_conc*.json}_requests.jsonl
    d=$res/crosscheck/c$conc
    need=$(( ${took%.*} + 25 ))
    if [ "$(left)" -lt "$need" ]; then
      say "cross-check c$conc skipped: needs ~${need} s, $(left) s left"
      continue
    fi
    say "cross-check c$conc: the requests of $(basename "$reqs") from $received"
    "$PY" e2e/realgpu/client.py --base-url "http://127.0.0.1:$port" --log "$received" --records "$reqs" \
      --concurrency "$conc" --warmups $((2 * conc)) --out-dir "$d" >"$d.client.log" 2>&1 || tail -3 "$d.client.log"
    "$work/bin/crosscheck" --point "c$conc" --aggregate "$agg" --requests "$reqs" --client "$d/client_summary.json" \
      --fixture "$OUT/fixtures/c$conc.json.gz" | tee "$d/verdict.json"
  done
  stop_server
fi

say "summary"
kill "${pids[0]}" 2>/dev/null # the power sampler
sleep 0.3
"$PY" e2e/realgpu/summarize.py --res "$res" --sweep-id "$id" --sweep-exit "$sweep_rc" --smoke "$smoke" \
  --out "$OUT/summary.json"
cp "$work"/logs/*.log "$res/" 2>/dev/null
tar -C "$work" -czf "$OUT/realgpu-results.tar.gz" res
ls -la "$OUT" "$OUT/fixtures"
say "done"
