package results

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// StageRun is one stage of one point as the point workflow ran it: when it
// started and ended, how it came out (ok, failed, skipped, reused, ...) and
// how many operator rounds it took. Reports show them as stage timings.
type StageRun struct {
	SweepID, PointID string
	Seq              int // position in the point's stage list, from 0
	Stage            string
	Outcome          point.Outcome
	Rounds           int
	Error            string
	StartedAt        time.Time
	EndedAt          time.Time // zero while running
	// Failures are the run's failed attempts, each with its class and
	// evidence (table stage_failures, one row each).
	Failures []failure.Attempt
}

// StageFailure is one failed attempt of a stage as the ledger lists it.
type StageFailure struct {
	SweepID, PointID string
	Seq, N           int // the stage run's position, the failure's within it
	Stage            string
	failure.Attempt
}

// Duration is EndedAt-StartedAt, or 0 when either is unknown.
func (r StageRun) Duration() time.Duration {
	if r.StartedAt.IsZero() || r.EndedAt.IsZero() || r.EndedAt.Before(r.StartedAt) {
		return 0
	}
	return r.EndedAt.Sub(r.StartedAt)
}

// PutStageRuns replaces the recorded stage runs of one point with runs (in
// order; Seq is assigned from the position). Replacing the whole list in one
// transaction keeps a retried write idempotent and never leaves half a list.
func (s *Store) PutStageRuns(ctx context.Context, sweepID, pointID string, runs []StageRun) error {
	if sweepID == "" || pointID == "" {
		return fmt.Errorf("results: stage runs of point %q (sweep %q): sweep id and point id are required", pointID, sweepID)
	}
	for i, r := range runs {
		if r.Stage == "" {
			return fmt.Errorf("results: stage runs of point %s (sweep %s): run %d has no stage", pointID, sweepID, i)
		}
	}
	what := "put stage runs of point " + pointID + " (sweep " + sweepID + ")"
	err := s.retryBusy(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, table := range []string{"stage_runs", "stage_failures"} {
			if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM `+table+` WHERE sweep_id = ? AND point_id = ?`), sweepID, pointID); err != nil {
				return err
			}
		}
		insF := s.d.rebind(`INSERT INTO stage_failures (sweep_id, point_id, seq, n, stage, class, excerpt, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		ins := s.d.rebind(`INSERT INTO stage_runs (sweep_id, point_id, seq, stage, outcome, rounds, error, started_at, ended_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		for i, r := range runs {
			if _, err := tx.ExecContext(ctx, ins, sweepID, pointID, i, r.Stage, r.Outcome, r.Rounds, r.Error,
				nullTime(r.StartedAt), nullTime(r.EndedAt)); err != nil {
				return err
			}
			for n, f := range r.Failures {
				if _, err := tx.ExecContext(ctx, insF, sweepID, pointID, i, n, r.Stage, string(f.Class), f.Excerpt, nullTime(f.At)); err != nil {
					return err
				}
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("results: %s: %w", what, err)
	}
	return nil
}

// StageRuns lists a sweep's stage runs by point and position.
func (s *Store) StageRuns(ctx context.Context, sweepID string) ([]StageRun, error) {
	rows, err := s.query(ctx, `SELECT sweep_id, point_id, seq, stage, outcome, rounds, error, started_at, ended_at
		FROM stage_runs WHERE sweep_id = ? ORDER BY point_id, seq`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: stage runs of %s: %w", sweepID, err)
	}
	return scanStageRuns(rows, sweepID)
}

// StageFailures lists a sweep's failed stage attempts by point, stage run
// and order.
func (s *Store) StageFailures(ctx context.Context, sweepID string) ([]StageFailure, error) {
	rows, err := s.query(ctx, `SELECT sweep_id, point_id, seq, n, stage, class, excerpt, at
		FROM stage_failures WHERE sweep_id = ? ORDER BY point_id, seq, n`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: stage failures of %s: %w", sweepID, err)
	}
	defer rows.Close()
	var out []StageFailure
	for rows.Next() {
		var f StageFailure
		var class string
		var at sql.NullInt64
		if err := rows.Scan(&f.SweepID, &f.PointID, &f.Seq, &f.N, &f.Stage, &class, &f.Excerpt, &at); err != nil {
			return nil, fmt.Errorf("results: stage failures of %s: %w", sweepID, err)
		}
		f.Class, f.At = failure.Class(class), fromNull(at)
		out = append(out, f)
	}
	return out, rows.Err()
}

// DeploymentStageRuns lists the stage runs, in every sweep, of the points
// whose identity belongs to the deployment hash (identity
// "<hash>-c<conc>"): what that deployment took when it ran. Runs come by
// sweep, point and position.
func (s *Store) DeploymentStageRuns(ctx context.Context, deploymentHash string) ([]StageRun, error) {
	// LIKE, not a string range: PostgreSQL's collations may order the
	// hyphen out of byte order. A hash is hex: no wildcard in the pattern.
	if strings.ContainsAny(deploymentHash, `%_\`) {
		return nil, fmt.Errorf("results: stage runs of deployment %q: not a deployment hash", deploymentHash)
	}
	rows, err := s.query(ctx, `SELECT r.sweep_id, r.point_id, r.seq, r.stage, r.outcome, r.rounds, r.error, r.started_at, r.ended_at
		FROM points p JOIN stage_runs r ON r.sweep_id = p.sweep_id AND r.point_id = p.point_id
		WHERE p.identity LIKE ? ORDER BY r.sweep_id, r.point_id, r.seq`, deploymentHash+"-c%")
	if err != nil {
		return nil, fmt.Errorf("results: stage runs of deployment %s: %w", deploymentHash, err)
	}
	return scanStageRuns(rows, "deployment "+deploymentHash)
}

// scanStageRuns reads stage_runs rows selected in their column order; of
// names what was asked for in errors.
func scanStageRuns(rows *sql.Rows, of string) ([]StageRun, error) {
	defer rows.Close()
	var out []StageRun
	for rows.Next() {
		var r StageRun
		var started, ended sql.NullInt64
		if err := rows.Scan(&r.SweepID, &r.PointID, &r.Seq, &r.Stage, &r.Outcome, &r.Rounds, &r.Error, &started, &ended); err != nil {
			return nil, fmt.Errorf("results: stage runs of %s: %w", of, err)
		}
		r.StartedAt, r.EndedAt = fromNull(started), fromNull(ended)
		out = append(out, r)
	}
	return out, rows.Err()
}
