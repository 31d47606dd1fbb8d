package point

// Point statuses, the values of PointStatus. A point that ran to its end is
// completed (every planned stage produced its output or reused one),
// eval-failed (as completed, but GSM8K scored below its floor: a verdict,
// not an error) or incomplete (an operator skipped a stage: PointState lists
// the skipped stages and the missing outputs). A point that did not run to
// its end is aborted (by an operator, or the operator timeout), failed
// (a workflow error) or cancelled (the sweep was cancelled). A point the
// sweep never started because its canary failed is not-started.
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
	// StatusNotStarted is a point of a canary sweep whose image's canary
	// failed: the sweep never started it (its outcome says why).
	StatusNotStarted = "not-started"
	// StatusCheckFailed is a nightly whose re-read configs failed the
	// reviewer checklist: reported, and none of its points ran.
	StatusCheckFailed = "check-failed"
	// StatusSkipped is no longer set (a skipped bring-up now ends the point
	// incomplete); ledgers and histories written before issue 11 hold it.
	StatusSkipped = "skipped"
)

// HasFigures reports whether a point with this status ran to its end with
// figures that stand: completed, or eval-failed (a verdict, not an error).
// Reuse, nightly comparisons and reports count only these.
func HasFigures(status string) bool {
	return status == StatusCompleted || status == StatusEvalFailed
}
