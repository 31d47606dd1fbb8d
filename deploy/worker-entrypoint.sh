#!/bin/sh
# Entrypoint of the sweepflow worker image (see docker-compose.yml): prepares
# what the simulated cluster needs, then runs the worker with the container's
# arguments. `starter` and `worker` are found on PATH (/app/bin in the image).
#
#   SWEEPFLOW_SIM_CHECKPOINT  write the simulated checkpoint here first
#                             (the cluster profile's model source); unset: skip
#   SWEEPFLOW_GSM8K_MOUNT     directory that may hold GSM8K's train.jsonl and
#                             test.jsonl (default /gsm8k, a read-only mount)
#   SWEEPFLOW_DATA_DIR        where the splits are downloaded when it does not
set -eu

data="${SWEEPFLOW_DATA_DIR:-/data}"

if [ -n "${SWEEPFLOW_SIM_CHECKPOINT:-}" ]; then
  # Idempotent: shards that are already there are not rewritten.
  starter sim checkpoint --dir "$SWEEPFLOW_SIM_CHECKPOINT" --shards 8 --shard-mib 4
fi

# GSM8K: a mounted copy if it is complete, else one download into the data
# volume from the canonical URLs (gsm8k.DefaultTrainURL / DefaultTestURL).
base=https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data
mount="${SWEEPFLOW_GSM8K_MOUNT:-/gsm8k}"
gsm=""
if [ -s "$mount/train.jsonl" ] && [ -s "$mount/test.jsonl" ]; then
  gsm="$mount"
else
  gsm="$data/gsm8k"
  mkdir -p "$gsm"
  for split in train test; do
    if [ ! -s "$gsm/$split.jsonl" ]; then
      echo "downloading GSM8K $split split into $gsm"
      if curl -fsSL --retry 3 -o "$gsm/$split.jsonl.tmp" "$base/$split.jsonl"; then
        mv "$gsm/$split.jsonl.tmp" "$gsm/$split.jsonl"
      else
        rm -f "$gsm/$split.jsonl.tmp"
        echo "warning: cannot download GSM8K; evals will fail until $mount or $gsm holds train.jsonl and test.jsonl" >&2
        gsm=""
        break
      fi
    fi
  done
fi

# Flags given to the container come last, so they override these.
if [ -n "$gsm" ]; then
  exec worker --gsm8k-dir "$gsm" "$@"
fi
exec worker "$@"
