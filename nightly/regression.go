package nightly

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// BaselineLatest is the Baseline of a report that compared each point with
// its last completed nightly.
const BaselineLatest = "latest-nightly"

// RegressionPoint is one point of a finished nightly sweep as the workflow
// saw it; its figures are read from the ledger, not carried in history.
type RegressionPoint struct {
	PointID     string `json:"point_id"`
	ConfigKey   string `json:"config_key"`
	Conc        int    `json:"conc"`
	BaselineKey string `json:"baseline_key"`
	Status      string `json:"status"`
	Image       string `json:"image,omitempty"`
}

// ImageChange is a point whose image differs from its baseline's: the
// same identity apart from the image, so the image is what changed.
type ImageChange struct {
	PointID       string `json:"point_id"`
	ConfigKey     string `json:"config_key"`
	Conc          int    `json:"conc"`
	From          string `json:"from"`
	To            string `json:"to"`
	BaselineSweep string `json:"baseline_sweep"`
}

func (c ImageChange) String() string {
	return fmt.Sprintf("%s conc %d: image %s -> %s (baseline %s)", c.ConfigKey, c.Conc, c.From, c.To, c.BaselineSweep)
}

// RegressionRequest asks for a nightly sweep's comparison with its baseline.
type RegressionRequest struct {
	NightlyID string `json:"nightly_id"`
	SweepID   string `json:"sweep_id"`
	// Night is the scheduled time of this nightly: the baseline is the last
	// completed nightly before it.
	Night time.Time `json:"night"`
	// Baseline pins a sweep to compare with; empty means the latest nightly.
	Baseline   string             `json:"baseline,omitempty"`
	Thresholds regress.Thresholds `json:"thresholds"`
	Points     []RegressionPoint  `json:"points"`
}

// RegressionReport is the outcome, stored in the ledger and as an artifact.
type RegressionReport struct {
	NightlyID  string             `json:"nightly_id"`
	SweepID    string             `json:"sweep_id"`
	Night      time.Time          `json:"night"`
	Baseline   string             `json:"baseline"`
	Thresholds regress.Thresholds `json:"thresholds"`
	Points     int                `json:"points"`
	// Compared counts points that had a baseline; NoBaseline lists the
	// others (first night, new configs); NoComparable says, per point, why
	// its baseline's figures could not be compared with its own (simulated
	// against real, another measurement profile): no verdict for those.
	Compared        int               `json:"compared"`
	NoBaseline      []string          `json:"no_baseline,omitempty"`
	NoComparable    []string          `json:"no_comparable_baseline,omitempty"`
	BaselineSweeps  map[string]string `json:"baseline_sweeps,omitempty"` // point -> sweep compared with
	Findings        []regress.Finding `json:"findings"`
	RegressedPoints []string          `json:"regressed_points"`
	ReportURI       string            `json:"report_uri,omitempty"`
	// ImageChanges names every point whose image is not its baseline's.
	ImageChanges []ImageChange `json:"image_changes,omitempty"`
	// CheckFailures are the failing `starter check` findings of a night
	// whose configs failed the checklist: no point ran, nothing was
	// compared. SourceCommit is the commit a git-sourced night read.
	CheckFailures []string `json:"check_failures,omitempty"`
	SourceCommit  string   `json:"source_commit,omitempty"`
}

// CheckFailedNight is a nightly whose re-read configs failed the check.
type CheckFailedNight struct {
	NightlyID string    `json:"nightly_id"`
	SweepID   string    `json:"sweep_id"`
	Name      string    `json:"name"`
	Night     time.Time `json:"night"`
	Baseline  string    `json:"baseline,omitempty"`
	Commit    string    `json:"commit,omitempty"`
	Failures  []string  `json:"failures"`
}

// RecordCheckFailure writes a check-failed night to the ledger as the
// report of its sweep: a nightly sweep row with status check-failed and a
// regression report that carries the findings (one per failing check), the
// same report written as an artifact, so `starter report` and the ledger's
// regression views show the failed night. Idempotent: a retry rewrites the
// same rows.
func (a *Activities) RecordCheckFailure(ctx context.Context, req CheckFailedNight) (RegressionReport, error) {
	rep := RegressionReport{NightlyID: req.NightlyID, SweepID: req.SweepID, Night: req.Night, Baseline: req.Baseline,
		Findings: []regress.Finding{}, RegressedPoints: []string{}, CheckFailures: req.Failures, SourceCommit: req.Commit}
	if rep.Baseline == "" {
		rep.Baseline = BaselineLatest
	}
	cfg, err := json.Marshal(req)
	if err != nil {
		return rep, classify(err)
	}
	if err := a.Store.UpsertSweep(ctx, results.Sweep{ID: req.SweepID, Name: req.Name, ConfigJSON: string(cfg), Status: point.StatusCheckFailed,
		StartedAt: req.Night, FinishedAt: req.Night, Nightly: true}); err != nil {
		return rep, classify(err)
	}
	if err := a.storeRegressionReport(ctx, &rep, len(req.Failures)); err != nil {
		return rep, classify(err)
	}
	a.log(ctx).Warn("nightly check failed; no point ran", zap.String("sweep", req.SweepID), zap.Strings("failures", req.Failures))
	return rep, nil
}

// CompareWithBaseline records the nightly's points under their baseline
// keys, compares each with its baseline (regress.Compare), and stores the
// report in the ledger and the artifact store. Idempotent: a retry rewrites
// the same rows.
func (a *Activities) CompareWithBaseline(ctx context.Context, req RegressionRequest) (RegressionReport, error) {
	rep := RegressionReport{NightlyID: req.NightlyID, SweepID: req.SweepID, Night: req.Night, Baseline: req.Baseline,
		Thresholds: req.Thresholds, Points: len(req.Points), Findings: []regress.Finding{}, RegressedPoints: []string{},
		BaselineSweeps: map[string]string{}}
	if rep.Baseline == "" {
		rep.Baseline = BaselineLatest
	}
	var nps []results.NightlyPoint
	for _, p := range req.Points {
		if p.BaselineKey != "" {
			nps = append(nps, results.NightlyPoint{SweepID: req.SweepID, PointID: p.PointID, BaselineKey: p.BaselineKey, Status: p.Status, Night: req.Night})
		}
	}
	if err := a.Store.PutNightlyPoints(ctx, nps); err != nil {
		return rep, classify(err)
	}
	perf, err := a.Store.Perf(ctx, req.SweepID)
	if err != nil {
		return rep, classify(err)
	}
	evals, err := a.Store.Evals(ctx, req.SweepID)
	if err != nil {
		return rep, classify(err)
	}
	var cur, base []regress.Point
	images := map[string]map[string]string{} // sweep -> point -> image
	for _, p := range req.Points {
		c := regress.Point{Key: p.BaselineKey, SweepID: req.SweepID, PointID: p.PointID, ConfigKey: p.ConfigKey, Conc: p.Conc,
			OK: point.HasFigures(p.Status), Status: p.Status}
		for i := range perf {
			if perf[i].PointID == p.PointID {
				c.Perf, c.ProfileHash = toRegressPerf(&perf[i]), perf[i].ProfileHash
			}
		}
		for i := range evals {
			if evals[i].PointID == p.PointID {
				c.Eval = toRegressEval(&evals[i])
			}
		}
		if c.Key == "" {
			c.Key = "no-key:" + p.PointID // checked against its floor only
			cur = append(cur, c)
			rep.NoBaseline = append(rep.NoBaseline, p.PointID)
			continue
		}
		cur = append(cur, c)
		var b results.Baseline
		var found bool
		var why string // the last baseline's figures that c's cannot be compared with
		if req.Baseline != "" {
			b, found, err = a.Store.PinnedBaseline(ctx, req.Baseline, p.BaselineKey)
			if found {
				why = regress.Incomparable(c, baselinePoint(p, b))
			}
		} else {
			// A failing point is compared with the previous night whatever
			// its outcome (is the failure new?); a running one with the
			// last night that completed (are its figures worse?), going
			// back past nights whose figures are not comparable.
			before := req.Night
			for n := 0; n < maxIncomparableNights; n++ {
				var next results.Baseline
				var ok bool
				if next, ok, err = a.Store.LatestNightly(ctx, p.BaselineKey, before, req.SweepID, c.OK); err != nil || !ok {
					break
				}
				b, found = next, true
				w := regress.Incomparable(c, baselinePoint(p, b))
				if w == "" {
					why = ""
					break
				}
				why = cmp.Or(why, w) // the latest night's reason
				before = b.Night
			}
		}
		if err != nil {
			return rep, classify(err)
		}
		if found && why != "" {
			rep.NoComparable = append(rep.NoComparable, fmt.Sprintf("%s: no comparable baseline: %s", p.PointID, why))
			continue
		}
		if !found {
			rep.NoBaseline = append(rep.NoBaseline, p.PointID)
			continue
		}
		rep.Compared++
		rep.BaselineSweeps[p.PointID] = b.SweepID
		if from, err := a.baselineImage(ctx, images, b.SweepID, b.PointID); err != nil {
			return rep, classify(err)
		} else if from != "" && p.Image != "" && from != p.Image {
			rep.ImageChanges = append(rep.ImageChanges, ImageChange{PointID: p.PointID, ConfigKey: p.ConfigKey, Conc: p.Conc,
				From: from, To: p.Image, BaselineSweep: b.SweepID})
		}
		base = append(base, baselinePoint(p, b))
	}
	rep.Findings = append(rep.Findings, regress.Compare(cur, base, req.Thresholds)...)
	rep.RegressedPoints = append(rep.RegressedPoints, regress.Points(rep.Findings)...)

	if err := a.storeRegressionReport(ctx, &rep, len(rep.Findings)); err != nil {
		return rep, classify(err)
	}
	for _, c := range rep.ImageChanges {
		a.log(ctx).Info("image change", zap.String("point", c.PointID), zap.String("from", c.From), zap.String("to", c.To))
	}
	a.log(ctx).Info("regression report", zap.String("sweep", req.SweepID), zap.Int("findings", len(rep.Findings)),
		zap.Int("compared", rep.Compared), zap.Strings("regressed", rep.RegressedPoints))
	return rep, nil
}

// maxIncomparableNights bounds how far back a nightly looks for a baseline
// whose figures its own can be compared with.
const maxIncomparableNights = 30

// baselinePoint is a baseline run as regress compares it.
func baselinePoint(p RegressionPoint, b results.Baseline) regress.Point {
	bp := regress.Point{Key: p.BaselineKey, SweepID: b.SweepID, PointID: b.PointID, OK: point.HasFigures(b.Status),
		Status: b.Status, Perf: toRegressPerf(b.Perf), Eval: toRegressEval(b.Eval)}
	if b.Perf != nil {
		bp.ProfileHash = b.Perf.ProfileHash
	}
	return bp
}

// baselineImage is the image a baseline point ran with, from the spec its
// sweep recorded ("" when unknown).
func (a *Activities) baselineImage(ctx context.Context, cache map[string]map[string]string, sweepID, pointID string) (string, error) {
	m, ok := cache[sweepID]
	if !ok {
		pts, err := a.Store.Points(ctx, sweepID)
		if err != nil {
			return "", err
		}
		m = map[string]string{}
		for _, p := range pts {
			var spec point.Spec
			if len(p.SpecJSON) > 0 && json.Unmarshal(p.SpecJSON, &spec) == nil {
				m[p.PointID] = spec.Image
			}
		}
		cache[sweepID] = m
	}
	return m[pointID], nil
}

func toRegressPerf(p *results.PerfResult) *regress.Perf {
	if p == nil {
		return nil
	}
	perf := p.PerfSummary
	return &perf
}

func toRegressEval(e *results.EvalResult) *regress.Eval {
	if e == nil {
		return nil
	}
	return &regress.Eval{Score: e.EMStrict, Floor: e.Floor, Passed: e.Passed}
}

// storeRegressionReport writes the night's report to the artifact store
// (setting rep.ReportURI) and its ledger row, counting findings as given.
func (a *Activities) storeRegressionReport(ctx context.Context, rep *RegressionReport, findings int) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if rep.ReportURI, err = a.Artifacts.Put(ctx, "regression_"+sanitize(rep.SweepID)+".json", bytes.NewReader(data)); err != nil {
		return err
	}
	if data, err = json.Marshal(rep); err != nil {
		return err
	}
	return a.Store.PutRegressionReport(ctx, results.RegressionReport{SweepID: rep.SweepID, NightlyID: rep.NightlyID,
		Baseline: rep.Baseline, Findings: findings, JSON: data, ArtifactURI: rep.ReportURI})
}

// sanitize makes a sweep ID an artifact name.
func sanitize(s string) string { return strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(s) }
