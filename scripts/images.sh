#!/usr/bin/env bash
# Builds the local images of the compose stack without any registry:
#
#   sweepflow-local/base        Debian bookworm minbase + PostgreSQL 15 (debootstrap, docker import)
#   sweepflow-local/postgresql  PostgreSQL on the base
#   sweepflow-local/temporal    Temporal server v1.29.1 + temporal-sql-tool + its PostgreSQL schema
#   sweepflow-local/ui          Temporal UI server v2.42.1 (the version Temporal CLI v1.5.1 embeds)
#   sweepflow-local/worker      our worker and starter (the simulated engine)
#
# each tagged :local. Every image carries the hash of its inputs as the label
# sweepflow.inputs; an image whose inputs did not change is not rebuilt. The
# slow Go builds (server, schema tool, UI server) are cached by version under
# $SWEEPFLOW_CACHE/images (default ~/.cache/sweepflow/images), so a rerun only
# rebuilds the worker binaries (Go's build cache makes that quick) and hashes.
#
#   scripts/images.sh            build what changed, print one line per image
#   scripts/images.sh --list     print the image names only
#
# Needs: docker, debootstrap (apt-get install debootstrap; installed here when
# run as root), Go, and the Debian mirror named by SWEEPFLOW_DEBIAN_MIRROR or
# the first deb.debian.org-style URI of /etc/apt/sources.list(.d).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache="${SWEEPFLOW_CACHE:-$HOME/.cache/sweepflow}/images"
prefix=sweepflow-local
server_version=v1.29.1
ui_version=v2.42.1
images=(base postgresql temporal ui worker)

if [ "${1:-}" = --list ]; then
  for i in "${images[@]}"; do echo "$prefix/$i:local"; done
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--list]" >&2; exit 2; }

mkdir -p "$cache"
log() { printf '%s\n' "$*" >&2; }
now() { date +%s; }
hash_of() { sha256sum | cut -c1-16; }
# inputs_of IMAGE: the sweepflow.inputs label of an image, empty if absent.
inputs_of() { docker image inspect -f '{{ index .Config.Labels "sweepflow.inputs" }}' "$1" 2>/dev/null || true; }

# build_image NAME HASH CONTEXT_DIR: docker build of CONTEXT_DIR/Dockerfile
# unless NAME already carries HASH.
build_image() {
  local name=$1 hash=$2 ctx=$3 tag=${4:-local} t0
  if [ "$(inputs_of "$prefix/$name:$tag")" = "$hash" ]; then
    echo "$prefix/$name:$tag cached ($hash)"
    return
  fi
  t0=$(now)
  # The classic builder: no BuildKit/buildx is needed, and FROM only names
  # local images, so nothing is pulled.
  DOCKER_BUILDKIT=0 docker build --label "sweepflow.inputs=$hash" -t "$prefix/$name:$tag" "$ctx" >"$work/build-$name.log" 2>&1 ||
    { tail -n 20 "$work/build-$name.log" >&2; log "images.sh: building $prefix/$name:$tag failed"; exit 1; }
  echo "$prefix/$name:$tag built in $(($(now) - t0))s ($hash)"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- base: debootstrap ------------------------------------------------------
mirror="${SWEEPFLOW_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -hoE '^(URIs:|deb) *https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
    grep -oE 'https?://[^ ]*' | head -n1 || true)
fi
[ -n "$mirror" ] || { log "images.sh: no Debian mirror found in /etc/apt; set SWEEPFLOW_DEBIAN_MIRROR"; exit 1; }
base_pkgs=postgresql-15,ca-certificates
base_hash=$(printf 'bookworm minbase %s v1\n' "$base_pkgs" | hash_of)
if [ "$(inputs_of "$prefix/base:local")" = "$base_hash" ]; then
  echo "$prefix/base:local cached ($base_hash)"
else
  if ! command -v debootstrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    else
      log "images.sh: debootstrap is missing (apt-get install debootstrap)"; exit 1
    fi
  fi
  [ "$(id -u)" = 0 ] || { log "images.sh: building the base image needs root (debootstrap)"; exit 1; }
  t0=$(now)
  rootfs="$work/rootfs"
  debootstrap --variant=minbase --include="$base_pkgs" bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; log "images.sh: debootstrap failed"; exit 1; }
  # Debian's package made a "main" cluster; the image makes its own at start.
  rm -rf "$rootfs"/var/lib/postgresql/15 "$rootfs"/etc/postgresql/15 "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    -c "LABEL sweepflow.inputs=$base_hash" - "$prefix/base:local" >/dev/null
  rm -rf "$rootfs"
  echo "$prefix/base:local built in $(($(now) - t0))s ($base_hash)"
fi
base_id=$(docker image inspect -f '{{.Id}}' "$prefix/base:local")

# --- Go builds cached by version ------------------------------------------------
# go_install DIR PKG@VERSION: static binary into $cache/DIR unless already there.
go_install() {
  local dir="$cache/$1" pkg=$2 t0
  if [ -x "$dir/server" ]; then return; fi
  t0=$(now)
  mkdir -p "$dir.tmp"
  (cd /tmp && CGO_ENABLED=0 GOBIN="$dir.tmp" GOFLAGS="-trimpath -buildvcs=false" go install "$pkg") ||
    { log "images.sh: go install $pkg failed"; exit 1; }
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "go install $pkg: $(($(now) - t0))s"
}
go_install "temporal-server-$server_version" "go.temporal.io/server/cmd/server@$server_version"
if [ ! -x "$cache/temporal-sql-$server_version/sql" ]; then
  t0=$(now)
  mkdir -p "$cache/temporal-sql-$server_version"
  (cd /tmp && CGO_ENABLED=0 GOBIN="$cache/temporal-sql-$server_version" GOFLAGS="-trimpath -buildvcs=false" \
    go install "go.temporal.io/server/cmd/tools/sql@$server_version") || { log "images.sh: go install temporal sql tool failed"; exit 1; }
  log "go install temporal sql tool: $(($(now) - t0))s"
fi
go_install "temporal-ui-$ui_version" "github.com/temporalio/ui-server/v2/cmd/server@$ui_version"
# The modules' own schema files and config templates (env-driven, the same
# variables as the official images read) come from the module cache.
srvmod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "go.temporal.io/server@$server_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
uimod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/temporalio/ui-server/v2@$ui_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$srvmod/schema/postgresql/v12" ] && [ -f "$uimod/config/docker.yaml" ] ||
  { log "images.sh: Temporal module sources not found in the module cache"; exit 1; }

# --- postgresql ----------------------------------------------------------------
ctx="$work/postgresql"
mkdir -p "$ctx"
cp deploy/local/postgres-entrypoint.sh "$ctx/"
cat >"$ctx/Dockerfile" <<EOF
FROM $prefix/base:local
COPY postgres-entrypoint.sh /usr/local/bin/
ENV PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/bin/sh", "/usr/local/bin/postgres-entrypoint.sh"]
EOF
h=$( (echo "$base_id"; cat "$ctx"/*) | hash_of)
build_image postgresql "$h" "$ctx"

# --- temporal: server + schema tool -------------------------------------------
ctx="$work/temporal"
mkdir -p "$ctx/schema" "$ctx/config"
cp "$cache/temporal-server-$server_version/server" "$ctx/temporal-server"
cp "$cache/temporal-sql-$server_version/sql" "$ctx/temporal-sql-tool"
cp -r "$srvmod/schema/postgresql" "$ctx/schema/"
cp "$srvmod/config/docker.yaml" "$ctx/config/docker.yaml"
cp deploy/local/temporal-entrypoint.sh "$ctx/"
chmod -R u+w "$ctx"
cat >"$ctx/Dockerfile" <<EOF
FROM $prefix/base:local
COPY temporal-server temporal-sql-tool /usr/local/bin/
COPY schema/ /etc/temporal/schema/
COPY config/docker.yaml /etc/temporal/config/docker.yaml
COPY temporal-entrypoint.sh /etc/temporal/entrypoint.sh
RUN useradd --system --uid 1000 --home-dir /etc/temporal temporal && mkdir -p /etc/temporal/config/dynamicconfig
WORKDIR /etc/temporal
USER temporal
EXPOSE 7233
ENTRYPOINT ["/bin/sh", "/etc/temporal/entrypoint.sh"]
EOF
h=$( (echo "$base_id"; cd "$ctx" && find . -type f | sort | xargs sha256sum) | hash_of)
build_image temporal "$h" "$ctx"

# --- ui -----------------------------------------------------------------------
ctx="$work/ui"
mkdir -p "$ctx/config"
cp "$cache/temporal-ui-$ui_version/server" "$ctx/ui-server"
cp "$uimod/config/docker.yaml" "$ctx/config/docker.yaml"
chmod -R u+w "$ctx"
cat >"$ctx/Dockerfile" <<EOF
FROM $prefix/base:local
COPY ui-server /home/ui-server/ui-server
COPY config/docker.yaml /home/ui-server/config/docker.yaml
RUN useradd --system --uid 1000 --home-dir /home/ui-server ui-server
WORKDIR /home/ui-server
USER ui-server
EXPOSE 8080
ENTRYPOINT ["/home/ui-server/ui-server", "--env", "docker", "start"]
EOF
h=$( (echo "$base_id"; cd "$ctx" && find . -type f | sort | xargs sha256sum) | hash_of)
build_image ui "$h" "$ctx"

# --- worker -----------------------------------------------------------------------
ctx="$work/worker"
mkdir -p "$ctx/bin"
t0=$(now)
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$ctx/bin/" ./starter ./worker
log "go build starter worker: $(($(now) - t0))s"
cp deploy/worker-entrypoint.sh "$ctx/bin/"
cp -r configs "$ctx/configs"
cat >"$ctx/Dockerfile" <<EOF
FROM $prefix/base:local
RUN useradd --system --uid 10001 --home-dir /data sweepflow && mkdir -p /data && chown sweepflow /data
WORKDIR /app
COPY bin/ /app/bin/
COPY configs/ /app/configs/
USER sweepflow
ENV PATH=/app/bin:/usr/local/bin:/usr/bin:/bin \
    SWEEPFLOW_DATA_DIR=/data \
    SWEEPFLOW_HOME=/data \
    XDG_CACHE_HOME=/data/cache
ENTRYPOINT ["/bin/sh", "/app/bin/worker-entrypoint.sh"]
CMD ["--cluster", "configs/clusters/local-sim.yaml"]
EOF
h=$( (echo "$base_id"; cd "$ctx" && find . -type f | sort | xargs sha256sum) | hash_of)
# SWEEPFLOW_WORKER_TAG: another tag than :local for the worker image (tests of
# a branch beside another checkout's stack on the same engine).
build_image worker "$h" "$ctx" "${SWEEPFLOW_WORKER_TAG:-local}"
