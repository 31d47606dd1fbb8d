package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
)

// Endpoint benchmarks an OpenAI-compatible server: the flags of
// `starter bench`.
type Endpoint struct {
	BaseURL, Path, Model                string
	Concurrency, NumPrompts, NumWarmups int
	RequestRate                         string
	Burstiness                          float64
	Duration, RequestTimeout            time.Duration
	ISL, OSL                            int
	RangeRatio                          float64
	IgnoreEOS                           bool
	OutputJSON, SaveRequests, OutputDir string
	Trace                               string
	TrajectoryStartMin                  float64
	TrajectoryStartMax                  float64
	IdleGapCap                          time.Duration
	Seed                                int64
	PrefillGPUs, DecodeGPUs, TotalGPUs  int
	Deployment                          string
	GPUsPerNode                         int
	ClockScale, TimeScale               float64
	JSON, NoProgress                    bool
	ExtraBody                           string
}

// Run benchmarks the server with opts (from Options) and prints the
// aggregate; a run the gates refuse is an error after the figures.
func (f Endpoint) Run(ctx context.Context, opts loadgen.Options, stdout, stderr io.Writer) error {
	if f.OutputDir != "" {
		if f.OutputJSON == "" {
			f.OutputJSON = filepath.Join(f.OutputDir, "aggregate.json")
		}
		if f.SaveRequests == "" {
			f.SaveRequests = filepath.Join(f.OutputDir, "requests.jsonl")
		}
	}
	opts.ClockScale = f.ClockScale
	if opts.ClockScale == 0 {
		opts.ClockScale = simClockScale(ctx, opts.BaseURL)
	}
	// The client keeps every chunk timestamp; fewer GCs keep it off the
	// critical path (GOGC in the environment still wins).
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog := newBenchProgress(stderr, !f.NoProgress)
	opts.Progress = prog.update
	res, runErr := loadgen.Run(ctx, opts)
	prog.finish()
	if res == nil {
		return runErr
	}
	if f.OutputJSON != "" {
		if err := res.WriteAggregateJSON(f.OutputJSON); err != nil {
			return err
		}
	}
	if f.SaveRequests != "" {
		if err := res.WriteRequestsJSONL(f.SaveRequests); err != nil {
			return err
		}
	}
	if f.JSON {
		b, err := json.MarshalIndent(&res.Aggregate, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		printBenchTable(stdout, &res.Aggregate)
	}
	if runErr != nil {
		return runErr
	}
	if err := res.Gate(); err != nil {
		return err
	}
	// The validity gate the perf stage stores figures through.
	if err := res.Validate(opts); err != nil {
		return errors.New(point.Explain(err))
	}
	return nil
}

// Options turns the flags into loadgen options; an error is a bad flag
// value (a usage error).
func (f *Endpoint) Options() (loadgen.Options, error) {
	o := loadgen.Options{
		BaseURL: f.BaseURL, Endpoint: f.Path, Model: f.Model,
		Concurrency: f.Concurrency, NumPrompts: f.NumPrompts, NumWarmups: f.NumWarmups,
		Burstiness: f.Burstiness, Duration: f.Duration, ISL: f.ISL, OSL: f.OSL,
		RandomRangeRatio: f.RangeRatio, IgnoreEOS: f.IgnoreEOS, TimeScale: f.TimeScale,
		Seed: f.Seed, RequestTimeout: f.RequestTimeout,
		PrefillGPUs: f.PrefillGPUs, DecodeGPUs: f.DecodeGPUs, TotalGPUs: f.TotalGPUs,
	}
	if f.Concurrency < 1 {
		return o, fmt.Errorf("--concurrency must be >= 1 (got %d)", f.Concurrency)
	}
	if f.NumWarmups < 0 {
		o.NumWarmups = loadgen.DefaultNumWarmups(f.Concurrency)
		if f.Trace != "" {
			o.NumWarmups = 1
		}
	}
	switch r := strings.ToLower(strings.TrimSpace(f.RequestRate)); r {
	case "inf", "+inf", "infinity", "0":
		o.RequestRate = math.Inf(1)
	default:
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 || math.IsNaN(v) {
			return o, fmt.Errorf("--request-rate: want a positive number or inf, got %q", f.RequestRate)
		}
		o.RequestRate = v
	}
	if f.RangeRatio <= 0 || f.RangeRatio > 1 {
		return o, fmt.Errorf("--random-range-ratio must be in (0, 1] (got %g)", f.RangeRatio)
	}
	if f.Trace == "" && (f.ISL < 1 || f.OSL < 1) {
		return o, fmt.Errorf("--isl and --osl must be >= 1 (got %d, %d)", f.ISL, f.OSL)
	}
	if f.TimeScale <= 0 {
		return o, fmt.Errorf("--time-scale must be > 0 (got %g)", f.TimeScale)
	}
	if f.Deployment != "" {
		if f.PrefillGPUs != 0 || f.DecodeGPUs != 0 || f.TotalGPUs != 0 {
			return o, errors.New("--deployment and --prefill-gpus/--decode-gpus/--total-gpus are exclusive")
		}
		d, err := sim.ParseDeployment(f.Deployment)
		if err != nil {
			return o, fmt.Errorf("--deployment: %v", err)
		}
		d.GPUsPerNode = f.GPUsPerNode
		if d.Disagg {
			o.PrefillGPUs, o.DecodeGPUs = d.PrefillGPUs(), d.DecodeGPUs()
		} else {
			o.TotalGPUs = d.TotalGPUs()
		}
	}
	if f.Trace != "" {
		tr, err := loadgen.LoadTrace(f.Trace)
		if err != nil {
			return o, err
		}
		o.Trace = tr
		o.TrajectoryStartMin, o.TrajectoryStartMax, o.IdleGapCap = f.TrajectoryStartMin, f.TrajectoryStartMax, f.IdleGapCap
		if f.TrajectoryStartMin == 0 && f.TrajectoryStartMax == 0 {
			o.StartAtBeginning = true
		}
		if o.IdleGapCap == 0 {
			o.IdleGapCap = -1 // on the command line 0 means no cap
		}
	}
	if f.ExtraBody != "" {
		if err := json.Unmarshal([]byte(f.ExtraBody), &o.Extra); err != nil {
			return o, fmt.Errorf("--extra-body: want a JSON object: %v", err)
		}
	}
	return o, nil
}

// printBenchTable renders the aggregate for humans.
func printBenchTable(w io.Writer, a *loadgen.Aggregate) {
	simNote := ""
	if a.Simulated {
		simNote = "  [SIMULATED: numbers come from the sweepflow simulator, not hardware]"
	}
	fmt.Fprintf(w, "Serving benchmark: %s  model %s  %s%s\n", a.BaseURL+a.Endpoint, a.Model, a.ScenarioType, simNote)
	rate := "inf (closed loop)"
	if !math.IsInf(float64(a.RequestRate), 1) && a.RequestRate != 0 {
		rate = fmt.Sprintf("%g req/s (burstiness %g)", float64(a.RequestRate), a.Burstiness)
	}
	fmt.Fprintf(w, "concurrency %d  request rate %s  warmups %d  started %s\n\n", a.Conc, rate, a.NumWarmups, a.StartedAt)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Requests\t%d ok, %d failed (%.1f%%)\n", a.Completed, a.Failed, 100*a.ErrorRate)
	fmt.Fprintf(tw, "Duration\t%.2f s\n", a.Duration)
	if a.ClockScale > 0 {
		fmt.Fprintf(tw, "Clock\tserver time-scale %g: all times converted to the engine's clock\n", a.ClockScale)
	}
	fmt.Fprintf(tw, "Prompt tokens / request\trequested %.1f, server %.1f (cached %d total)\n", a.MeanRequestedInputTokens, a.MeanInputTokens, a.TotalCachedTokens)
	fmt.Fprintf(tw, "Output tokens / request\t%.1f in %.1f chunks\n", a.MeanOutputTokens, a.MeanChunksPerRequest)
	fmt.Fprintf(tw, "Request throughput\t%.2f req/s\n", a.RequestThroughput)
	fmt.Fprintf(tw, "Token throughput\tinput %.1f, output %.1f, total %.1f tok/s\n", a.InputThroughput, a.OutputThroughput, a.TotalTokenThroughput)
	if a.NumGPU > 0 {
		fmt.Fprintf(tw, "Per GPU (%d GPUs: %d prefill, %d decode)\ttotal %.1f, output %.1f, input %.1f tok/s/GPU\n",
			a.NumGPU, a.NumPrefillGPU, a.NumDecodeGPU, a.TputPerGPU, a.OutputTputPerGPU, a.InputTputPerGPU)
	} else {
		fmt.Fprintf(tw, "Per GPU\tn/a (give --deployment or --total-gpus)\n")
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "ms\tmean\tmedian\tp90\tp99\tp99.9\t\n")
	row := func(name string, v ...float64) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, x := range v {
			fmt.Fprintf(tw, "%.2f\t", 1000*x)
		}
		fmt.Fprintln(tw)
	}
	row("TTFT", a.MeanTTFT, a.MedianTTFT, a.P90TTFT, a.P99TTFT, a.P999TTFT)
	row("TPOT", a.MeanTPOT, a.MedianTPOT, a.P90TPOT, a.P99TPOT, a.P999TPOT)
	row("ITL (per chunk)", a.MeanITL, a.MedianITL, a.P90ITL, a.P99ITL, a.P999ITL)
	row("ITL (per token)", a.MeanITLPerToken, a.MedianITLPerToken, a.P90ITLPerToken, a.P99ITLPerToken, a.P999ITLPerToken)
	row("E2EL", a.MeanE2EL, a.MedianE2EL, a.P90E2EL, a.P99E2EL, a.P999E2EL)
	fmt.Fprintf(tw, "Interactivity tok/s/user\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", a.MeanIntvty, a.MedianIntvty, a.P90Intvty, a.P99Intvty, a.P999Intvty)
	tw.Flush()
	fmt.Fprintln(w, "Interactivity = 1000 / TPOT_ms of the same statistic (InferenceX); p99 is the slow-tail user.")
	fmt.Fprintf(w, "Client queue (dispatch to send): mean %.3f ms, p99 %.3f ms, max %.3f ms\n", 1000*a.MeanClientQueue, 1000*a.P99ClientQueue, 1000*a.MaxClientQueue)
	fmt.Fprintf(w, "Chunk gaps unseen: client lag %.1f%% (bound %.0f%%)", 100*a.ClientLag, 100*point.MaxClientLag)
	if a.ServerLag > 0 {
		fmt.Fprintf(w, "; the server wrote %.1f%% back to back, behind its schedule (host slower than the model)", 100*a.ServerLag)
	}
	fmt.Fprintln(w)
	if a.DrainedAfterLimit > 0 {
		fmt.Fprintf(w, "Drained: %d requests sent within the %.0f s window finished after it (included, as aiperf's grace period)\n", a.DrainedAfterLimit, a.DurationLimit)
	}
	if a.RequestMetrics != nil {
		rm := a.RequestMetrics
		fmt.Fprintf(w, "Agentic: %d turns; theoretical cache hit %.1f%%, server cached %.1f%%; QPS mean %.2f\n",
			len(a.PerTurn), 100*rm.Cache.TheoreticalCacheHitRate, 100*rm.Cache.ServerCacheHitRate, rm.QPS.Mean)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "turn\trequests\tok\tmean TTFT ms\tmean TPOT ms\tprompt tokens\tcached\t\n")
		for _, t := range a.PerTurn {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%.2f\t%.2f\t%.0f\t%.0f\t\n", t.Turn, t.Requests, t.Successful, 1000*t.MeanTTFT, 1000*t.MeanTPOT, t.MeanInputTokens, t.MeanCachedTokens)
		}
		tw.Flush()
	}
	if a.Failed == 0 {
		fmt.Fprintln(w, "Errors: none")
	} else {
		kinds := make([]string, 0, len(a.ErrorCategories))
		for k, n := range a.ErrorCategories {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "Errors: %d (%s)\n", a.Failed, strings.Join(kinds, ", "))
	}
	if a.WarmupFailed > 0 {
		fmt.Fprintf(w, "Warmup errors: %d\n", a.WarmupFailed)
	}
}

// benchProgress draws one updating line on a terminal and nothing otherwise.
type benchProgress struct {
	w     io.Writer
	tty   bool
	start time.Time
	drawn bool
}

func newBenchProgress(w io.Writer, enabled bool) *benchProgress {
	p := &benchProgress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok && enabled {
		st, err := f.Stat()
		p.tty = err == nil && st.Mode()&os.ModeCharDevice != 0
	}
	return p
}

func (p *benchProgress) update(done, total int) {
	if !p.tty {
		return
	}
	el := time.Since(p.start).Seconds()
	if total > 0 {
		fmt.Fprintf(p.w, "\r\x1b[Kbench: %d/%d requests (%.0f%%)  %.1f s  %.1f req/s", done, total, 100*float64(done)/float64(total), el, float64(done)/el)
	} else {
		fmt.Fprintf(p.w, "\r\x1b[Kbench: %d requests  %.1f s  %.1f req/s", done, el, float64(done)/el)
	}
	p.drawn = true
}

func (p *benchProgress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// TraceGen writes a deterministic synthetic AgentX trace: the flags of
// `starter bench trace-gen`.
type TraceGen struct {
	Traces int
	Seed   int64
	Out    string
	Shape  loadgen.TraceShape
}

// NewTraceGen is the generator with the defaults of `starter bench
// trace-gen`.
func NewTraceGen() TraceGen {
	return TraceGen{Traces: loadgen.DefaultTraceCount, Seed: 1, Shape: loadgen.TraceShape{MainCalls: 24, SystemTokens: 3000,
		ToolTokens: 12000, MinOut: 300, MaxOut: 2000, MaxContext: 90000, SubagentEvery: 5}}
}

// Validate reports a flag value the generator cannot use.
func (g *TraceGen) Validate() error {
	shape := g.Shape
	if g.Traces < 1 || shape.MainCalls < 1 || shape.SystemTokens < 1 || shape.ToolTokens < 0 || shape.MinOut < 1 ||
		shape.MaxOut < shape.MinOut || shape.MaxContext < 1 || shape.SubagentEvery < 0 {
		return errors.New("--traces, --calls, --system-tokens, --min-out and --max-context must be >= 1, --max-out >= --min-out, --tool-tokens and --subagent-every >= 0")
	}
	return nil
}

// Run writes the trace to Out (stdout without) and a summary of its shape
// to stderr. Validate first.
func (g TraceGen) Run(stdout, stderr io.Writer) error {
	shape := g.Shape
	// TraceShape reads 0 as "default"; on the command line 0 means none.
	if shape.SubagentEvery == 0 {
		shape.SubagentEvery = -1
	}
	if shape.ToolTokens == 0 {
		shape.ToolTokens = 1 // under one block: no tool prefix
	}
	tr := loadgen.GenerateTrace(g.Seed, g.Traces, shape)
	fmt.Fprint(stderr, loadgen.Stats(tr).String())
	if g.Out == "" {
		return loadgen.WriteTrace(stdout, tr)
	}
	f, err := os.Create(g.Out)
	if err != nil {
		return err
	}
	if err := loadgen.WriteTrace(f, tr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// simClockScale asks a sweepflow simulator for its time scale, so a bench
// against a compressed simulator reports the model's own latencies. Any
// other server (no /sim/info) runs in real time.
func simClockScale(ctx context.Context, baseURL string) float64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/sim/info", nil)
	if err != nil {
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 1
	}
	defer resp.Body.Close()
	var info struct {
		TimeScale float64 `json:"time_scale"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info) != nil || info.TimeScale <= 0 {
		return 1
	}
	return info.TimeScale
}
