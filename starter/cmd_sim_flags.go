package main

import (
	"fmt"
	"io"
	"time"

	flag "github.com/spf13/pflag"
	"github.com/sweepflow/sweepflow/sim"
)

// simServeFlags are the flags of `starter sim serve`: the served address and
// logging, and what sim.Config turns into a sim.Config. Exactly one of
// --deployment, --row-json and the explicit --prefill-*/--decode-* numbers
// picks the deployment (default: sim.DefaultDeployment).
type simServeFlags struct {
	Listen   string
	LogLevel string
	LogJSON  bool

	fs                                           *flag.FlagSet // to tell a flag set to its default from one left out
	deployment, rowJSON                          string
	rowIndex, gpusPerNode                        int
	pWorkers, pTP, pEP, dWorkers, dTP, dEP       int
	pDPA, dDPA                                   bool
	al, timeScale, ttftMS, itlMS, accuracy, slow float64
	warmupScale                                  float64
	fast, reasoning                              bool
	gsm8k, model                                 string
	seed                                         int64
	timelineCap, defaultMax, contextLen          int
	idle                                         time.Duration
	healthFail, stallFor                         time.Duration
	dieAfter, errStatus, errEvery, burstStart    int
	burstLen, midEvery, stallEvery, cutEvery     int
	zeroUsage                                    bool
}

// bind adds the flags, with their defaults, to fs.
func (f *simServeFlags) bind(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.Listen, "listen", "127.0.0.1:8000", "address to listen on (`HOST:PORT`; :0 picks a free port, printed on start)")
	fs.StringVar(&f.deployment, "deployment", "", "deployment shorthand, e.g. \"2P1D DEP16/DEP32\", \"1P1D DEP8/DEP16\", \"TP8 agg\" (default "+sim.DefaultDeployment+")")
	fs.StringVar(&f.rowJSON, "row-json", "", "InferenceX matrix row JSON `FILE` (an object, or an array with --row-index) giving prefill/decode, disagg and synthetic AL")
	fs.IntVar(&f.rowIndex, "row-index", 0, "row to use when --row-json holds an array")
	fs.IntVar(&f.pWorkers, "prefill-workers", 0, "explicit deployment: prefill (or aggregated) workers (default 1)")
	fs.IntVar(&f.pTP, "prefill-tp", 0, "explicit deployment: prefill TP (GPUs per worker)")
	fs.IntVar(&f.pEP, "prefill-ep", 0, "explicit deployment: prefill EP (default 1)")
	fs.BoolVar(&f.pDPA, "prefill-dpa", false, "explicit deployment: prefill uses DP-attention")
	fs.IntVar(&f.dWorkers, "decode-workers", 0, "explicit deployment: decode workers; 0 = aggregated")
	fs.IntVar(&f.dTP, "decode-tp", 0, "explicit deployment: decode TP (default: prefill TP)")
	fs.IntVar(&f.dEP, "decode-ep", 0, "explicit deployment: decode EP (default 1)")
	fs.BoolVar(&f.dDPA, "decode-dpa", false, "explicit deployment: decode uses DP-attention")
	fs.IntVar(&f.gpusPerNode, "gpus-per-node", sim.DefaultGPUsPerNode, "GPUs per node (node counts only)")
	fs.Float64Var(&f.al, "acceptance-length", 0, "speculative acceptance length `AL` (tokens per decode step); default: SYNTHETIC_ACCEPTANCE_LENGTH when SYNTHETIC_ACCEPTANCE=true, else the row's, else 1")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "multiply every simulated delay (0.01: a 60 s run takes 0.6 s)")
	fs.Float64Var(&f.warmupScale, "warmup-time-scale", sim.DefaultWarmupTimeScale, "further multiply the delays of warmup requests (header "+sim.WarmupHeader+"; nothing measures them), in (0, 1]; 1: warmups run on the engine's clock")
	fs.Float64Var(&f.ttftMS, "ttft-ms", 0, "fast mode: fixed time to first token in ms (no latency model)")
	fs.Float64Var(&f.itlMS, "itl-ms", 0, "fast mode: fixed inter-chunk latency in ms (one token per chunk unless AL is set)")
	fs.BoolVar(&f.fast, "fast", false, "fast mode even with --ttft-ms/--itl-ms at 0 (as fast as possible)")
	fs.StringVar(&f.gsm8k, "gsm8k", "", "GSM8K JSONL `FILE` whose questions the engine answers")
	fs.Float64Var(&f.accuracy, "accuracy", 0.95, "probability a GSM8K answer is correct")
	fs.BoolVar(&f.reasoning, "reasoning", false, "stream a reasoning_content preamble before the content")
	fs.StringVar(&f.model, "model", "", "served model name (default: the row's model, else "+sim.DefaultModel+")")
	fs.Int64Var(&f.seed, "seed", 0, "seed for every pseudo-random choice")
	fs.Float64Var(&f.slow, "slowdown", 1, "multiply every latency (1.2 = a 20% slower engine)")
	fs.IntVar(&f.timelineCap, "timeline-capacity", 100_000, "requests whose send timestamps are kept for /sim/timeline")
	fs.IntVar(&f.defaultMax, "default-max-tokens", 1024, "reply cap when a request sets no max_tokens")
	fs.IntVar(&f.contextLen, "context-length", 1<<20, "context length (prompt + max_tokens)")
	fs.DurationVar(&f.idle, "idle-timeout", 5*time.Second, "close idle keep-alive connections after this long")
	fs.DurationVar(&f.healthFail, "health-fail-for", 0, "fault: answer 503 on /health and completions for this long after start")
	fs.IntVar(&f.dieAfter, "die-after", 0, "fault: crash (reset connections, exit 1) when request N+1 arrives")
	fs.IntVar(&f.errStatus, "error-status", 503, "fault: HTTP status of injected errors (429 or 503)")
	fs.IntVar(&f.errEvery, "error-every", 0, "fault: fail every Nth request with --error-status")
	fs.IntVar(&f.burstStart, "error-burst-start", 1, "fault: first request of an error burst")
	fs.IntVar(&f.burstLen, "error-burst-len", 0, "fault: number of requests in the error burst")
	fs.IntVar(&f.midEvery, "mid-stream-error-every", 0, "fault: every Nth stream sends an error payload half-way (HTTP 200)")
	fs.IntVar(&f.cutEvery, "cut-stream-every", 0, "fault: every Nth stream resets its connection half-way (no error event, no [DONE])")
	fs.IntVar(&f.stallEvery, "stall-every", 0, "fault: every Nth stream pauses half-way for --stall-for")
	fs.DurationVar(&f.stallFor, "stall-for", time.Second, "fault: stall length (scaled by --time-scale)")
	fs.BoolVar(&f.zeroUsage, "zero-usage", false, "fault: usage reports 0 completion tokens though the reply is whole (broken token accounting)")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&f.LogJSON, "log-json", false, "log JSON lines instead of console text")
}

// config reads the parsed flags, the environment (getenv) and the row
// file; a warning goes to stderr. Its errors are bad flag values.
func (f *simServeFlags) config(getenv func(string) string, stderr io.Writer) (sim.Config, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	explicit := false
	for _, n := range []string{"prefill-workers", "prefill-tp", "prefill-ep", "prefill-dpa", "decode-workers", "decode-tp", "decode-ep", "decode-dpa"} {
		explicit = explicit || set[n]
	}
	sources := 0
	for _, on := range []bool{f.deployment != "", f.rowJSON != "", explicit} {
		if on {
			sources++
		}
	}
	if sources > 1 {
		return sim.Config{}, fmt.Errorf("pick the deployment one way: --deployment, --row-json or the --prefill-*/--decode-* numbers")
	}
	cfg := sim.Config{
		Model: f.model, TimeScale: f.timeScale, WarmupTimeScale: f.warmupScale, Accuracy: f.accuracy, Reasoning: f.reasoning, GSM8KPath: f.gsm8k,
		Seed: f.seed, Slowdown: f.slow, TimelineCapacity: f.timelineCap, DefaultMaxTokens: f.defaultMax,
		ContextLength: f.contextLen, IdleTimeout: f.idle,
		FixedTTFT: time.Duration(f.ttftMS * float64(time.Millisecond)),
		FixedITL:  time.Duration(f.itlMS * float64(time.Millisecond)),
		FastMode:  f.fast || set["ttft-ms"] || set["itl-ms"],
		Faults: sim.Faults{
			HealthFailFor: f.healthFail, DieAfter: f.dieAfter, ErrorStatus: f.errStatus, ErrorEvery: f.errEvery,
			ErrorBurstStart: f.burstStart, ErrorBurstLen: f.burstLen, MidStreamErrorEvery: f.midEvery, CutStreamEvery: f.cutEvery, ZeroUsage: f.zeroUsage,
			StallEvery: f.stallEvery, StallFor: f.stallFor,
		},
	}
	if f.timeScale <= 0 {
		return cfg, fmt.Errorf("--time-scale must be > 0, got %g", f.timeScale)
	}
	if f.warmupScale <= 0 || f.warmupScale > 1 {
		return cfg, fmt.Errorf("--warmup-time-scale must be in (0, 1], got %g", f.warmupScale)
	}
	if f.slow <= 0 {
		return cfg, fmt.Errorf("--slowdown must be > 0, got %g", f.slow)
	}
	if f.ttftMS < 0 || f.itlMS < 0 {
		return cfg, fmt.Errorf("--ttft-ms and --itl-ms must not be negative")
	}
	if f.gpusPerNode < 1 {
		return cfg, fmt.Errorf("--gpus-per-node must be >= 1, got %d", f.gpusPerNode)
	}
	var rowAL float64
	var rowHasAL bool
	var rowSpec string
	switch {
	case f.deployment != "":
		d, err := sim.ParseDeployment(f.deployment)
		if err != nil {
			return cfg, fmt.Errorf("--deployment: %v", err)
		}
		cfg.Deployment = d
	case f.rowJSON != "":
		row, err := sim.LoadMatrixRow(f.rowJSON, f.rowIndex)
		if err != nil {
			return cfg, fmt.Errorf("--row-json %v", err)
		}
		cfg.Deployment = row.Deployment(f.gpusPerNode)
		if cfg.Model == "" {
			cfg.Model = row.Model
		}
		rowAL, rowHasAL = row.SyntheticAcceptanceLength()
		rowSpec = row.SpecDecoding
	case explicit:
		if !set["prefill-tp"] {
			return cfg, fmt.Errorf("--prefill-tp is required with explicit deployment numbers")
		}
		d := sim.Deployment{
			PrefillWorkers: orInt(f.pWorkers, set["prefill-workers"], 1), PrefillTP: f.pTP,
			PrefillEP: orInt(f.pEP, set["prefill-ep"], 1), PrefillDPA: f.pDPA,
			DecodeWorkers: f.dWorkers, DecodeTP: orInt(f.dTP, set["decode-tp"], f.pTP),
			DecodeEP: orInt(f.dEP, set["decode-ep"], 1), DecodeDPA: f.dDPA,
			Disagg: f.dWorkers > 0,
		}
		if !d.Disagg { // aggregated: decode mirrors prefill, as InferenceX rows do
			d.DecodeTP, d.DecodeEP, d.DecodeDPA = d.PrefillTP, d.PrefillEP, d.PrefillDPA
		}
		if err := d.Validate(); err != nil {
			return cfg, fmt.Errorf("deployment flags: %v", err)
		}
		cfg.Deployment = d
	default:
		cfg.Deployment, _ = sim.ParseDeployment(sim.DefaultDeployment)
	}
	cfg.Deployment.GPUsPerNode = f.gpusPerNode

	envAL, envHasAL, err := sim.SyntheticAcceptanceFromEnv(getenv)
	if err != nil {
		return cfg, fmt.Errorf("environment: %v", err)
	}
	switch {
	case set["acceptance-length"]:
		if f.al < 1 {
			return cfg, fmt.Errorf("--acceptance-length must be >= 1, got %g", f.al)
		}
		cfg.AcceptanceLength = f.al
	case envHasAL:
		cfg.AcceptanceLength = envAL
	case rowHasAL:
		cfg.AcceptanceLength = rowAL
	default:
		cfg.AcceptanceLength = 1
		if rowSpec != "" && rowSpec != "none" {
			fmt.Fprintf(stderr, "warning: the row uses spec-decoding %q but sets no synthetic acceptance length; simulating AL 1 (pass --acceptance-length)\n", rowSpec)
		}
	}
	return cfg, nil
}

// orInt returns v if the flag was set, else def.
func orInt(v int, isSet bool, def int) int {
	if isSet {
		return v
	}
	return def
}
