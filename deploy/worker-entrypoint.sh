#!/bin/sh
# Entrypoint of the sweepflow worker image (see docker-compose.yml): prepares
# what the simulated cluster needs, then runs the worker with the container's
# arguments. `starter` and `worker` are found on PATH (/app/bin in the image).
#
#   SWEEPFLOW_SIM_CHECKPOINT  write the simulated checkpoint here first
#                             (the cluster profile's model source); unset: skip
#   SWEEPFLOW_GSM8K_MOUNT     directory that may hold GSM8K's train.jsonl and
#                             test.jsonl (default /gsm8k, a read-only mount)
set -eu

if [ -n "${SWEEPFLOW_SIM_CHECKPOINT:-}" ]; then
  # Idempotent: shards that are already there are not rewritten.
  starter sim checkpoint --dir "$SWEEPFLOW_SIM_CHECKPOINT" --shards 8 --shard-mib 4
fi

# GSM8K: a mounted copy if it is complete; otherwise the worker finds the
# splits itself (its verified cache under XDG_CACHE_HOME, else one download
# from the canonical URLs, checked by size and sha256) and stops with one
# clear line when it cannot.
mount="${SWEEPFLOW_GSM8K_MOUNT:-/gsm8k}"

# Flags given to the container come last, so they override these.
if [ -s "$mount/train.jsonl" ] && [ -s "$mount/test.jsonl" ]; then
  exec worker --gsm8k-dir "$mount" "$@"
fi
exec worker "$@"
