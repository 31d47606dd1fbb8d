#!/bin/sh
# Temporal server of the local stack image (scripts/images.sh). The config is
# the server module's own env-driven template (config/docker.yaml), so the
# variables are those of the official temporalio/server image: DB,
# POSTGRES_SEEDS, POSTGRES_USER, POSTGRES_PWD, BIND_ON_IP, TEMPORAL_TLS_*,
# DYNAMIC_CONFIG_FILE_PATH, ...
set -eu
if [ "${BIND_ON_IP:-127.0.0.1}" = 0.0.0.0 ] && [ -z "${TEMPORAL_BROADCAST_ADDRESS:-}" ]; then
  # Every service binds all addresses; the ring needs one it can reach.
  TEMPORAL_BROADCAST_ADDRESS=$(hostname -I 2>/dev/null | awk '{print $1}')
  [ -n "$TEMPORAL_BROADCAST_ADDRESS" ] || TEMPORAL_BROADCAST_ADDRESS=$(awk -v h="$(cat /etc/hostname)" '$2 == h {print $1; exit}' /etc/hosts)
  export TEMPORAL_BROADCAST_ADDRESS
fi
exec temporal-server --root /etc/temporal --config config --env docker start "$@"
