// Package composetest brings up the production-like stack of the
// repository's compose files (docker-compose.yml on the local images of
// scripts/images.sh, with the mTLS overlay: PostgreSQL, Temporal with its
// schema and namespace jobs, the Web UI and two sweepflow workers) with
// testcontainers-go, checks that a client without a certificate is refused,
// and runs the seed sweep on it to the end. It is a module of its own so the
// main module does not depend on Docker's libraries; its stack test skips,
// saying why, where no Docker engine answers or no GSM8K copy exists, and
// fails there under CI.
package composetest
