# The sweepflow worker image: the worker, and starter, which the local
# backend runs as the simulated engine. Built by docker-compose.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# modernc.org/sqlite is pure Go, so the binaries are static.
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./starter ./worker

FROM debian:13-slim
# ca-certificates: the worker downloads GSM8K when no copy is mounted.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data sweepflow \
 && mkdir -p /data && chown sweepflow /data
WORKDIR /app
COPY --from=build /out/ /app/bin/
COPY deploy/worker-entrypoint.sh /app/bin/
# The cluster profiles, recipes and eval floors, at the paths the worker's
# defaults use (configs/... relative to /app).
COPY configs/ /app/configs/
# A fresh named volume at /data takes this directory's owner.
USER sweepflow
ENV PATH=/app/bin:$PATH \
    SWEEPFLOW_DATA_DIR=/data \
    SWEEPFLOW_HOME=/data \
    XDG_CACHE_HOME=/data/cache
ENTRYPOINT ["/bin/sh", "/app/bin/worker-entrypoint.sh"]
CMD ["--cluster", "configs/clusters/local-sim.yaml"]
