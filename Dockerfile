# The sweepflow worker (and starter, which the local backend runs as the
# simulated engine).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ ./starter ./worker

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /out/ /app/bin/
COPY configs/ /app/configs/
ENTRYPOINT ["/app/bin/worker"]
