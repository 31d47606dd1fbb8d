#!/bin/sh
# PostgreSQL of the local stack image (scripts/images.sh): the first start
# makes the cluster in $PGDATA with the superuser POSTGRES_USER and password
# POSTGRES_PASSWORD (as the official image does), later starts reuse it.
# Listens on every address with password (scram-sha-256) authentication.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  chown postgres "$pw"
  as_postgres "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "postgresql: initialised $PGDATA"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$PGDATA" \
  -c listen_addresses='*' -c unix_socket_directories=/run/postgresql -c max_connections=200
