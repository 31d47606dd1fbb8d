#!/usr/bin/env bash
# Installs the pinned Temporal CLI (v1.5.1: server 1.29.1, UI 2.42.1) into
# bin/temporal. The build (~3-6 min on 2 cores) is cached in
# ~/.cache/sweepflow so fresh clones on the same machine reuse it.
# Later CLI versions carry a replace directive and cannot be `go install`ed.
set -euo pipefail
version=v1.5.1
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${SWEEPFLOW_CACHE:-$HOME/.cache/sweepflow}/temporal-$version"
if [ ! -x "$cache/temporal" ]; then
  echo "building the Temporal CLI $version (one time, a few minutes)..." >&2
  mkdir -p "$cache"
  # GOFLAGS=-mod=mod: build it as its own module, outside ours.
  (cd /tmp && GOBIN="$cache" GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@$version")
fi
mkdir -p "$root/bin"
ln -sf "$cache/temporal" "$root/bin/temporal"
"$root/bin/temporal" --version >&2
