package activities

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/loadgen"
)

// loadProgress is the heartbeat detail of warmup and perf.
type loadProgress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

// perfDuration is how long an agentic perf run dispatches: the point's
// duration (InferenceX: 3600 s) unless the worker caps it.
func (a *Activities) perfDuration(p PointSpec) time.Duration {
	d := time.Duration(p.DurationSec) * time.Second
	if d <= 0 {
		d = time.Hour
	}
	if a.Load.Duration > 0 && a.Load.Duration < d {
		d = a.Load.Duration
	}
	return d
}

// options builds the load generator's options for a point: agentic rows
// replay the AgentX trace (the worker's --trace, else the generated one)
// with conc lanes; fixed sequence-length rows send random ISL/OSL prompts.
func (a *Activities) options(p PointSpec, ep Endpoint) loadgen.Options {
	o := loadgen.Options{
		BaseURL: ep.URL, Model: p.servedModel(&ep), Concurrency: max(p.Conc, 1),
		Seed: a.Load.Seed, TimeScale: a.Load.TimeScale, ClockScale: a.Load.TimeScale,
		PrefillGPUs: p.PrefillGPUs, DecodeGPUs: p.DecodeGPUs, TotalGPUs: p.GPUs,
	}
	if p.PrefillGPUs == 0 || p.DecodeGPUs == 0 {
		o.PrefillGPUs, o.DecodeGPUs = 0, 0
	}
	if p.ISL > 0 && p.OSL > 0 {
		o.ISL, o.OSL, o.RandomRangeRatio, o.IgnoreEOS = p.ISL, p.OSL, 0.8, true
		return o
	}
	o.Trace = a.Load.Trace
	if o.Trace == nil {
		o.Trace = loadgen.DefaultTrace(a.Load.Seed)
	}
	o.Seed = a.Load.Seed + int64(p.Conc) // lanes' start points and markers differ per point
	o.NumWarmups = a.warmupPerLane()
	return o
}

// Warmup sends InferenceX's 2 x conc warmup requests; nothing is recorded.
func (a *Activities) Warmup(ctx context.Context, in StageInput) (err error) {
	if err := a.injectFault(in.Point, StageWarmup); err != nil {
		return err
	}
	if in.Endpoint == nil {
		return classify(fmt.Errorf("%w: warmup without an endpoint", cluster.ErrBadConfig))
	}
	hb := startHeartbeat(ctx, 0, loadProgress{Phase: "warmup"})
	defer hb.Finish(&err)
	o := a.options(in.Point, *in.Endpoint)
	o.Trace = nil // agentic points warm each lane's context inside perf, as aiperf does
	o.ISL, o.OSL, o.IgnoreEOS = 512, 64, true
	o.NumPrompts = loadgen.DefaultNumWarmups(o.Concurrency)
	o.Progress = func(done, total int) { hb.set(loadProgress{"warmup", done, total}) }
	wctx, watch := a.watchAllocation(ctx, in.Alloc)
	res, err := loadgen.Run(wctx, o)
	if lost := watch(err != nil || res.Gate() != nil); lost != nil {
		return classify(lost)
	}
	if err != nil {
		return classify(err)
	}
	if err := res.Gate(); err != nil {
		return classify(fmt.Errorf("warmup: %w", err))
	}
	return nil
}

// Perf runs the measured load, stores the aggregate and per-request records
// as artifacts and records the result in the ledger at once, so a later
// stage failing never costs the perf run.
func (a *Activities) Perf(ctx context.Context, in StageInput) (_ PerfSummary, err error) {
	if err := a.injectFault(in.Point, StagePerf); err != nil {
		return PerfSummary{}, err
	}
	if in.Endpoint == nil {
		return PerfSummary{}, classify(fmt.Errorf("%w: perf without an endpoint", cluster.ErrBadConfig))
	}
	p := in.Point
	var prev PerfSummary
	if a.earlier(ctx, p, StagePerf, &prev) {
		a.log(ctx).Info("perf already recorded by an earlier attempt", zap.String("point", p.PointID))
		return prev, nil
	}
	hb := startHeartbeat(ctx, 0, loadProgress{Phase: "perf"})
	defer hb.Finish(&err)
	if a.PerfClient == "benchmark" {
		return a.perfBenchmark(ctx, in, hb)
	}
	o := a.options(p, *in.Endpoint)
	if o.Trace != nil {
		// Calls still in flight when the window closes finish and count, as
		// in aiperf's grace-period drain; none starts after it.
		o.Duration = a.perfDuration(p)
	}
	o.Progress = func(done, total int) { hb.set(loadProgress{"perf", done, total}) }
	wctx, watch := a.watchAllocation(ctx, in.Alloc)
	res, err := loadgen.Run(wctx, o)
	if lost := watch(err != nil || res.Gate() != nil); lost != nil {
		return PerfSummary{}, classify(lost)
	}
	if err != nil {
		return PerfSummary{}, classify(err)
	}
	if err := res.Gate(); err != nil {
		return PerfSummary{}, classify(fmt.Errorf("perf: %w", err))
	}
	dir, err := a.scratch(p, StagePerf)
	if err != nil {
		return PerfSummary{}, classify(err)
	}
	aggPath := filepath.Join(dir, sanitize(p.PointID)+"_conc"+fmt.Sprint(p.Conc)+".json")
	reqPath := filepath.Join(dir, sanitize(p.PointID)+"_requests.jsonl")
	if err := res.WriteAggregateJSON(aggPath); err != nil {
		return PerfSummary{}, classify(err)
	}
	if err := res.WriteRequestsJSONL(reqPath); err != nil {
		return PerfSummary{}, classify(err)
	}
	ag := res.Aggregate
	out := PerfSummary{
		OutputTputPerGPU: ag.OutputTputPerGPU, TputPerGPU: ag.TputPerGPU, InputTputPerGPU: ag.InputTputPerGPU,
		Interactivity: ag.MedianIntvty, TTFTp90Ms: ag.P90TTFT * 1000, TPOTMedianMs: ag.MedianTPOT * 1000,
		E2ELMedianMs: ag.MedianE2EL * 1000, Requests: ag.NumRequestsTotal, Failed: ag.Failed, Simulated: ag.Simulated,
	}
	if out.AggregateURI, err = a.putArtifact(ctx, aggPath); err != nil {
		return PerfSummary{}, classify(err)
	}
	if out.RequestsURI, err = a.putArtifact(ctx, reqPath); err != nil {
		return PerfSummary{}, classify(err)
	}
	if err := a.putStage(ctx, p, StagePerf, out, []string{out.AggregateURI, out.RequestsURI}, out.Simulated, nil); err != nil {
		return PerfSummary{}, classify(err)
	}
	a.log(ctx).Info("perf done", zap.Float64("output_tput_per_gpu", out.OutputTputPerGPU),
		zap.Float64("interactivity", out.Interactivity), zap.Float64("ttft_p90_ms", out.TTFTp90Ms), zap.Bool("simulated", out.Simulated))
	return out, nil
}
