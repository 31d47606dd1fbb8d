// Package e2e holds the end-to-end tests: the built starter and worker
// binaries (or the worker in process) against a real Temporal dev server,
// the emulated Slurm partition and the Web UI in headless Chromium. They
// drive sweeps the way a user does, through the starter command line, and
// call control, workers and results directly only to set up or inspect.
//
// They need the Temporal CLI (SWEEPFLOW_TEMPORAL_BIN, or
// scripts/install-temporal.sh); Slurm tests need root and the Slurm
// packages, the Web UI test Chromium. A missing prerequisite skips the test
// by name, and fails it under CI=true (internal/prereq). -short skips them.
//
// With SWEEPFLOW_RECORD_HISTORIES=1 the tests that end in recordHistories
// re-record the replay fixtures of workflows and nightly
// (<package>/testdata/histories).
package e2e
