// Package deploy holds the checks of the production-like stack in
// docker-compose.yml, the worker image's Dockerfile and its entrypoint
// (deploy/worker-entrypoint.sh). Its tests run everywhere: they parse the
// compose file, cross-check it against the cluster profile, the search
// attributes and the GSM8K URLs, and run the stack's setup scripts and the
// worker entrypoint against the embedded Temporal dev server. The test that
// brings the stack up with Docker lives in the separate module
// deploy/composetest, so this module does not depend on Docker's libraries.
package deploy
