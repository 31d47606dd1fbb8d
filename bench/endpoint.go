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

	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
)

// EndpointUsage is the help text of `starter bench`.
const EndpointUsage = `usage: starter bench --base-url URL [--concurrency N] [--isl N --osl N | --trace F.jsonl] [flags]

--trace replays AgentX traces (the cc-traces-weka corpus format) the way
InferenceX's aiperf scenario does: one session per concurrency lane, first
sessions starting between 25% and 75% of their trace after --num-warmups
warmup calls per lane, idle gaps capped at --idle-gap-cap, prompts built so
that equal hash ids are equal token blocks.

Streams requests at an OpenAI-compatible server and reports TTFT, TPOT,
ITL, E2EL (mean/median/p90/p99/p99.9), interactivity and per-GPU throughput
with InferenceX's definitions. --output-json writes the aggregate (InferenceX
agg_*.json field names, latencies in seconds); --save-requests one JSONL
record per request. Exit status: 0 ok, 1 error or gate failed (more than 10%
of requests failed, or none succeeded), 2 usage.`

// Endpoint benchmarks an OpenAI-compatible server: the flags of
// `starter bench`.
type Endpoint struct {
	clockScale                     float64
	baseURL, endpoint, model       string
	conc, numPrompts, numWarmups   int
	rate                           string
	burstiness                     float64
	duration, timeout              time.Duration
	isl, osl                       int
	rangeRatio                     float64
	ignoreEOS                      bool
	outJSON, saveRequests, outDir  string
	trace                          string
	startMin, startMax             float64
	idleGapCap                     time.Duration
	seed                           int64
	prefillGPUs, decodeGPUs, total int
	deployment                     string
	gpusPerNode                    int
	timeScale                      float64
	asJSON, noProgress             bool
	extraBody                      string
}

// RegisterFlags adds the command's flags, with their defaults, to fs.
func (f *Endpoint) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.baseURL, "base-url", "http://127.0.0.1:8000", "server base URL")
	fs.StringVar(&f.endpoint, "endpoint", "/v1/chat/completions", "API endpoint: /v1/chat/completions or /v1/completions")
	fs.StringVar(&f.model, "model", "", "model name (default: the first model the server lists)")
	fs.IntVar(&f.conc, "concurrency", 1, "requests in flight (closed loop), in-flight cap (open loop), or live sessions (--trace)")
	fs.IntVar(&f.numPrompts, "num-prompts", 0, "measured requests (default 10 x concurrency; unlimited with --duration); with --trace, trace plays (default: one per trace)")
	fs.IntVar(&f.numWarmups, "num-warmups", -1, "warmup requests excluded from metrics (default 2 x concurrency); with --trace, warmup calls per lane (default 1; InferenceX: 10)")
	fs.StringVar(&f.rate, "request-rate", "inf", "requests/s on a Poisson/gamma schedule, or inf for closed loop")
	fs.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape of inter-arrival times (1 = Poisson, <1 burstier)")
	fs.DurationVar(&f.duration, "duration", 0, "stop dispatching after this long; in-flight requests finish (0 = no limit)")
	fs.IntVar(&f.isl, "isl", 1024, "input length in tokens (random workload)")
	fs.IntVar(&f.osl, "osl", 1024, "output length in tokens, sent as max_tokens (random workload)")
	fs.Float64Var(&f.rangeRatio, "random-range-ratio", 1, "lengths uniform in [ratio x L, L]; InferenceX uses 0.8")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "send ignore_eos so every request generates max_tokens (always on with --trace)")
	fs.StringVar(&f.outJSON, "output-json", "", "write the aggregate JSON here")
	fs.StringVar(&f.saveRequests, "save-requests", "", "write one JSONL record per request here")
	fs.StringVar(&f.outDir, "output-dir", "", "directory for both files (default names aggregate.json and requests.jsonl)")
	fs.StringVar(&f.trace, "trace", "", "AgentX trace (cc-traces-weka format: JSONL, or a JSON object or array) to replay instead of random prompts")
	fs.Float64Var(&f.startMin, "trajectory-start-min", loadgen.DefaultTrajectoryStartMin, "with --trace: earliest start of a lane's first session, as a fraction of its trace")
	fs.Float64Var(&f.startMax, "trajectory-start-max", loadgen.DefaultTrajectoryStartMax, "with --trace: latest start of a lane's first session (0 with min 0: from the beginning, no warmup)")
	fs.DurationVar(&f.idleGapCap, "idle-gap-cap", loadgen.DefaultIdleGapCap, "with --trace: cap on recorded idle gaps between calls (negative: none)")
	fs.Int64Var(&f.seed, "seed", 0, "seed for prompts, lengths and arrival times")
	fs.IntVar(&f.prefillGPUs, "prefill-gpus", 0, "prefill GPUs, for per-GPU input throughput (disaggregated)")
	fs.IntVar(&f.decodeGPUs, "decode-gpus", 0, "decode GPUs, for per-GPU output throughput (disaggregated)")
	fs.IntVar(&f.total, "total-gpus", 0, "all GPUs (aggregated serving: the only count needed)")
	fs.StringVar(&f.deployment, "deployment", "", `topology giving the GPU counts, e.g. "2P1D DEP16/DEP32" or "TP8 agg"`)
	fs.IntVar(&f.gpusPerNode, "gpus-per-node", sim.DefaultGPUsPerNode, "GPUs per node for --deployment (node count only)")
	fs.DurationVar(&f.timeout, "request-timeout", loadgen.DefaultRequestTimeout, "per-request deadline")
	fs.Float64Var(&f.clockScale, "clock-scale", 0, "rate of the server's clock against real time (the simulator's --time-scale); figures are converted to it. 0: ask the simulator's /sim/info, 1 for any other server")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "multiply trace idle gaps (after the cap) by this")
	fs.BoolVar(&f.asJSON, "json", false, "print the aggregate JSON on stdout instead of the table")
	fs.BoolVar(&f.noProgress, "no-progress", false, "do not draw the progress line on a terminal")
	fs.StringVar(&f.extraBody, "extra-body", "", `JSON object merged into every request body, e.g. '{"temperature":0}'`)
}

// Run benchmarks the server with opts (from Options) and prints the
// aggregate; a run the gates refuse is an error after the figures.
func (f Endpoint) Run(ctx context.Context, opts loadgen.Options, stdout, stderr io.Writer) error {
	if f.outDir != "" {
		if f.outJSON == "" {
			f.outJSON = filepath.Join(f.outDir, "aggregate.json")
		}
		if f.saveRequests == "" {
			f.saveRequests = filepath.Join(f.outDir, "requests.jsonl")
		}
	}
	opts.ClockScale = f.clockScale
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
	prog := newBenchProgress(stderr, !f.noProgress)
	opts.Progress = prog.update
	res, runErr := loadgen.Run(ctx, opts)
	prog.finish()
	if res == nil {
		return runErr
	}
	if f.outJSON != "" {
		if err := res.WriteAggregateJSON(f.outJSON); err != nil {
			return err
		}
	}
	if f.saveRequests != "" {
		if err := res.WriteRequestsJSONL(f.saveRequests); err != nil {
			return err
		}
	}
	if f.asJSON {
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
		BaseURL: f.baseURL, Endpoint: f.endpoint, Model: f.model,
		Concurrency: f.conc, NumPrompts: f.numPrompts, NumWarmups: f.numWarmups,
		Burstiness: f.burstiness, Duration: f.duration, ISL: f.isl, OSL: f.osl,
		RandomRangeRatio: f.rangeRatio, IgnoreEOS: f.ignoreEOS, TimeScale: f.timeScale,
		Seed: f.seed, RequestTimeout: f.timeout,
		PrefillGPUs: f.prefillGPUs, DecodeGPUs: f.decodeGPUs, TotalGPUs: f.total,
	}
	if f.conc < 1 {
		return o, fmt.Errorf("--concurrency must be >= 1 (got %d)", f.conc)
	}
	if f.numWarmups < 0 {
		o.NumWarmups = loadgen.DefaultNumWarmups(f.conc)
		if f.trace != "" {
			o.NumWarmups = 1
		}
	}
	switch r := strings.ToLower(strings.TrimSpace(f.rate)); r {
	case "inf", "+inf", "infinity", "0":
		o.RequestRate = math.Inf(1)
	default:
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 || math.IsNaN(v) {
			return o, fmt.Errorf("--request-rate: want a positive number or inf, got %q", f.rate)
		}
		o.RequestRate = v
	}
	if f.rangeRatio <= 0 || f.rangeRatio > 1 {
		return o, fmt.Errorf("--random-range-ratio must be in (0, 1] (got %g)", f.rangeRatio)
	}
	if f.trace == "" && (f.isl < 1 || f.osl < 1) {
		return o, fmt.Errorf("--isl and --osl must be >= 1 (got %d, %d)", f.isl, f.osl)
	}
	if f.timeScale <= 0 {
		return o, fmt.Errorf("--time-scale must be > 0 (got %g)", f.timeScale)
	}
	if f.deployment != "" {
		if f.prefillGPUs != 0 || f.decodeGPUs != 0 || f.total != 0 {
			return o, errors.New("--deployment and --prefill-gpus/--decode-gpus/--total-gpus are exclusive")
		}
		d, err := sim.ParseDeployment(f.deployment)
		if err != nil {
			return o, fmt.Errorf("--deployment: %v", err)
		}
		d.GPUsPerNode = f.gpusPerNode
		if d.Disagg {
			o.PrefillGPUs, o.DecodeGPUs = d.PrefillGPUs(), d.DecodeGPUs()
		} else {
			o.TotalGPUs = d.TotalGPUs()
		}
	}
	if f.trace != "" {
		tr, err := loadgen.LoadTrace(f.trace)
		if err != nil {
			return o, err
		}
		o.Trace = tr
		o.TrajectoryStartMin, o.TrajectoryStartMax, o.IdleGapCap = f.startMin, f.startMax, f.idleGapCap
		if f.startMin == 0 && f.startMax == 0 {
			o.StartAtBeginning = true
		}
		if o.IdleGapCap == 0 {
			o.IdleGapCap = -1 // on the command line 0 means no cap
		}
	}
	if f.extraBody != "" {
		if err := json.Unmarshal([]byte(f.extraBody), &o.Extra); err != nil {
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
