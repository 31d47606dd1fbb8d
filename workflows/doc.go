// Package workflows holds sweepflow's Temporal workflows and their
// contracts: SweepWorkflow (a sweep's plan scheduled on the cluster's node
// budget, its progress query and summary), DeploymentWorkflow (the points of
// one deployment on one allocation and one server bring-up), PointWorkflow
// (one point's stage chain with the operator gate), registered together by
// Register; the nightly's workflow is package nightly's. The
// inputs, results, queries, updates, signals and search attributes here are
// what the CLI and the worker rely on; the stages themselves are activities.
//
// Revisions. Every change to what a workflow records (its commands, their
// order, its markers) breaks the replay of histories recorded before it.
// Before the first release the workflows have one revision, the code as it
// is, and the histories in testdata/histories are recorded from it. From the
// first release on:
//   - a change to a recorded history goes through workflow.GetVersion with a
//     named change ID, keeping the old branch;
//   - a revision (a change ID's old branch) may be removed once no open
//     workflow and no closed history younger than the namespace's retention
//     period uses it;
//   - the replay histories are re-recorded with the change and the old ones
//     kept until their revision is removed.
package workflows
