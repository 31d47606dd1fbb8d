package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/cluster/slurm/power"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
)

func init() {
	register("power collect", newPowerCollectCmd)
}

// newPowerCollectCmd is the head-node power collector the Slurm backend runs
// as a job step for telemetry dcgm-power (srt-slurm's telemetry stage runs it
// in its orchestrator): it polls the DCGM exporters until stopped and writes
// samples.csv and manifest.json.
func newPowerCollectCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "collect --config FILE",
		Short: "collect DCGM power samples from a bring-up's exporters until stopped (a job step the Slurm backend runs)",
		Args:  noArgs,
	}
	cfgFile := c.Flags().String("config", "", "the collector settings the launch wrote (power-collector.json) (required)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *cfgFile == "" {
			return usageError("--config is required (usage: starter power %s)", c.Use)
		}
		data, err := os.ReadFile(*cfgFile)
		if err != nil {
			return err
		}
		var s srtlaunch.PowerTelemetry
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("%s: %v", *cfgFile, err)
		}
		version := "dev"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			version = bi.Main.Version
		}
		col, err := power.New(s, power.Options{Version: "sweepflow " + version, Log: c.OutOrStdout()})
		if err != nil {
			return err
		}
		// scancel at teardown stops the step with SIGTERM: the last scrape
		// and the terminal manifest follow.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err = col.Run(ctx)
		return err
	}
	return c
}
