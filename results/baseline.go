package results

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Nightly baselines. A nightly regression run compares each point with the
// same point of an earlier nightly. "The same point" cannot be the
// fingerprint, which covers the container image: a nightly that picks up a
// new image must still find last night's figures. So each nightly point is
// also recorded under its baseline key (the fingerprint without the image,
// plus the concurrency), and the regression report of each nightly is kept.
// The nightly package chooses the baseline with these queries; report reads
// the stored reports.

// NightlyPoint is one point of a nightly sweep under its baseline key.
type NightlyPoint struct {
	SweepID, PointID, BaselineKey, Status string
	// Night is the nightly's scheduled time; baselines are the latest
	// nights before the one being compared (so backfills compare in order).
	Night time.Time
}

// PutNightlyPoints records (or updates) a nightly sweep's points.
func (s *Store) PutNightlyPoints(ctx context.Context, pts []NightlyPoint) error {
	for _, p := range pts {
		if p.SweepID == "" || p.PointID == "" || p.BaselineKey == "" || p.Night.IsZero() {
			return fmt.Errorf("results: nightly point %q of sweep %q: sweep id, point id, baseline key and night are required", p.PointID, p.SweepID)
		}
		if err := s.write(ctx, "put nightly point "+p.PointID+" of sweep "+p.SweepID,
			`INSERT INTO nightly_points (sweep_id, point_id, baseline_key, status, night) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (sweep_id, point_id) DO UPDATE SET
				baseline_key = excluded.baseline_key, status = excluded.status, night = excluded.night`,
			p.SweepID, p.PointID, p.BaselineKey, p.Status, p.Night.UnixNano()); err != nil {
			return err
		}
	}
	return nil
}

// Baseline is the earlier run of a point that a nightly compares with.
type Baseline struct {
	SweepID, PointID, Status string
	Night                    time.Time
	Perf                     *PerfResult // nil when that run recorded no perf
	Eval                     *EvalResult // nil when it ran no eval
}

// LatestNightly finds the newest nightly point with baselineKey whose night
// is before `before`, other than excludeSweep. With completedOnly it skips
// runs whose point did not complete (the baseline for figures); without, it
// returns the previous night whatever its outcome (to tell a new failure
// from a persistent one).
func (s *Store) LatestNightly(ctx context.Context, baselineKey string, before time.Time, excludeSweep string, completedOnly bool) (Baseline, bool, error) {
	q := `SELECT sweep_id, point_id, status, night FROM nightly_points
		WHERE baseline_key = ? AND night < ? AND sweep_id <> ?`
	if completedOnly {
		q += ` AND status = 'completed'`
	}
	q += ` ORDER BY night DESC, sweep_id DESC LIMIT 1`
	var b Baseline
	var night int64
	err := s.queryRow(ctx, q, baselineKey, before.UnixNano(), excludeSweep).Scan(&b.SweepID, &b.PointID, &b.Status, &night)
	if errors.Is(err, sql.ErrNoRows) {
		return Baseline{}, false, nil
	}
	if err != nil {
		return Baseline{}, false, fmt.Errorf("results: latest nightly for %s: %w", baselineKey, err)
	}
	b.Night = time.Unix(0, night)
	if err := s.fillBaseline(ctx, &b); err != nil {
		return Baseline{}, false, err
	}
	return b, true, nil
}

// LatestNightlyPerf is the perf of the last completed nightly run of a
// point before `before`.
func (s *Store) LatestNightlyPerf(ctx context.Context, baselineKey string, before time.Time, excludeSweep string) (PerfResult, bool, error) {
	b, ok, err := s.LatestNightly(ctx, baselineKey, before, excludeSweep, true)
	if err != nil || !ok || b.Perf == nil {
		return PerfResult{}, false, err
	}
	return *b.Perf, true, nil
}

// PinnedBaseline finds the point with baselineKey in a pinned baseline
// sweep: among its nightly points when it was a nightly, else among its
// points.
func (s *Store) PinnedBaseline(ctx context.Context, sweepID, baselineKey string) (Baseline, bool, error) {
	b := Baseline{SweepID: sweepID}
	var night int64
	err := s.queryRow(ctx, `SELECT point_id, status, night FROM nightly_points WHERE sweep_id = ? AND baseline_key = ? LIMIT 1`,
		sweepID, baselineKey).Scan(&b.PointID, &b.Status, &night)
	switch {
	case err == nil:
		b.Night = time.Unix(0, night)
	case errors.Is(err, sql.ErrNoRows):
		var updated int64
		err = s.queryRow(ctx, `SELECT point_id, status, updated_at FROM points WHERE sweep_id = ? AND baseline_key = ? LIMIT 1`, sweepID, baselineKey).
			Scan(&b.PointID, &b.Status, &updated)
		if errors.Is(err, sql.ErrNoRows) {
			return Baseline{}, false, nil
		}
		if err != nil {
			return Baseline{}, false, fmt.Errorf("results: baseline %s in sweep %s: %w", baselineKey, sweepID, err)
		}
		b.Night = time.Unix(0, updated)
	default:
		return Baseline{}, false, fmt.Errorf("results: baseline %s in sweep %s: %w", baselineKey, sweepID, err)
	}
	if err := s.fillBaseline(ctx, &b); err != nil {
		return Baseline{}, false, err
	}
	return b, true, nil
}

func (s *Store) fillBaseline(ctx context.Context, b *Baseline) error {
	perf, err := s.Perf(ctx, b.SweepID)
	if err != nil {
		return err
	}
	for i := range perf {
		if perf[i].PointID == b.PointID {
			b.Perf = &perf[i]
		}
	}
	evals, err := s.Evals(ctx, b.SweepID)
	if err != nil {
		return err
	}
	for i := range evals {
		if evals[i].PointID == b.PointID {
			b.Eval = &evals[i]
		}
	}
	return nil
}

// RegressionReport is the stored outcome of one nightly comparison.
type RegressionReport struct {
	SweepID     string // the nightly's sweep
	NightlyID   string // the nightly workflow
	Baseline    string // "latest-nightly" or the pinned sweep ID
	Findings    int
	JSON        []byte // the full report
	ArtifactURI string // the same report in the artifact store
	CreatedAt   time.Time
}

// PutRegressionReport stores a sweep's report; a repeat replaces it (the
// comparison activity may be retried).
func (s *Store) PutRegressionReport(ctx context.Context, r RegressionReport) error {
	if r.SweepID == "" {
		return errors.New("results: regression report: sweep id is empty")
	}
	if len(r.JSON) > 0 && !json.Valid(r.JSON) {
		return fmt.Errorf("results: regression report of %s: json is not valid JSON", r.SweepID)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	return s.write(ctx, "put regression report of "+r.SweepID,
		`INSERT INTO regression_reports (sweep_id, nightly_id, baseline, findings, report_json, artifact_uri, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sweep_id) DO UPDATE SET
			nightly_id = excluded.nightly_id, baseline = excluded.baseline, findings = excluded.findings,
			report_json = excluded.report_json, artifact_uri = excluded.artifact_uri, created_at = excluded.created_at`,
		r.SweepID, r.NightlyID, r.Baseline, r.Findings, string(r.JSON), r.ArtifactURI, r.CreatedAt.UnixNano())
}

// GetRegressionReport returns a sweep's report; found is false if none.
func (s *Store) GetRegressionReport(ctx context.Context, sweepID string) (RegressionReport, bool, error) {
	var r RegressionReport
	var blob string
	var created int64
	err := s.queryRow(ctx, `SELECT sweep_id, nightly_id, baseline, findings, report_json, artifact_uri, created_at
		FROM regression_reports WHERE sweep_id = ?`, sweepID).Scan(&r.SweepID, &r.NightlyID, &r.Baseline, &r.Findings, &blob, &r.ArtifactURI, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return RegressionReport{}, false, nil
	}
	if err != nil {
		return RegressionReport{}, false, fmt.Errorf("results: regression report of %s: %w", sweepID, err)
	}
	if blob != "" {
		r.JSON = []byte(blob)
	}
	r.CreatedAt = time.Unix(0, created)
	return r, true, nil
}
