package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/point"
)

// evalProgress is the eval's heartbeat detail.
type evalProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Eval runs GSM8K against the point's server and gates it on the floor for
// the model prefix. Below the floor is a verdict (Passed=false), not an
// error; more than 1 % failed requests is a retryable error.
func (a *Activities) Eval(ctx context.Context, in StageInput) (_ point.EvalSummary, err error) {
	if err := a.injectFault(in.Point, point.StageEval); err != nil {
		return point.EvalSummary{}, err
	}
	if in.Endpoint == nil {
		return point.EvalSummary{}, classify(fmt.Errorf("%w: eval without an endpoint", cluster.ErrBadConfig))
	}
	p := in.Point
	var prev point.EvalSummary
	if a.earlier(ctx, p, point.StageEval, &prev) {
		a.log(ctx).Info("eval already recorded by an earlier attempt", zap.String("point", p.PointID))
		return prev, nil
	}
	conc := a.GSM8K.Concurrency
	if conc <= 0 {
		conc = max(p.Conc, 1)
	}
	hb := startHeartbeat(ctx, 0, evalProgress{})
	defer hb.Finish(&err)
	mode := a.evalMode()
	wctx, watch := a.watchAllocation(ctx, in.Alloc)
	res, err := gsm8k.Run(wctx, gsm8k.Options{
		BaseURL: in.Endpoint.URL, Model: servedModel(p, in.Endpoint), Mode: mode, Limit: a.GSM8K.Limit, Concurrency: conc,
		TrainPath: a.GSM8K.TrainPath, TestPath: a.GSM8K.TestPath, CacheDir: a.GSM8K.CacheDir,
		Progress: func(done, total int) { hb.set(evalProgress{done, total}) },
	})
	if lost := watch(err != nil); lost != nil {
		return point.EvalSummary{}, a.nodeFailure(ctx, point.StageEval, in.Alloc, lost)
	}
	var failed *gsm8k.FailedRequestsError
	if errors.As(err, &failed) {
		return point.EvalSummary{}, classify(err)
	}
	if err != nil {
		return point.EvalSummary{}, classify(err)
	}
	floor := a.evalFloor(p)
	verdict := gsm8k.Gate(res.Summary, floor)

	dir, err := a.scratch(p, point.StageEval)
	if err != nil {
		return point.EvalSummary{}, classify(err)
	}
	identity := map[string]any{"model_prefix": p.ModelPrefix, "model": p.Model, "conc": p.Conc, "exp_name": p.ExpName, "point_id": p.PointID,
		"config_key": p.ConfigKey, "topology": p.Topology, "identity": p.Identity, "sweep_id": p.SweepID, "image": p.Image}
	rec := gsm8k.EvalRecord(res.Summary, identity, res.Simulated, &verdict)
	resultPath := filepath.Join(dir, "eval_"+sanitize(p.PointID)+".json")
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(resultPath, data, 0o644); err != nil {
		return point.EvalSummary{}, classify(err)
	}
	samplesPath := filepath.Join(dir, "eval_samples_"+sanitize(p.PointID)+".jsonl")
	f, err := os.Create(samplesPath)
	if err != nil {
		return point.EvalSummary{}, classify(err)
	}
	werr := gsm8k.WriteSamplesJSONL(f, res.Samples)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return point.EvalSummary{}, classify(werr)
	}
	out := point.EvalSummary{EMStrict: res.Summary.EMStrict, EMFlexible: res.Summary.EMFlexible, NEff: res.Summary.NEff,
		Floor: floor, Passed: verdict.Passed, Reason: verdict.Reason, Simulated: res.Simulated}
	if out.ResultURI, err = a.putArtifact(ctx, resultPath); err != nil {
		return point.EvalSummary{}, classify(err)
	}
	if out.SamplesURI, err = a.putArtifact(ctx, samplesPath); err != nil {
		return point.EvalSummary{}, classify(err)
	}
	// Durable as soon as it exists: a later failure does not cost the eval.
	if err := a.putStage(ctx, p, point.StageEval, out, []string{out.ResultURI, out.SamplesURI}, out.Simulated, nil); err != nil {
		return point.EvalSummary{}, classify(err)
	}
	a.log(ctx).Info("eval done", zap.Float64("em_strict", out.EMStrict), zap.Float64("em_flexible", out.EMFlexible),
		zap.Bool("passed", out.Passed), zap.Float64("floor", floor))
	return out, nil
}
