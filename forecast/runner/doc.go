// Package runner is the forecast's virtual-time runner: Simulate runs the
// real SweepWorkflow, DeploymentWorkflow and PointWorkflow in the Temporal
// SDK's time-skipping test environment, with every stage activity replaced
// by a wait of its forecast duration, and Run sums what the simulated sweep
// held into a forecast.Cluster. It is the only package of the binaries that
// links the SDK's testsuite; package forecast (the figures, the ledger's
// stage statistics and their report) does not import it.
package runner
