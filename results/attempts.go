package results

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sweepflow/sweepflow/failure"
)

// Outcomes of a stage attempt.
const (
	AttemptRunning   = "running"   // started, no end recorded yet
	AttemptOK        = "ok"        // returned a result the server took
	AttemptFailed    = "failed"    // returned an error
	AttemptLost      = "lost"      // ended without a result reaching the server: a dead worker, a cut network, a restarted server
	AttemptCancelled = "cancelled" // cancelled by the workflow (an operator's cancel)
)

// StageAttempt is one attempt of a point's stage activity as the worker ran
// it (table stage_attempts). Temporal's key, (workflow, run, activity,
// attempt), is the row's, so every attempt has exactly one row.
type StageAttempt struct {
	WorkflowID, RunID, ActivityID string
	Attempt                       int // Temporal's attempt number: 1 starts a retry budget
	SweepID, PointID              string
	Stage                         string
	Outcome                       string
	// Class and the evidence of a failed, lost or cancelled attempt:
	// Excerpt is the failure's own (a log-tail signature, a job state),
	// ErrorType and Message the error the attempt ended with, Heartbeat the
	// last heartbeat details it recorded (JSON).
	Class              failure.Class
	Excerpt            string
	ErrorType, Message string
	Heartbeat          string
	// Worker is the identity of the worker that ran the attempt.
	Worker    string
	StartedAt time.Time
	EndedAt   time.Time // zero while running
}

// Failed reports whether the attempt cost a failure: failed, lost or
// cancelled.
func (a StageAttempt) Failed() bool {
	return a.Outcome == AttemptFailed || a.Outcome == AttemptLost || a.Outcome == AttemptCancelled
}

const attemptColumns = `workflow_id, run_id, activity_id, attempt, sweep_id, point_id, stage, outcome, class, error_type,
	message, excerpt, heartbeat, worker, started_at, ended_at`

func (a StageAttempt) args() []any {
	return []any{a.WorkflowID, a.RunID, a.ActivityID, a.Attempt, a.SweepID, a.PointID, a.Stage, a.Outcome, string(a.Class),
		a.ErrorType, a.Message, a.Excerpt, a.Heartbeat, a.Worker, a.StartedAt.UnixNano(), nullTime(a.EndedAt)}
}

func (a StageAttempt) check() error {
	if a.WorkflowID == "" || a.ActivityID == "" || a.Attempt < 1 || a.Stage == "" || a.StartedAt.IsZero() {
		return fmt.Errorf("results: stage attempt %+v: workflow, activity, attempt, stage and start are required", a)
	}
	return nil
}

// StartAttempt records an attempt that began (outcome running). A second
// start of the same attempt (a redelivered task) is a no-op.
func (s *Store) StartAttempt(ctx context.Context, a StageAttempt) error {
	if err := a.check(); err != nil {
		return err
	}
	a.Outcome, a.EndedAt = AttemptRunning, time.Time{}
	_, err := s.insertOnce(ctx, fmt.Sprintf("start attempt %d of %s", a.Attempt, a.Stage), `INSERT INTO stage_attempts (`+attemptColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workflow_id, run_id, activity_id, attempt) DO NOTHING`, a.args()...)
	return err
}

// EndAttempt records how an attempt ended. Only the first end counts: an
// attempt already ended (a retried write, or one another worker marked
// lost) keeps its row, and ended reports false. Without a start row (its
// write failed) the whole row is written.
func (s *Store) EndAttempt(ctx context.Context, a StageAttempt) (ended bool, err error) {
	if err := a.check(); err != nil {
		return false, err
	}
	if a.EndedAt.IsZero() || a.Outcome == "" || a.Outcome == AttemptRunning {
		return false, fmt.Errorf("results: end of attempt %d of %s: an outcome and an end time are required", a.Attempt, a.Stage)
	}
	return s.insertOnce(ctx, fmt.Sprintf("end attempt %d of %s", a.Attempt, a.Stage), `INSERT INTO stage_attempts (`+attemptColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workflow_id, run_id, activity_id, attempt) DO UPDATE SET
			outcome = excluded.outcome, class = excluded.class, error_type = excluded.error_type, message = excluded.message,
			excerpt = excluded.excerpt, ended_at = excluded.ended_at,
			heartbeat = CASE WHEN excluded.heartbeat = '' THEN stage_attempts.heartbeat ELSE excluded.heartbeat END
		WHERE stage_attempts.ended_at IS NULL`, a.args()...)
}

// BeatAttempt keeps the latest heartbeat details of a running attempt, so
// an attempt whose worker dies leaves them behind.
func (s *Store) BeatAttempt(ctx context.Context, a StageAttempt) error {
	return s.write(ctx, fmt.Sprintf("heartbeat of attempt %d of %s", a.Attempt, a.Stage), `UPDATE stage_attempts SET heartbeat = ?
		WHERE workflow_id = ? AND run_id = ? AND activity_id = ? AND attempt = ? AND ended_at IS NULL`,
		a.Heartbeat, a.WorkflowID, a.RunID, a.ActivityID, a.Attempt)
}

// Relabel turns an attempt that ended ok into a lost one: a later attempt of
// the same activity started, so its result never reached the server. It
// reports whether the row changed (a second call does not).
func (s *Store) Relabel(ctx context.Context, a StageAttempt) (bool, error) {
	var n int64
	err := s.retryBusy(ctx, func() error {
		res, err := s.exec(ctx, `UPDATE stage_attempts SET outcome = ?, class = ?, error_type = ?, message = ?
			WHERE workflow_id = ? AND run_id = ? AND activity_id = ? AND attempt = ? AND outcome = ?`,
			AttemptLost, string(a.Class), a.ErrorType, a.Message, a.WorkflowID, a.RunID, a.ActivityID, a.Attempt, AttemptOK)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("results: relabel attempt %d of %s: %w", a.Attempt, a.Stage, err)
	}
	return n == 1, nil
}

// RunAttempts lists the attempts of one workflow run, oldest first.
func (s *Store) RunAttempts(ctx context.Context, workflowID, runID string) ([]StageAttempt, error) {
	rows, err := s.query(ctx, `SELECT `+attemptColumns+` FROM stage_attempts WHERE workflow_id = ? AND run_id = ?
		ORDER BY started_at, activity_id, attempt`, workflowID, runID)
	if err != nil {
		return nil, fmt.Errorf("results: attempts of %s: %w", workflowID, err)
	}
	return scanAttempts(rows, workflowID)
}

// Attempts lists a sweep's stage attempts by point and start.
func (s *Store) Attempts(ctx context.Context, sweepID string) ([]StageAttempt, error) {
	rows, err := s.query(ctx, `SELECT `+attemptColumns+` FROM stage_attempts WHERE sweep_id = ?
		ORDER BY point_id, started_at, activity_id, attempt`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: attempts of sweep %s: %w", sweepID, err)
	}
	return scanAttempts(rows, "sweep "+sweepID)
}

// FailedAttempts lists a sweep's failed, lost and cancelled attempts. A
// sweep recorded before the attempt ledger has none: its stage_failures
// rows (the last attempt of each retry budget) stand in, without attempt
// number, worker or start.
func (s *Store) FailedAttempts(ctx context.Context, sweepID string) ([]StageAttempt, error) {
	all, err := s.Attempts(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	var out []StageAttempt
	for _, a := range all {
		if a.Failed() {
			out = append(out, a)
		}
	}
	if len(all) > 0 {
		return out, nil
	}
	fails, err := s.StageFailures(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	for _, f := range fails {
		out = append(out, StageAttempt{SweepID: f.SweepID, PointID: f.PointID, Stage: f.Stage, Outcome: AttemptFailed,
			Class: f.Class, Excerpt: f.Excerpt, EndedAt: f.At})
	}
	return out, nil
}

func scanAttempts(rows *sql.Rows, of string) ([]StageAttempt, error) {
	defer rows.Close()
	var out []StageAttempt
	for rows.Next() {
		var a StageAttempt
		var class string
		var started int64
		var ended sql.NullInt64
		if err := rows.Scan(&a.WorkflowID, &a.RunID, &a.ActivityID, &a.Attempt, &a.SweepID, &a.PointID, &a.Stage, &a.Outcome, &class,
			&a.ErrorType, &a.Message, &a.Excerpt, &a.Heartbeat, &a.Worker, &started, &ended); err != nil {
			return nil, fmt.Errorf("results: attempts of %s: %w", of, err)
		}
		a.Class, a.StartedAt, a.EndedAt = failure.Class(class), time.Unix(0, started), fromNull(ended)
		out = append(out, a)
	}
	return out, rows.Err()
}
