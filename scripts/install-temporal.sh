#!/usr/bin/env bash
# Installs the pinned Temporal CLI (v1.5.1: server 1.29.1, UI 2.42.1) into
# bin/temporal, and bin/sweepflow-devserver: sweepflow's build of the same
# dev server (devserver/), which `starter server start` runs. The CLI build
# (~3-6 min on 2 cores) is cached in ~/.cache/sweepflow so fresh clones on
# the same machine reuse it; sweepflow-devserver compiles the same packages
# and then takes well under a minute, cached by the hash of its sources.
# Later CLI versions carry a replace directive and cannot be `go install`ed.
set -euo pipefail
version=v1.5.1
root=$(cd "$(dirname "$0")/.." && pwd)
base="${SWEEPFLOW_CACHE:-$HOME/.cache/sweepflow}"
cache="$base/temporal-$version"
if [ ! -x "$cache/temporal" ]; then
  echo "building the Temporal CLI $version (one time, a few minutes)..." >&2
  mkdir -p "$cache"
  # GOFLAGS=-mod=mod: build it as its own module, outside ours.
  (cd /tmp && GOBIN="$cache" GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@$version")
fi
mkdir -p "$root/bin"
ln -sf "$cache/temporal" "$root/bin/temporal"
"$root/bin/temporal" --version >&2

src="$root/devserver"
sum=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)
dcache="$base/devserver-$sum"
if [ ! -x "$dcache/sweepflow-devserver" ]; then
  echo "building sweepflow-devserver (the same server without its metrics endpoint)..." >&2
  mkdir -p "$dcache"
  (cd "$src" && go build -o "$dcache/sweepflow-devserver.tmp" . && mv "$dcache/sweepflow-devserver.tmp" "$dcache/sweepflow-devserver")
fi
ln -sf "$dcache/sweepflow-devserver" "$root/bin/sweepflow-devserver"
echo "sweepflow-devserver ($dcache)" >&2
