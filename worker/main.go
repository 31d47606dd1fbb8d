// Command worker runs sweepflow's Temporal workers next to a cluster: the
// control worker (sweep and point workflows) and the cluster worker (stage
// activities against the cluster backend named by the cluster profile).
//
// Connection: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS_* or the Temporal CLI's TOML profile (default 127.0.0.1:7233).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/worker/workers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker: "+err.Error())
		os.Exit(1)
	}
}

func run() error {
	var cfg workers.Config
	cfg.Bind(flag.CommandLine)
	debug := flag.Bool("debug", false, "debug logging")
	flag.Parse()
	log := temporalx.Logger(*debug)
	defer log.Sync() //nolint:errcheck

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	acts, closeFn, err := cfg.Activities(ctx, log)
	if err != nil {
		return err
	}
	defer closeFn()
	c, closeClient, err := cfg.Dial(log)
	if err != nil {
		return err
	}
	defer closeClient()
	w, err := workers.Start(c, workers.Options{
		ClusterName: cfg.ClusterName(), TaskQueue: cfg.TaskQueue(), Control: cfg.Control, Activities: acts,
		MaxConcurrentActivities: cfg.MaxActivities, Pollers: cfg.Pollers, Logger: log, SimStageTime: cfg.SimStageTime,
	})
	if err != nil {
		return err
	}
	log.Info("worker ready", zap.String("cluster", cfg.ClusterName()), zap.String("task_queue", cfg.TaskQueue()), zap.String("backend", acts.Backend.Name()))
	<-ctx.Done()
	log.Info("stopping: letting running activities finish")
	w.Stop()
	return nil
}
