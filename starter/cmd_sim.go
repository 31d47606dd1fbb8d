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

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

func init() {
	register("sim serve", func() *cobra.Command {
		return newSimServeCmd(os.Getenv, func(c *cobra.Command, cfg sim.Config, opts simServeFlags) error {
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

// simServe runs `starter sim serve args` in-process: it parses the flags,
// starts the engine and serves until ctx ends.
func simServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	return execute(ctx, newSimServeCmd(getenv, func(c *cobra.Command, cfg sim.Config, opts simServeFlags) error {
		return serveSim(c.Context(), cfg, opts, c.OutOrStdout(), c.ErrOrStderr())
	}), args, stdout, stderr)
}

// serveSim starts the engine and serves until ctx ends.
func serveSim(ctx context.Context, cfg sim.Config, opts simServeFlags, stdout, stderr io.Writer) error {
	logger, err := simLogger(stderr, opts.LogLevel, opts.LogJSON)
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
	err = srv.ListenAndServe(ctx, opts.Listen, func(addr string) {
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
func simConfigFromFlags(args []string, stderr io.Writer, getenv func(string) string) (sim.Config, simServeFlags, error) {
	var cfg sim.Config
	var opts simServeFlags
	err := execute(nil, newSimServeCmd(getenv, func(_ *cobra.Command, c sim.Config, o simServeFlags) error {
		cfg, opts = c, o
		return nil
	}), args, io.Discard, stderr)
	return cfg, opts, err
}

// newSimServeCmd builds `starter sim serve`: it turns the flags into a
// sim.Config (simServeFlags) and hands it to serve.
func newSimServeCmd(getenv func(string) string, serve func(c *cobra.Command, cfg sim.Config, opts simServeFlags) error) *cobra.Command {
	var f simServeFlags
	c := &cobra.Command{Use: "serve", Short: "run the simulated OpenAI-compatible engine (latency model of a deployment, GSM8K answers, faults)", Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := f.config(getenv, c.ErrOrStderr())
			if err != nil {
				return usageError("%v", err)
			}
			return serve(c, cfg, f)
		}}
	f.bind(c.Flags())
	return c
}
