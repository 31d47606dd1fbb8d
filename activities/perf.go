package activities

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
)

// loadProgress is the heartbeat detail of warmup and perf.
type loadProgress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
	// Refused counts this activity's attempts whose result the validity
	// gate refused, so a retry knows it is the last.
	Refused int `json:"refused,omitempty"`
}

// perfDuration is how long an agentic perf run dispatches, in wall time:
// the point's duration (InferenceX: 3600 s of the engine's clock) on the
// server's clock (a simulator at time scale s runs it in s times the wall
// time), unless the worker's cap (wall time) is shorter.
func (a *Activities) perfDuration(p point.Spec) time.Duration {
	row := time.Duration(p.DurationSec) * time.Second
	if row <= 0 {
		row = time.Hour
	}
	d := time.Duration(float64(row) * a.clockScale())
	if a.Load.Duration > 0 && a.Load.Duration < d {
		d = a.Load.Duration
	}
	return d
}

// perfCapped: on a simulated cluster the worker's perf-duration cap cut
// this point's window below its row's duration.
func (a *Activities) perfCapped(p point.Spec) bool {
	if !a.Simulated || a.Load.Duration <= 0 {
		return false
	}
	row := time.Duration(p.DurationSec) * time.Second
	if row <= 0 {
		row = time.Hour
	}
	return a.Load.Duration < time.Duration(float64(row)*a.clockScale())
}

// clockScale is the server clock's rate against real time: the
// simulator's time scale, 1 for a real engine.
func (a *Activities) clockScale() float64 {
	if a.Load.TimeScale > 0 {
		return a.Load.TimeScale
	}
	return 1
}

// pointSeed is the seed of a point's prompts (fixed-seq-len) or of its
// lanes' start points and markers (agentic): derived from the worker's seed
// and the point's identity apart from the image (its baseline key), so no
// two points of a deployment send the same prompts, a later point cannot
// hit what an earlier one left cached, and a nightly on a new image sends
// the prompts its baseline was measured with.
func (a *Activities) pointSeed(p point.Spec) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "sweepflow-point-seed %d %s", a.Load.Seed, cmp.Or(p.BaselineKey, p.Identity))
	return int64(h.Sum64() &^ (1 << 63))
}

// perfProfile fills the perf half of this worker's measurement of p: the
// client, its version and fixed settings, the seeds, the prefix-cache
// treatment, the container remapping and the perf window in engine time.
func (a *Activities) perfProfile(p point.Spec, m *point.Measurement) {
	m.PerfClient = point.PerfClientLoadgen
	if a.PerfClient == point.PerfClientBenchmark {
		m.PerfClient = point.PerfClientBenchmark
	}
	// The window the engine measures over (the wall duration on its clock).
	m.PerfDurationMs = int64(float64(a.perfDuration(p).Milliseconds()) / a.clockScale())
	if m.PerfClient == point.PerfClientLoadgen || a.Simulated {
		// Sweepflow's own load generator measures (the simulated benchmark
		// role runs it too), with these seeds.
		m.LoadgenVersion, m.PointSeed = loadgen.Version, a.pointSeed(p)
		if p.ISL == 0 || p.OSL == 0 {
			m.TraceSeed = a.Load.Seed
		}
	}
	if p.ISL > 0 && p.OSL > 0 {
		m.RandomRangeRatio, m.WarmupISL, m.WarmupOSL = fixedRangeRatio, warmupISL, warmupOSL
	}
	m.PrefixCache = "flush"
	m.PowerSource = a.powerSource()
	if len(a.Containers) > 0 {
		m.Containers = a.Containers
	}
}

// Warmup request sizes of fixed-seq-len points, and the range ratio their
// prompts and outputs are drawn with (InferenceX: 0.8).
const (
	warmupISL, warmupOSL = 512, 64
	fixedRangeRatio      = 0.8
)

// options builds the load generator's options for a point: agentic rows
// replay the AgentX trace (the worker's --trace, else the generated one)
// with conc lanes; fixed sequence-length rows send random ISL/OSL prompts.
func (a *Activities) options(p point.Spec, ep cluster.Server) loadgen.Options {
	o := loadgen.Options{
		BaseURL: ep.URL, Model: servedModel(p, &ep), Concurrency: max(p.Conc, 1),
		Seed: a.pointSeed(p), TimeScale: a.Load.TimeScale, ClockScale: a.Load.TimeScale,
		PrefillGPUs: p.PrefillGPUs, DecodeGPUs: p.DecodeGPUs, TotalGPUs: p.GPUs,
	}
	if p.PrefillGPUs == 0 || p.DecodeGPUs == 0 {
		o.PrefillGPUs, o.DecodeGPUs = 0, 0
	}
	if p.ISL > 0 && p.OSL > 0 {
		o.ISL, o.OSL, o.RandomRangeRatio, o.IgnoreEOS = p.ISL, p.OSL, fixedRangeRatio, true
		return o
	}
	o.Trace = a.Load.Trace
	if o.Trace == nil {
		o.Trace = loadgen.DefaultTrace(a.Load.Seed)
	}
	o.NumWarmups = a.warmupPerLane()
	return o
}

// Warmup sends InferenceX's 2 x conc warmup requests; nothing is recorded.
func (a *Activities) Warmup(ctx context.Context, in StageInput) (err error) {
	if err := a.injectFault(in.Point, point.StageWarmup); err != nil {
		return err
	}
	if in.Endpoint == nil {
		return classify(fmt.Errorf("%w: warmup without an endpoint", cluster.ErrBadConfig))
	}
	hb := startHeartbeat(ctx, 0, loadProgress{Phase: "warmup"})
	defer hb.Finish(&err)
	o := a.options(in.Point, *in.Endpoint)
	o.Trace = nil // agentic points warm each lane's context inside perf, as aiperf does
	o.ISL, o.OSL, o.IgnoreEOS = warmupISL, warmupOSL, true
	o.NumPrompts = loadgen.DefaultNumWarmups(o.Concurrency)
	o.Progress = func(done, total int) { hb.set(loadProgress{Phase: "warmup", Done: done, Total: total}) }
	wctx, watch := a.watchAllocation(ctx, in.Alloc)
	res, err := loadgen.Run(wctx, o)
	if lost := watch(err != nil || res.Gate() != nil); lost != nil {
		return a.nodeFailure(ctx, point.StageWarmup, in.Alloc, lost)
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
func (a *Activities) Perf(ctx context.Context, in StageInput) (_ point.PerfSummary, err error) {
	if err := a.injectFault(in.Point, point.StagePerf); err != nil {
		return point.PerfSummary{}, err
	}
	if in.Endpoint == nil {
		return point.PerfSummary{}, classify(fmt.Errorf("%w: perf without an endpoint", cluster.ErrBadConfig))
	}
	p := in.Point
	var prev point.PerfSummary
	if a.earlier(ctx, p, point.StagePerf, &prev) {
		a.log(ctx).Info("perf already recorded by an earlier attempt", zap.String("point", p.PointID))
		return prev, nil
	}
	refused := priorRefusals(ctx)
	hb := startHeartbeat(ctx, 0, loadProgress{Phase: "perf", Refused: refused})
	defer hb.Finish(&err)
	flushed, ferr := flushPrefixCache(ctx, in.Endpoint.URL)
	if ferr != nil {
		a.log(ctx).Warn("prefix cache not flushed before perf", zap.String("point", p.PointID), zap.Error(ferr))
	}
	cut, err := a.chaosCut(ctx, p)
	if err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if a.PerfClient == point.PerfClientBenchmark {
		return a.perfBenchmark(ctx, in, hb, flushed, refused, cut)
	}
	o := a.options(p, *in.Endpoint)
	if o.Trace != nil {
		// Calls still in flight when the window closes finish and count, as
		// in aiperf's grace-period drain; none starts after it.
		o.Duration = a.perfDuration(p)
	}
	o.CutStreamsAfter = cut
	o.Progress = func(done, total int) { hb.set(loadProgress{Phase: "perf", Done: done, Total: total, Refused: refused}) }
	powerRun, powerErr := a.startPower(ctx, in)
	stopPower := func(res *loadgen.Result) *energy.Figures {
		if powerRun == nil {
			return powerErr
		}
		r := powerRun
		powerRun = nil
		if res == nil {
			_, _, _, _ = r.run.Stop(ctx)
			return nil
		}
		return a.stopPower(ctx, r, a.wallWindow(res), tokensOf(res.Aggregate))
	}
	defer stopPower(nil) // every early return ends the sampling
	wctx, watch := a.watchAllocation(ctx, in.Alloc)
	res, err := loadgen.Run(wctx, o)
	if lost := watch(err != nil || res.Gate() != nil); lost != nil {
		return point.PerfSummary{}, a.nodeFailure(ctx, point.StagePerf, in.Alloc, lost)
	}
	if err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if err := res.Gate(); err != nil {
		return point.PerfSummary{}, classify(fmt.Errorf("perf: %w", err))
	}
	dir, err := a.scratch(p, point.StagePerf)
	if err != nil {
		return point.PerfSummary{}, classify(err)
	}
	aggPath := filepath.Join(dir, sanitize(p.PointID)+"_conc"+fmt.Sprint(p.Conc)+".json")
	reqPath := filepath.Join(dir, sanitize(p.PointID)+"_requests.jsonl")
	if err := res.WriteAggregateJSON(aggPath); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if err := res.WriteRequestsJSONL(reqPath); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	out := res.Aggregate.Summary()
	out.Evidence.PrefixCacheFlushed = flushed
	if err := a.validate(ctx, hb, p, out, o.Plan(), refused); err != nil {
		return point.PerfSummary{}, err
	}
	if out.Power = stopPower(res); out.Power == nil && a.Simulated {
		out.Power = a.simulatedPower(p, in.Alloc, res)
	}
	if err := a.gatePower(ctx, p, out); err != nil {
		return point.PerfSummary{}, err
	}
	if out.AggregateURI, err = a.putArtifact(ctx, aggPath); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if out.RequestsURI, err = a.putArtifact(ctx, reqPath); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if err := a.putStage(ctx, p, point.StagePerf, out, []string{out.AggregateURI, out.RequestsURI}, out.Simulated, nil); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	a.log(ctx).Info("perf done", zap.Float64("output_tput_per_gpu", out.OutputTputPerGPU), zap.String("power", out.Power.Reason()),
		zap.Float64("interactivity", out.Interactivity), zap.Float64("ttft_p90_ms", out.TTFTp90Ms), zap.Bool("simulated", out.Simulated))
	return out, nil
}

// validate runs the validity gate on a perf result before it is stored. A
// refused result is an InvalidResult: the activity's first refusal is
// retried (a client that fell behind, a stream a proxy held back, may not
// recur), the second goes to the operator gate with the evidence. It never
// reaches the ledger.
func (a *Activities) validate(ctx context.Context, hb *heartbeater, p point.Spec, out point.PerfSummary, plan point.PerfPlan, prior int) error {
	plan.Capped = a.perfCapped(p)
	err := point.ValidatePerf(out, plan)
	if err == nil {
		return nil
	}
	refused := prior + 1
	hb.set(loadProgress{Phase: "perf: result refused", Refused: refused})
	msg := "perf: " + point.Explain(err)
	a.log(ctx).Warn("perf result refused by the validity gate", zap.String("point", p.PointID), zap.String("reason", msg), zap.Int("refusals", refused))
	if refused >= 2 {
		return temporal.NewNonRetryableApplicationError(msg, string(failure.ErrInvalidResult), err, *out.Evidence)
	}
	return temporal.NewApplicationErrorWithCause(msg, string(failure.ErrInvalidResult), err, *out.Evidence)
}

// priorRefusals is how many earlier attempts of this activity had their
// result refused (their last heartbeat details say so).
func priorRefusals(ctx context.Context) int {
	var prev loadProgress
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &prev)
	}
	return prev.Refused
}

// flushPrefixCache empties the server's prefix cache where the engine
// offers it (SGLang's POST /flush_cache, and the simulator's), so a point
// never measures on prompts an earlier point of the deployment left
// cached. It reports whether the cache was flushed; an engine without the
// endpoint (404, 405) is not an error.
func flushPrefixCache(ctx context.Context, base string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/flush_cache", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return false, nil
	}
	return false, fmt.Errorf("POST /flush_cache: HTTP %d", resp.StatusCode)
}
