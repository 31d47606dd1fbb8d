package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/internal/atomicfile"
	"github.com/sweepflow/sweepflow/point"
)

// GateMaxErrorRate is the failed-request share above which a run is invalid
// (InferenceX/AIPerf --failed-request-threshold 0.10).
const GateMaxErrorRate = 0.10

// Gate fails the run when nothing succeeded or more than 10 % of the
// measured requests failed.
func (r *Result) Gate() error {
	a := &r.Aggregate
	if a.Completed == 0 {
		return fmt.Errorf("loadgen: gate failed: no request succeeded (%d sent%s)", a.NumRequestsTotal, errorSummary(a.ErrorCategories))
	}
	if a.ErrorRate > GateMaxErrorRate {
		return fmt.Errorf("loadgen: gate failed: error rate %.1f%% exceeds %.0f%% (%d of %d failed%s)",
			100*a.ErrorRate, 100*GateMaxErrorRate, a.Failed, a.NumRequestsTotal, errorSummary(a.ErrorCategories))
	}
	return nil
}

func errorSummary(cats map[string]int) string {
	if len(cats) == 0 {
		return ""
	}
	keys := make([]string, 0, len(cats))
	for k := range cats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, cats[k])
	}
	return ": " + strings.Join(parts, ", ")
}

// WriteAggregateJSON writes the aggregate as indented JSON, atomically
// (temp file + rename) so a reader never sees half a result.
func (r *Result) WriteAggregateJSON(path string) error {
	b, err := json.MarshalIndent(&r.Aggregate, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'))
}

// WriteRequestsJSONL writes one JSON record per request: warmups first
// (flagged "warmup", times relative to the warmup start), then the measured
// requests (times relative to the run start).
func (r *Result) WriteRequestsJSONL(path string) error {
	return atomicfile.Write(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		enc := json.NewEncoder(bw)
		for _, set := range [][]RequestRecord{r.Warmups, r.Requests} {
			for i := range set {
				if err := enc.Encode(&set[i]); err != nil {
					return err
				}
			}
		}
		return bw.Flush()
	})
}

// Summary is the run's ledger summary (headline figures in the ledger's
// units) with the evidence the validity gate judges it on.
func (a *Aggregate) Summary() point.PerfSummary {
	ev := a.Evidence()
	return point.PerfSummary{
		OutputTputPerGPU: a.OutputTputPerGPU, TputPerGPU: a.TputPerGPU, InputTputPerGPU: a.InputTputPerGPU,
		Interactivity: a.MedianIntvty, TTFTp90Ms: a.P90TTFT * 1000, TTFTp99Ms: a.P99TTFT * 1000, TPOTMedianMs: a.MedianTPOT * 1000,
		E2ELMedianMs: a.MedianE2EL * 1000, Requests: a.NumRequestsTotal, Failed: a.Failed, Simulated: a.Simulated,
		Evidence: &ev,
	}
}

// Validate runs the validity gate (point.ValidatePerf) on a run made with
// opts.
func (r *Result) Validate(opts Options) error {
	return point.ValidatePerf(r.Aggregate.Summary(), opts.Plan())
}

// Evidence is what the validity gate (point.ValidatePerf) judges a run's
// figures on, in engine time.
func (a *Aggregate) Evidence() point.PerfEvidence {
	lag := a.ClientLag
	ev := point.PerfEvidence{
		Client: point.PerfClientLoadgen, Completed: a.Completed, OutputTokens: a.TotalOutputTokens,
		WindowSec: a.Window, MeanPromptTokens: a.MeanInputTokens, MeanOutputTokens: a.MeanOutputTokens,
		ITLMedianMs: a.MedianITL * 1000, ClientLag: &lag, ServerLag: a.ServerLag, LanesFinished: -1,
	}
	if a.ScenarioType == ScenarioAgentic {
		ev.LanesFinished = a.LanesFinished
	}
	return ev
}

// Plan is what a run with these options must show it measured: the
// requests it sends (num-prompts, default 10 x concurrency) or, for a
// replay, a finished call per lane over the whole duration.
func (o Options) Plan() point.PerfPlan {
	scale := o.ClockScale
	if scale <= 0 {
		scale = 1
	}
	p := point.PerfPlan{ClockScale: scale, WindowSec: o.Duration.Seconds() / scale}
	if len(o.Trace) > 0 {
		p.Scenario, p.Lanes = ScenarioAgentic, o.Concurrency
		return p
	}
	p.Scenario, p.ISL, p.OSL, p.RangeRatio = ScenarioFixedSeqLen, o.ISL, o.OSL, o.RandomRangeRatio
	switch {
	case o.NumPrompts > 0: // bounded by requests; a duration only cuts it short
		p.Requests, p.WindowSec = o.NumPrompts, 0
	case o.Duration == 0:
		p.Requests = 10 * o.Concurrency
	}
	return p
}
