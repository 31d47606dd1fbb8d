package main

import (
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/bench"
)

func init() {
	register("bench capacity", newBenchCapacityCmd)
}

func newBenchCapacityCmd() *cobra.Command {
	var o bench.Capacity
	c := &cobra.Command{Use: "capacity", Short: "measure the load generator itself: chunks/s and timestamp accuracy against the simulator", Args: noArgs,
		Long: capacityUsage,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return usageError("%v", err)
			}
			return o.Run(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		}}
	bindCapacityFlags(c.Flags(), &o)
	return c
}

// capacityUsage is the help text of `starter bench capacity`.
const capacityUsage = `usage: starter bench capacity [flags]

Measures the load generator, not a server: it streams from the simulator's
fixed-latency fast mode over TCP on 127.0.0.1 with one token per chunk and
compares every client timestamp with the simulator's own send time (its
per-request timeline). For each point it prints chunks/s and the client -
server difference of TTFT (per request) and ITL (per chunk gap).

Default points: c1280 with a 10 ms ITL (capacity: target >= 100,000 chunks/s)
and c256 with a 20 ms ITL (accuracy: mean TTFT and ITL within 1%, p99
absolute error under 0.5 ms). The simulator runs in this process unless
--base-url names one started with "starter sim serve --ttft-ms T --itl-ms I"
(then --ttft/--itl must match it and timelines come from /sim/timelines).`

// bindCapacityFlags adds the command's flags, with their defaults, to fs.
func bindCapacityFlags(fs *flag.FlagSet, o *bench.Capacity) {
	fs.StringVar(&o.Points, "points", "1280:10ms:capacity,256:20ms:accuracy", "comma-separated conc:itl:check points (check = capacity|accuracy|none)")
	fs.DurationVar(&o.TTFT, "ttft", 50*time.Millisecond, "simulator fixed TTFT")
	fs.IntVar(&o.OSL, "osl", 200, "output tokens per request (one per chunk)")
	fs.IntVar(&o.ISL, "isl", 128, "prompt tokens per request")
	fs.IntVar(&o.Waves, "waves", 3, "measured requests = waves x concurrency (after one warmup wave)")
	fs.Float64Var(&o.RangeRatio, "random-range-ratio", 0.8, "OSL/ISL drawn from [ratio x L, L] so requests do not finish in lockstep")
	fs.StringVar(&o.BaseURL, "base-url", "", "use an external simulator instead of starting one")
	fs.BoolVar(&o.Pin, "pin", true, "for accuracy points, pin the client to CPU 0 and the simulator child to the other CPUs so the two processes do not preempt each other (Linux, >= 2 CPUs)")
	fs.BoolVar(&o.SimProcess, "sim-process", true, "run the simulator as a child process (starter sim serve) so it does not share this Go runtime; false runs it in-process")
	fs.BoolVar(&o.JSON, "json", false, "print the points as JSON")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole measurement here")
	fs.IntVar(&o.ClientProcs, "client-procs", 0, "GOMAXPROCS for the client (0 = leave as is); the simulator child keeps its own default")
}
