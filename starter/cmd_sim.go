package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

func init() {
	register("sim serve", func() *cobra.Command {
		return newSimServeCmd(os.Getenv, func(c *cobra.Command, cfg sim.Config, opts simServeOptions) error {
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveSim(ctx, cfg, opts, c.OutOrStdout(), c.ErrOrStderr())
		})
	})
}

func init() {
	register("sim role", func() *cobra.Command { return newSimRoleCmd(nil) })
}

// newSimRoleCmd builds `starter sim role ROLE -- ARGV...`: the emulated
// partition's launcher runs every rendered srt-slurm command through it
// (sim/simrole). opts, when non-nil, overrides the role's options (tests).
func newSimRoleCmd(opts *simrole.Options) *cobra.Command {
	c := &cobra.Command{
		Use:   "role ROLE -- ARGV...",
		Short: "run a rendered srt-slurm command as a simulator role (" + strings.Join(simrole.Roles(), ", ") + ")",
		Long: `role runs one process of the emulated partition: ARGV is the command
srt-slurm renders (python3 -m dynamo.sglang ..., numactl -m 0,1 trtllm-llmapi-launch
python3 -m dynamo.trtllm ..., python3 -m dynamo.vllm ..., python3 -m dynamo.frontend ...,
python -m sglang_router.launch_router ..., python3 /tmp/setup_head.py ...,
bash -c "nginx ...", bash -lc "bash .../agentic_srt.sh"), passed unchanged after --. The role first prints the argv and environment it
received (two "sweepflow-sim-role:" lines), then serves until it is stopped,
except the benchmark, which exits when its result files are written.
Everything it serves is simulated.`,
		Args: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			if dash != 1 || len(args) < 2 {
				return usageError("want: sim role ROLE -- ARGV... (the rendered command after --)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o := simrole.Options{}
			if opts != nil {
				o = *opts
			}
			if o.Stdout == nil {
				o.Stdout = c.OutOrStdout()
			}
			if o.Stderr == nil {
				o.Stderr = c.ErrOrStderr()
			}
			if o.Logger == nil {
				lg, err := simLogger(o.Stderr, "info", false)
				if err != nil {
					return err
				}
				o.Logger = lg
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := simrole.Run(ctx, args[0], args[1:], o)
			if errors.Is(err, simrole.ErrUsage) {
				return usageError("%v", err)
			}
			if err != nil {
				return &exitError{code: 1, msg: "role " + args[0] + ": " + err.Error()}
			}
			return nil
		},
	}
	return c
}

// simServeOptions is what the flags decide besides sim.Config.
type simServeOptions struct {
	listen   string
	logLevel string
	logJSON  bool
}

// simServe runs `starter sim serve args` in-process: it parses the flags,
// starts the engine and serves until ctx ends.
func simServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	return execute(ctx, newSimServeCmd(getenv, func(c *cobra.Command, cfg sim.Config, opts simServeOptions) error {
		return serveSim(c.Context(), cfg, opts, c.OutOrStdout(), c.ErrOrStderr())
	}), args, stdout, stderr)
}

// serveSim starts the engine and serves until ctx ends.
func serveSim(ctx context.Context, cfg sim.Config, opts simServeOptions, stdout, stderr io.Writer) error {
	logger, err := simLogger(stderr, opts.logLevel, opts.logJSON)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	defer func() { _ = logger.Sync() }()
	cfg.Logger = logger
	srv, err := sim.New(cfg)
	if err != nil {
		return err
	}
	eff := srv.Config()
	err = srv.ListenAndServe(ctx, opts.listen, func(addr string) {
		mode := eff.Deployment.String()
		if eff.FastMode || eff.FixedTTFT > 0 || eff.FixedITL > 0 {
			mode = fmt.Sprintf("fast mode ttft=%s itl=%s", eff.FixedTTFT, eff.FixedITL)
		}
		fmt.Fprintf(stdout, "simulated engine listening on http://%s\n", addr)
		fmt.Fprintf(stdout, "  SIMULATED: %s, model %s, %d GPUs, AL %g, time scale %g (warmup requests x %g), slowdown %g\n",
			mode, eff.Model, eff.Deployment.TotalGPUs(), eff.AcceptanceLength, eff.TimeScale, eff.WarmupTimeScale, eff.Slowdown)
	})
	if errors.Is(err, sim.ErrDied) {
		return &exitError{code: 1, msg: fmt.Sprintf("engine died on purpose after %d requests (--die-after)", eff.Faults.DieAfter)}
	}
	return err
}

func simLogger(w io.Writer, level string, jsonFormat bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if jsonFormat {
		enc = zapcore.NewJSONEncoder(encCfg)
	} else {
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)), nil
}

// simConfigFromFlags turns `starter sim serve` flags into a sim.Config
// without serving.
func simConfigFromFlags(args []string, stderr io.Writer, getenv func(string) string) (sim.Config, simServeOptions, error) {
	var cfg sim.Config
	var opts simServeOptions
	err := execute(nil, newSimServeCmd(getenv, func(_ *cobra.Command, c sim.Config, o simServeOptions) error {
		cfg, opts = c, o
		return nil
	}), args, io.Discard, stderr)
	return cfg, opts, err
}

// newSimServeCmd builds `starter sim serve`: it turns the flags into a
// sim.Config and hands it to serve. Exactly one of --deployment, --row-json
// and the explicit --prefill-*/--decode-* numbers picks the deployment
// (default: sim.DefaultDeployment).
func newSimServeCmd(getenv func(string) string, serve func(c *cobra.Command, cfg sim.Config, opts simServeOptions) error) *cobra.Command {
	c := &cobra.Command{Use: "serve", Short: "run the simulated OpenAI-compatible engine (latency model of a deployment, GSM8K answers, faults)", Args: noArgs}
	fs := c.Flags()
	var (
		opts                                         simServeOptions
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
	)
	fs.StringVar(&opts.listen, "listen", "127.0.0.1:8000", "address to listen on (`HOST:PORT`; :0 picks a free port, printed on start)")
	fs.StringVar(&deployment, "deployment", "", "deployment shorthand, e.g. \"2P1D DEP16/DEP32\", \"1P1D DEP8/DEP16\", \"TP8 agg\" (default "+sim.DefaultDeployment+")")
	fs.StringVar(&rowJSON, "row-json", "", "InferenceX matrix row JSON `FILE` (an object, or an array with --row-index) giving prefill/decode, disagg and synthetic AL")
	fs.IntVar(&rowIndex, "row-index", 0, "row to use when --row-json holds an array")
	fs.IntVar(&pWorkers, "prefill-workers", 0, "explicit deployment: prefill (or aggregated) workers (default 1)")
	fs.IntVar(&pTP, "prefill-tp", 0, "explicit deployment: prefill TP (GPUs per worker)")
	fs.IntVar(&pEP, "prefill-ep", 0, "explicit deployment: prefill EP (default 1)")
	fs.BoolVar(&pDPA, "prefill-dpa", false, "explicit deployment: prefill uses DP-attention")
	fs.IntVar(&dWorkers, "decode-workers", 0, "explicit deployment: decode workers; 0 = aggregated")
	fs.IntVar(&dTP, "decode-tp", 0, "explicit deployment: decode TP (default: prefill TP)")
	fs.IntVar(&dEP, "decode-ep", 0, "explicit deployment: decode EP (default 1)")
	fs.BoolVar(&dDPA, "decode-dpa", false, "explicit deployment: decode uses DP-attention")
	fs.IntVar(&gpusPerNode, "gpus-per-node", sim.DefaultGPUsPerNode, "GPUs per node (node counts only)")
	fs.Float64Var(&al, "acceptance-length", 0, "speculative acceptance length `AL` (tokens per decode step); default: SYNTHETIC_ACCEPTANCE_LENGTH when SYNTHETIC_ACCEPTANCE=true, else the row's, else 1")
	fs.Float64Var(&timeScale, "time-scale", 1, "multiply every simulated delay (0.01: a 60 s run takes 0.6 s)")
	fs.Float64Var(&warmupScale, "warmup-time-scale", sim.DefaultWarmupTimeScale, "further multiply the delays of warmup requests (header "+sim.WarmupHeader+"; nothing measures them), in (0, 1]; 1: warmups run on the engine's clock")
	fs.Float64Var(&ttftMS, "ttft-ms", 0, "fast mode: fixed time to first token in ms (no latency model)")
	fs.Float64Var(&itlMS, "itl-ms", 0, "fast mode: fixed inter-chunk latency in ms (one token per chunk unless AL is set)")
	fs.BoolVar(&fast, "fast", false, "fast mode even with --ttft-ms/--itl-ms at 0 (as fast as possible)")
	fs.StringVar(&gsm8k, "gsm8k", "", "GSM8K JSONL `FILE` whose questions the engine answers")
	fs.Float64Var(&accuracy, "accuracy", 0.95, "probability a GSM8K answer is correct")
	fs.BoolVar(&reasoning, "reasoning", false, "stream a reasoning_content preamble before the content")
	fs.StringVar(&model, "model", "", "served model name (default: the row's model, else "+sim.DefaultModel+")")
	fs.Int64Var(&seed, "seed", 0, "seed for every pseudo-random choice")
	fs.Float64Var(&slow, "slowdown", 1, "multiply every latency (1.2 = a 20% slower engine)")
	fs.IntVar(&timelineCap, "timeline-capacity", 100_000, "requests whose send timestamps are kept for /sim/timeline")
	fs.IntVar(&defaultMax, "default-max-tokens", 1024, "reply cap when a request sets no max_tokens")
	fs.IntVar(&contextLen, "context-length", 1<<20, "context length (prompt + max_tokens)")
	fs.DurationVar(&idle, "idle-timeout", 5*time.Second, "close idle keep-alive connections after this long")
	fs.DurationVar(&healthFail, "health-fail-for", 0, "fault: answer 503 on /health and completions for this long after start")
	fs.IntVar(&dieAfter, "die-after", 0, "fault: crash (reset connections, exit 1) when request N+1 arrives")
	fs.IntVar(&errStatus, "error-status", 503, "fault: HTTP status of injected errors (429 or 503)")
	fs.IntVar(&errEvery, "error-every", 0, "fault: fail every Nth request with --error-status")
	fs.IntVar(&burstStart, "error-burst-start", 1, "fault: first request of an error burst")
	fs.IntVar(&burstLen, "error-burst-len", 0, "fault: number of requests in the error burst")
	fs.IntVar(&midEvery, "mid-stream-error-every", 0, "fault: every Nth stream sends an error payload half-way (HTTP 200)")
	fs.IntVar(&cutEvery, "cut-stream-every", 0, "fault: every Nth stream resets its connection half-way (no error event, no [DONE])")
	fs.IntVar(&stallEvery, "stall-every", 0, "fault: every Nth stream pauses half-way for --stall-for")
	fs.DurationVar(&stallFor, "stall-for", time.Second, "fault: stall length (scaled by --time-scale)")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&opts.logJSON, "log-json", false, "log JSON lines instead of console text")
	// config reads the parsed flags, the environment and the row file.
	config := func(stderr io.Writer) (sim.Config, simServeOptions, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		usage := func(format string, a ...any) error { return &exitError{code: 2, msg: fmt.Sprintf(format, a...)} }

		explicit := false
		for _, n := range []string{"prefill-workers", "prefill-tp", "prefill-ep", "prefill-dpa", "decode-workers", "decode-tp", "decode-ep", "decode-dpa"} {
			explicit = explicit || set[n]
		}
		sources := 0
		for _, on := range []bool{deployment != "", rowJSON != "", explicit} {
			if on {
				sources++
			}
		}
		if sources > 1 {
			return sim.Config{}, opts, usage("pick the deployment one way: --deployment, --row-json or the --prefill-*/--decode-* numbers")
		}
		cfg := sim.Config{
			Model: model, TimeScale: timeScale, WarmupTimeScale: warmupScale, Accuracy: accuracy, Reasoning: reasoning, GSM8KPath: gsm8k,
			Seed: seed, Slowdown: slow, TimelineCapacity: timelineCap, DefaultMaxTokens: defaultMax,
			ContextLength: contextLen, IdleTimeout: idle,
			FixedTTFT: time.Duration(ttftMS * float64(time.Millisecond)),
			FixedITL:  time.Duration(itlMS * float64(time.Millisecond)),
			FastMode:  fast || set["ttft-ms"] || set["itl-ms"],
			Faults: sim.Faults{
				HealthFailFor: healthFail, DieAfter: dieAfter, ErrorStatus: errStatus, ErrorEvery: errEvery,
				ErrorBurstStart: burstStart, ErrorBurstLen: burstLen, MidStreamErrorEvery: midEvery, CutStreamEvery: cutEvery,
				StallEvery: stallEvery, StallFor: stallFor,
			},
		}
		if timeScale <= 0 {
			return cfg, opts, usage("--time-scale must be > 0, got %g", timeScale)
		}
		if warmupScale <= 0 || warmupScale > 1 {
			return cfg, opts, usage("--warmup-time-scale must be in (0, 1], got %g", warmupScale)
		}
		if slow <= 0 {
			return cfg, opts, usage("--slowdown must be > 0, got %g", slow)
		}
		if ttftMS < 0 || itlMS < 0 {
			return cfg, opts, usage("--ttft-ms and --itl-ms must not be negative")
		}
		if gpusPerNode < 1 {
			return cfg, opts, usage("--gpus-per-node must be >= 1, got %d", gpusPerNode)
		}
		var rowAL float64
		var rowHasAL bool
		var rowSpec string
		switch {
		case deployment != "":
			d, err := sim.ParseDeployment(deployment)
			if err != nil {
				return cfg, opts, usage("--deployment: %v", err)
			}
			cfg.Deployment = d
		case rowJSON != "":
			row, err := sim.LoadMatrixRow(rowJSON, rowIndex)
			if err != nil {
				return cfg, opts, usage("--row-json %v", err)
			}
			cfg.Deployment = row.Deployment(gpusPerNode)
			if cfg.Model == "" {
				cfg.Model = row.Model
			}
			rowAL, rowHasAL = row.SyntheticAcceptanceLength()
			rowSpec = row.SpecDecoding
		case explicit:
			if !set["prefill-tp"] {
				return cfg, opts, usage("--prefill-tp is required with explicit deployment numbers")
			}
			d := sim.Deployment{
				PrefillWorkers: orInt(pWorkers, set["prefill-workers"], 1), PrefillTP: pTP,
				PrefillEP: orInt(pEP, set["prefill-ep"], 1), PrefillDPA: pDPA,
				DecodeWorkers: dWorkers, DecodeTP: orInt(dTP, set["decode-tp"], pTP),
				DecodeEP: orInt(dEP, set["decode-ep"], 1), DecodeDPA: dDPA,
				Disagg: dWorkers > 0,
			}
			if !d.Disagg { // aggregated: decode mirrors prefill, as InferenceX rows do
				d.DecodeTP, d.DecodeEP, d.DecodeDPA = d.PrefillTP, d.PrefillEP, d.PrefillDPA
			}
			if err := d.Validate(); err != nil {
				return cfg, opts, usage("deployment flags: %v", err)
			}
			cfg.Deployment = d
		default:
			cfg.Deployment, _ = sim.ParseDeployment(sim.DefaultDeployment)
		}
		cfg.Deployment.GPUsPerNode = gpusPerNode

		envAL, envHasAL, err := sim.SyntheticAcceptanceFromEnv(getenv)
		if err != nil {
			return cfg, opts, usage("environment: %v", err)
		}
		switch {
		case set["acceptance-length"]:
			if al < 1 {
				return cfg, opts, usage("--acceptance-length must be >= 1, got %g", al)
			}
			cfg.AcceptanceLength = al
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
		return cfg, opts, nil
	}
	c.RunE = func(c *cobra.Command, _ []string) error {
		cfg, opts, err := config(c.ErrOrStderr())
		if err != nil {
			return err
		}
		return serve(c, cfg, opts)
	}
	return c
}

// orInt returns v if the flag was set, else def.
func orInt(v int, isSet bool, def int) int {
	if isSet {
		return v
	}
	return def
}
