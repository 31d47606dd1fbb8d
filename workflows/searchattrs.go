package workflows

import (
	"go.temporal.io/sdk/temporal"
)

// Custom search attributes. They are registered on the server (the dev server
// gets them as --search-attribute flags) and let the Web UI list and filter
// sweeps and points. None is called "Status": that clashes with the UI's
// execution status column.
var (
	SASweepID     = temporal.NewSearchAttributeKeyKeyword("SweepID")
	SAConfigKey   = temporal.NewSearchAttributeKeyKeyword("ConfigKey")
	SATopology    = temporal.NewSearchAttributeKeyKeyword("Topology")
	SAConcurrency = temporal.NewSearchAttributeKeyInt64("Concurrency")
	SAStage       = temporal.NewSearchAttributeKeyKeyword("Stage")
	SAPointStatus = temporal.NewSearchAttributeKeyKeyword("PointStatus")
	SAKind        = temporal.NewSearchAttributeKeyKeyword("SweepflowKind")
	// RegressionCount is set by nightly sweeps after the baseline comparison.
	SARegressionCount = temporal.NewSearchAttributeKeyInt64("RegressionCount")
)

// SearchAttributeTypes lists every custom attribute with its type name as the
// server's `--search-attribute Name=Type` flag wants it.
func SearchAttributeTypes() map[string]string {
	return map[string]string{
		SASweepID.GetName():         "Keyword",
		SAConfigKey.GetName():       "Keyword",
		SATopology.GetName():        "Keyword",
		SAConcurrency.GetName():     "Int",
		SAStage.GetName():           "Keyword",
		SAPointStatus.GetName():     "Keyword",
		SAKind.GetName():            "Keyword",
		SARegressionCount.GetName(): "Int",
	}
}

// Point statuses, the values of PointStatus. A point that ran to its end is
// completed (every planned stage produced its output or reused one),
// eval-failed (as completed, but GSM8K scored below its floor: a verdict,
// not an error) or incomplete (an operator skipped a stage: PointState lists
// the skipped stages and the missing outputs). A point that did not run to
// its end is aborted (by an operator, or the operator timeout), failed
// (a workflow error) or cancelled (the sweep was cancelled).
const (
	StatusPending          = "pending"
	StatusRunning          = "running"
	StatusAwaitingOperator = "awaiting-operator"
	StatusCompleted        = "completed"
	StatusEvalFailed       = "eval-failed"
	StatusIncomplete       = "incomplete"
	StatusAborted          = "aborted"
	StatusCancelled        = "cancelled"
	StatusFailed           = "failed"
	// StatusCheckFailed is a nightly whose re-read configs failed the
	// reviewer checklist: reported, and none of its points ran.
	StatusCheckFailed = "check-failed"
	// StatusSkipped is no longer set (a skipped bring-up now ends the point
	// incomplete); ledgers and histories written before issue 11 hold it.
	StatusSkipped = "skipped"
)

// Kinds, the values of SweepflowKind, so one query lists sweeps or points.
const (
	KindSweep = "sweep"
	KindPoint = "point"
	// KindNightly is a nightly regression run (package nightly), so
	// `SweepflowKind="nightly" AND RegressionCount > 0` lists the bad nights.
	KindNightly = "nightly"
)
