// Package composetest brings up the production-like stack of the
// repository's docker-compose.yml (PostgreSQL, Temporal with its schema job,
// the Web UI and the sweepflow worker built from the Dockerfile) with
// testcontainers-go and runs one simulated point on it. It is a module of
// its own so the main module does not depend on Docker's libraries; its test
// skips, saying why, where no Docker engine answers.
package composetest
