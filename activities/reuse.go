package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// measurement is this worker's half of a point's measurement profile: the
// load and eval settings it measures with.
func (a *Activities) measurement(p point.Spec) point.Measurement {
	m := point.Measurement{
		Simulated: a.Simulated, Engine: a.Engine,
		PerfDurationMs: a.perfDuration(p).Milliseconds(), Warmup: "2xconc",
		TimeScale: a.Load.TimeScale, Seed: a.Load.Seed,
		EvalMode: string(a.evalMode()), EvalLimit: a.GSM8K.Limit, EvalConcurrency: a.GSM8K.Concurrency,
		EvalFloor: a.evalFloor(p),
	}
	if m.Engine == "" {
		m.Engine = "simulator"
		if !a.Simulated {
			m.Engine = "engine"
		}
	}
	if p.ISL > 0 && p.OSL > 0 {
		m.Workload = "random-isl-osl"
	} else {
		m.Workload = "agentx:" + a.traceName()
		m.Warmup = fmt.Sprintf("2xconc+%d/lane", a.warmupPerLane())
	}
	a.perfProfile(p, &m)
	if p.WarmupSkipped {
		m.Warmup = WarmupSkipped
	}
	return m
}

// WarmupSkipped is the measurement profile's warmup of figures measured
// after an operator skipped the warmup stage.
const WarmupSkipped = "skipped"

func (a *Activities) traceName() string {
	if a.Load.Trace == nil {
		return loadgen.DefaultTraceName
	}
	return a.Load.TraceName
}

func (a *Activities) warmupPerLane() int {
	if a.Load.WarmupPerLane > 0 {
		return a.Load.WarmupPerLane
	}
	return 1
}

func (a *Activities) evalMode() gsm8k.Mode {
	if a.GSM8K.Mode == "" {
		return gsm8k.ModeLMEval
	}
	return a.GSM8K.Mode
}

// evalFloor is the floor the eval of p is gated on with this worker's
// thresholds.
func (a *Activities) evalFloor(p point.Spec) float64 {
	floor := a.GSM8K.DefaultFloor
	if a.GSM8K.Thresholds != nil {
		if f, ok := a.GSM8K.Thresholds.Floor(a.evalMode().Task(), p.ModelPrefix); ok {
			floor = f
		}
	}
	return floor
}

// measured is the full profile of a stage's output of p on this worker.
func (a *Activities) measured(p point.Spec, stage string) point.Measured {
	return point.ForStage(stage, p.Profile, a.measurement(p))
}

// want is the reuse stamp a stage output of p must carry to stand in here.
func (a *Activities) want(p point.Spec, stage string) point.Stamp {
	m := a.measured(p, stage)
	return point.Stamp{Identity: p.Identity, ProfileHash: m.Hash(), Simulated: m.Measurement.Simulated, Profile: &m}
}

// LookupReuse returns the durable outputs of earlier sweeps that may stand
// in for the point's: same identity and same measurement profile, never a
// simulated output for a real engine. A reused eval is gated again on the
// current floor. For each stage with nothing to reuse it says why.
func (a *Activities) LookupReuse(ctx context.Context, req ReuseRequest) (Reused, error) {
	var out Reused
	p := req.Point
	for _, stage := range req.Stages {
		if stage == point.StageEval && !p.Eval {
			continue
		}
		want := a.want(p, stage)
		cands, err := a.Store.StageOutputCandidates(ctx, p.Identity, stage, req.FromSweeps)
		if err != nil {
			return out, classify(err)
		}
		var hit *results.StageOutput
		why := ""
		for i := range cands {
			ok, reason := point.CanReuse(cands[i].Stamp(), want)
			if ok {
				if reason, err = a.producerEnded(ctx, cands[i]); err != nil {
					return out, classify(err)
				}
				ok = reason == ""
			}
			if ok {
				hit = &cands[i]
				break
			}
			if why == "" {
				why = reason // the newest candidate's reason
			}
		}
		if hit == nil {
			if why == "" {
				why = a.noCandidate(ctx, p, req.FromSweeps)
			}
			out.Notes = append(out.Notes, fmt.Sprintf("%s not reused: %s", stage, why))
			a.log(ctx).Info("not reusing", zap.String("point", p.PointID), zap.String("stage", stage), zap.String("why", why))
			continue
		}
		sweep, run := hit.Origin()
		switch stage {
		case point.StagePerf:
			var s point.PerfSummary
			if err := json.Unmarshal(hit.OutputJSON, &s); err != nil {
				out.Notes = append(out.Notes, fmt.Sprintf("perf not reused: stored output unreadable: %v", err))
				continue
			}
			out.Perf, out.PerfSweep, out.PerfRun = &s, sweep, run
		case point.StageEval:
			var s point.EvalSummary
			if err := json.Unmarshal(hit.OutputJSON, &s); err != nil {
				out.Notes = append(out.Notes, fmt.Sprintf("eval not reused: stored output unreadable: %v", err))
				continue
			}
			s = a.regate(p, s)
			out.Eval, out.EvalSweep, out.EvalRun = &s, sweep, run
		}
		a.log(ctx).Info("reusing", zap.String("point", p.PointID), zap.String("stage", stage), zap.String("from_sweep", sweep), zap.String("from_run", run))
	}
	return out, nil
}

// producerEnded says why the point that measured a stored output does not
// vouch for it ("" when it does): only a point that ran to its end
// (completed, or eval-failed with its figures) does. A point that failed,
// was aborted, or ended incomplete after an operator skipped a stage may
// have stored figures that its end disowns.
func (a *Activities) producerEnded(ctx context.Context, o results.StageOutput) (string, error) {
	sweep, _ := o.Origin()
	pts, err := a.Store.Points(ctx, sweep)
	if err != nil {
		return "", err
	}
	for _, q := range pts {
		if q.Identity != o.Identity {
			continue
		}
		if point.HasFigures(q.Status) {
			return "", nil
		}
		return fmt.Sprintf("the point that measured it in %s ended %s", sweep, cmp.Or(q.Status, "without a status")), nil
	}
	return fmt.Sprintf("the point that measured it in %s has no recorded end", sweep), nil
}

// noCandidate explains an empty lookup: an earlier sweep may hold the same
// exp-name and concurrency under another identity (a new recipe, image,
// launcher or backend).
func (a *Activities) noCandidate(ctx context.Context, p point.Spec, from []string) string {
	for _, sw := range from {
		pts, err := a.Store.Points(ctx, sw)
		if err != nil {
			continue
		}
		for _, q := range pts {
			if q.ExpName == p.ExpName && q.Conc == p.Conc && q.ConfigKey == p.ConfigKey && q.Identity != p.Identity {
				return fmt.Sprintf("point identity differs from %s's (deployment changed: recipe, image, model, launcher or backend)", sw)
			}
		}
	}
	return fmt.Sprintf("no output for identity %s in %v", p.Identity, from)
}

// regate gates a reused eval on the floor that applies now.
func (a *Activities) regate(p point.Spec, s point.EvalSummary) point.EvalSummary {
	floor := a.evalFloor(p)
	v := gsm8k.Gate(gsm8k.Summary{EMStrict: s.EMStrict, EMFlexible: s.EMFlexible, NEff: s.NEff}, floor)
	s.Floor, s.Passed, s.Reason = floor, v.Passed, v.Reason
	return s
}

// putStage records a durable stage output in the ledger with the profile it
// was measured with, once per (sweep, identity, stage): a retried attempt
// that writes the same output is a no-op, a different one an error.
func (a *Activities) putStage(ctx context.Context, p point.Spec, stage string, out any, uris []string, simulated bool, from *ReuseSource) error {
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	m := a.measured(p, stage)
	prof, err := json.Marshal(m)
	if err != nil {
		return err
	}
	o := results.StageOutput{
		SweepID: p.SweepID, PointID: p.PointID, Identity: p.Identity, Stage: stage,
		ProfileHash: m.Hash(), ProfileJSON: prof, Attempt: 1, OutputJSON: data, ArtifactURIs: uris, Simulated: simulated,
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		o.Attempt, o.RunID = int(info.Attempt), info.WorkflowExecution.RunID
	}
	if from != nil {
		// Keep the producer's profile: it is what the figures mean. Without
		// it the output would carry this worker's profile, which is not
		// how the figures were measured, so nothing is written.
		o.SourceSweep, o.SourceRun = from.Sweep, from.Run
		old, ok, err := a.Store.StageOutput(ctx, from.Sweep, p.Identity, stage)
		if err != nil {
			return fmt.Errorf("reading the profile of the reused %s output of %s in sweep %s: %w", stage, p.PointID, from.Sweep, err)
		}
		if !ok {
			// No retry brings it back (classify: ResultConflict).
			return fmt.Errorf("the reused %s output of %s is no longer in sweep %s, so its profile is unknown: %w",
				stage, p.PointID, from.Sweep, results.ErrConflict)
		}
		o.ProfileHash, o.ProfileJSON = old.ProfileHash, old.ProfileJSON
	}
	_, err = a.Store.PutStageOutput(ctx, o)
	return err
}

// earlier returns this sweep's stored output of a stage for p, written by
// an earlier attempt whose completion was lost: a retry returns it instead
// of measuring again, so one point never gets two different figures.
func (a *Activities) earlier(ctx context.Context, p point.Spec, stage string, into any) bool {
	o, ok, err := a.Store.StageOutput(ctx, p.SweepID, p.Identity, stage)
	if err != nil || !ok || o.SourceSweep != "" {
		return false
	}
	if ok, _ := point.CanReuse(o.Stamp(), a.want(p, stage)); !ok {
		return false
	}
	return json.Unmarshal(o.OutputJSON, into) == nil
}
