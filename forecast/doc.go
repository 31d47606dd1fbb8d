// Package forecast says what a sweep will cost before it is submitted:
// node-hours and GPU-hours by stage, the makespan on a cluster's node
// budget with the critical path that decides it, its lower bound, and the
// points that would not run (keys no profile serves, checks that fail,
// recipes that do not render), which cost nothing.
//
// The makespan is not modelled: package forecast/runner runs the real
// SweepWorkflow, DeploymentWorkflow and PointWorkflow in the Temporal SDK's
// time-skipping test environment, with every stage activity replaced by a
// wait of its forecast duration (a StageClock's), and this package sums the
// timeline. A change to how sweeps schedule is a change to the forecast.
// This package holds no workflow code, so report and plan/budgetcheck can
// import it for the ledger's stage statistics.
package forecast
