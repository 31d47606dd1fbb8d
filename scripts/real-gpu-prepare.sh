#!/usr/bin/env bash
# Prepares the folder scripts/real-gpu.sh runs from on a lent GPU machine
# (which can download nothing): stripped linux/amd64 builds of starter,
# worker, crosscheck and sweepflow-devserver, xz-compressed (~47 MB, under
# the device tool's 64 MiB), the GSM8K split, and a copy of the script and
# e2e/realgpu/. Then, from the checkout the device tool sends, with DEST
# inside it and named in the call's carry:
#
#   scripts/real-gpu-prepare.sh /work/main/.devcarry      # here
#   cd .devcarry/tree && bash scripts/real-gpu.sh --carry ..   # there
#
# GSM8K comes from $SWEEPFLOW_GSM8K_DIR (test.jsonl and train.jsonl).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: $0 DEST}
gsm=${SWEEPFLOW_GSM8K_DIR:?set SWEEPFLOW_GSM8K_DIR to the GSM8K split}
mkdir -p "$dest/bin" "$dest/gsm8k" "$dest/tree/scripts"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
(cd "$root" && go build -trimpath -ldflags='-s -w' -o "$build/" ./starter ./worker ./e2e/realgpu/crosscheck)
(cd "$root/devserver" && go build -trimpath -ldflags='-s -w' -o "$build/sweepflow-devserver" .)
for b in starter worker crosscheck sweepflow-devserver; do
  xz -T0 -9 -c "$build/$b" >"$dest/bin/$b.xz"
done
cp "$gsm/test.jsonl" "$gsm/train.jsonl" "$dest/gsm8k/"
rm -rf "$dest/tree/e2e"
mkdir -p "$dest/tree/e2e"
cp "$root/scripts/real-gpu.sh" "$dest/tree/scripts/"
cp -r "$root/e2e/realgpu" "$dest/tree/e2e/"
rm -rf "$dest/tree/e2e/realgpu/testdata" "$dest/tree/e2e/realgpu/__pycache__"
du -sh "$dest" "$dest"/*
