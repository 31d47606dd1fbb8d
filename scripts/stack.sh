#!/usr/bin/env bash
# The production-like stack on this machine, from local images and with mTLS:
# PostgreSQL, Temporal's schema job, the Temporal server, the namespace job,
# the Web UI and two sweepflow workers (docker-compose.yml +
# docker-compose.local.yml + docker-compose.tls.yml).
#
#   scripts/stack.sh up       images (scripts/images.sh), certificates, compose up; waits until
#                             the server is healthy and both workers are ready
#   scripts/stack.sh down     stops and removes every container, network and volume of the stack
#   scripts/stack.sh status   the stack's containers
#   scripts/stack.sh env      the exports for the host's starter:  eval "$(scripts/stack.sh env)"
#   scripts/stack.sh certs    (re)make only the CA and certificates if missing
#
# Settings (environment): SWEEPFLOW_STACK_DIR (state: certificates, ledger
# password, ports; default .sweepflow/stack), SWEEPFLOW_TEMPORAL_PORT (17233),
# SWEEPFLOW_UI_PORT (18080), SWEEPFLOW_POSTGRES_PORT (15432),
# SWEEPFLOW_STACK_PROJECT (compose project, sweepflow-stack), and the workers'
# SWEEPFLOW_TIME_SCALE, SWEEPFLOW_PERF_DURATION, SWEEPFLOW_EVAL_LIMIT,
# SWEEPFLOW_GSM8K_DIR (see docker-compose.yml).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state="${SWEEPFLOW_STACK_DIR:-$root/.sweepflow/stack}"
project="${SWEEPFLOW_STACK_PROJECT:-sweepflow-stack}"
certs="$state/certs"

usage() { echo "usage: $0 up|down|status|env|certs" >&2; exit 2; }
[ $# -eq 1 ] || usage
cmd=$1

compose() {
  local files=(-f docker-compose.yml -f docker-compose.local.yml -f docker-compose.tls.yml)
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$project" "${files[@]}" "$@"
  elif command -v docker-compose >/dev/null; then
    docker-compose -p "$project" "${files[@]}" "$@"
  else
    echo "stack.sh: neither 'docker compose' nor docker-compose is installed" >&2
    exit 1
  fi
}

# Ports chosen at `up` are kept, so `env` and `status` agree with them.
load_settings() {
  if [ -f "$state/ports" ]; then
    # shellcheck disable=SC1091
    . "$state/ports"
  fi
  export SWEEPFLOW_TEMPORAL_PORT="${SWEEPFLOW_TEMPORAL_PORT:-${saved_temporal_port:-17233}}"
  export SWEEPFLOW_UI_PORT="${SWEEPFLOW_UI_PORT:-${saved_ui_port:-18080}}"
  export SWEEPFLOW_POSTGRES_PORT="${SWEEPFLOW_POSTGRES_PORT:-${saved_postgres_port:-15432}}"
  export SWEEPFLOW_CERTS_DIR="$certs"
  export SWEEPFLOW_WORKER_IMAGE=sweepflow-local/worker:local
  # GSM8K for the workers: SWEEPFLOW_GSM8K_DIR, else the host's verified
  # cache; else each worker downloads it once (needs the internet).
  local cached="${XDG_CACHE_HOME:-$HOME/.cache}/sweepflow/gsm8k"
  if [ -z "${SWEEPFLOW_GSM8K_DIR:-}" ] && [ -s "$cached/test.jsonl" ] && [ -s "$cached/train.jsonl" ]; then
    export SWEEPFLOW_GSM8K_DIR="$cached"
  fi
  if [ -n "${SWEEPFLOW_GSM8K_DIR:-}" ]; then
    SWEEPFLOW_GSM8K_DIR=$(cd "$SWEEPFLOW_GSM8K_DIR" && pwd)
    export SWEEPFLOW_GSM8K_DIR
  fi
  if [ -s "$state/pg-password" ]; then
    SWEEPFLOW_PG_PASSWORD=$(cat "$state/pg-password")
    export SWEEPFLOW_PG_PASSWORD
  fi
}

make_certs() {
  mkdir -p "$state" "$certs" "$state/ca"
  chmod 700 "$state" "$state/ca"
  if [ ! -s "$state/pg-password" ]; then
    (umask 077 && openssl rand -hex 16 >"$state/pg-password")
  fi
  if [ -s "$certs/ca.pem" ] && [ -s "$certs/server.pem" ] && [ -s "$certs/client.pem" ] &&
    openssl verify -CAfile "$certs/ca.pem" "$certs/server.pem" "$certs/client.pem" >/dev/null 2>&1 &&
    openssl x509 -checkend 86400 -noout -in "$certs/server.pem" >/dev/null 2>&1; then
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -subj "/CN=sweepflow stack CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$state/ca/ca-key.pem" -out "$certs/ca.pem" 2>/dev/null
  # leaf NAME CN EXTENSIONS
  leaf() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
      -keyout "$certs/$1-key.pem" -out "$tmp/$1.csr" 2>/dev/null
    printf '%s\n' "$3" >"$tmp/$1.ext"
    openssl x509 -req -in "$tmp/$1.csr" -CA "$certs/ca.pem" -CAkey "$state/ca/ca-key.pem" -CAcreateserial \
      -CAserial "$state/ca/ca.srl" -days 825 -extfile "$tmp/$1.ext" -out "$certs/$1.pem" 2>/dev/null
  }
  # The server's certificate serves the frontend and, both ways, internode.
  leaf server temporal "subjectAltName=DNS:temporal,DNS:localhost,IP:127.0.0.1
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth"
  leaf client sweepflow-client "keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
  rm -rf "$tmp"
  # The containers run as their own users: the mounted keys must be
  # readable; the state directory (0700) keeps other host users out.
  chmod 755 "$certs"
  chmod 644 "$certs"/*.pem
  echo "certificates: $certs (CA, server for temporal/localhost/127.0.0.1, client)" >&2
}

wait_ready() {
  local deadline=$((SECONDS + ${SWEEPFLOW_STACK_TIMEOUT:-600})) svc id
  for svc in worker worker-2; do
    while :; do
      id=$(compose ps -q "$svc" 2>/dev/null || true)
      if [ -n "$id" ] && docker logs "$id" 2>&1 | grep -q 'worker ready'; then
        break
      fi
      if [ -n "$id" ] && { [ "$(docker inspect -f '{{.State.Status}}' "$id" 2>/dev/null)" = exited ] ||
        [ "$(docker inspect -f '{{.RestartCount}}' "$id" 2>/dev/null || echo 0)" -ge 2 ]; }; then
        echo "stack.sh: $svc keeps stopping:" >&2
        docker logs --tail 20 "$id" >&2 || true
        exit 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "stack.sh: $svc not ready in time; logs:" >&2
        [ -n "$id" ] && docker logs --tail 20 "$id" >&2
        exit 1
      fi
      sleep 1
    done
  done
}

print_env() {
  load_settings
  [ -s "$certs/client.pem" ] || { echo "stack.sh: no certificates yet: run $0 up" >&2; exit 1; }
  local pw
  pw=$(cat "$state/pg-password")
  cat <<EOF
export TEMPORAL_ADDRESS=127.0.0.1:$SWEEPFLOW_TEMPORAL_PORT
export TEMPORAL_NAMESPACE=default
export TEMPORAL_TLS=true
export TEMPORAL_TLS_CLIENT_CERT_PATH=$certs/client.pem
export TEMPORAL_TLS_CLIENT_KEY_PATH=$certs/client-key.pem
export TEMPORAL_TLS_SERVER_CA_CERT_PATH=$certs/ca.pem
export TEMPORAL_TLS_SERVER_NAME=temporal
export SWEEPFLOW_RESULTS='postgres://temporal:$pw@127.0.0.1:$SWEEPFLOW_POSTGRES_PORT/sweepflow?sslmode=disable'
export SWEEPFLOW_DATA_DIR=/data
export SWEEPFLOW_UI_URL=http://127.0.0.1:$SWEEPFLOW_UI_PORT
EOF
}

case "$cmd" in
  certs)
    make_certs
    ;;
  up)
    "$root/scripts/images.sh"
    make_certs
    load_settings
    printf 'saved_temporal_port=%s\nsaved_ui_port=%s\nsaved_postgres_port=%s\n' \
      "$SWEEPFLOW_TEMPORAL_PORT" "$SWEEPFLOW_UI_PORT" "$SWEEPFLOW_POSTGRES_PORT" >"$state/ports"
    t0=$SECONDS
    compose up -d --no-build
    wait_ready
    echo "stack up in $((SECONDS - t0))s: Temporal 127.0.0.1:$SWEEPFLOW_TEMPORAL_PORT (mTLS), Web UI http://127.0.0.1:$SWEEPFLOW_UI_PORT, PostgreSQL 127.0.0.1:$SWEEPFLOW_POSTGRES_PORT"
    echo "next: eval \"\$($0 env)\""
    ;;
  down)
    load_settings
    compose down --volumes --remove-orphans --timeout 20
    # Anything compose lost track of (a renamed service, a killed run).
    left=$(docker ps -aq --filter "label=com.docker.compose.project=$project")
    [ -z "$left" ] || docker rm -f $left >/dev/null
    vols=$(docker volume ls -q --filter "label=com.docker.compose.project=$project")
    [ -z "$vols" ] || docker volume rm $vols >/dev/null
    rm -f "$state/ports"
    echo "stack down: no container of project $project is left"
    ;;
  status)
    load_settings
    compose ps
    ;;
  env)
    print_env
    ;;
  *) usage ;;
esac
