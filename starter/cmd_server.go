package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/temporalx"
)

func init() {
	register("server start", func() *cobra.Command {
		c := &cobra.Command{Use: "start", Short: "start the embedded Temporal dev server (SQLite, Web UI, search attributes)", Args: noArgs}
		build := devServerFlags(c.Flags())
		c.RunE = func(*cobra.Command, []string) error { return runServerStart(build) }
		return c
	})
	register("server stop", func() *cobra.Command {
		c := &cobra.Command{Use: "stop", Short: "stop the embedded Temporal dev server started by `server start`", Args: noArgs}
		build := devServerFlags(c.Flags())
		c.RunE = func(*cobra.Command, []string) error { return runServerStop(build) }
		return c
	})
}

// homeDir is where sweepflow keeps its local state: the dev server's
// database, the results ledger, artifacts and the local cluster's nodes.
func homeDir() string {
	if h := os.Getenv("SWEEPFLOW_HOME"); h != "" {
		return h
	}
	return ".sweepflow"
}

func devServerFlags(fs *flag.FlagSet) func() (temporalx.DevServer, bool, error) {
	dataDir := fs.String("data-dir", filepath.Join(homeDir(), "temporal"), "directory for the dev server's SQLite database and log")
	port := fs.Int("port", 7233, "frontend gRPC port")
	uiPort := fs.Int("ui-port", 8233, "Web UI port")
	stock := fs.Bool("stock", false, "run the Temporal CLI's dev server with its defaults, without sweepflow's build (no metrics endpoint), SQLite (WAL, synchronous=NORMAL) and dynamic config (eager activities, one task queue partition) tuning")
	metrics := fs.Int("metrics-port", 0, "serve the server's Prometheus metrics on this port (default: none; they cost throughput)")
	return func() (temporalx.DevServer, bool, error) {
		wd, _ := os.Getwd()
		bin, own, err := devServerBinary(wd, *stock)
		if err != nil {
			return temporalx.DevServer{}, false, err
		}
		abs, err := filepath.Abs(*dataDir)
		if err != nil {
			return temporalx.DevServer{}, false, err
		}
		return temporalx.DevServer{Binary: bin, DataDir: abs, IP: "127.0.0.1", Port: *port, UIPort: *uiPort, Stock: *stock,
			MetricsPort: *metrics, SearchAttributes: temporalx.SearchAttributeTypes()}, own, nil
	}
}

// devServerBinary is sweepflow-devserver, or the pinned CLI when stock or
// when sweepflow-devserver is not built; own reports sweepflow's build.
func devServerBinary(wd string, stock bool) (bin string, own bool, err error) {
	if stock {
		bin, err = temporalx.CLIPath(wd)
		return bin, false, err
	}
	return temporalx.DevServerPath(wd)
}

func runServerStart(build func() (temporalx.DevServer, bool, error)) error {
	d, own, err := build()
	if err != nil {
		return err
	}
	if !d.Stock && !own {
		fmt.Fprintf(os.Stderr, "note: %s is not built; running the Temporal CLI's dev server, which is slower (it always serves metrics). scripts/install-temporal.sh builds both.\n", temporalx.DevServerBinary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pid, started, err := d.Start(ctx)
	if err != nil {
		return err
	}
	verb := "already running"
	if started {
		verb = "started"
	}
	fmt.Printf("Temporal dev server %s (pid %d)\n  address: %s\n  Web UI:  %s\n  data:    %s\n", verb, pid, d.Address(), d.UIURL(), d.DataDir)
	return nil
}

func runServerStop(build func() (temporalx.DevServer, bool, error)) error {
	d, _, err := build()
	if err != nil {
		return err
	}
	if err := d.Stop(); err != nil {
		return err
	}
	fmt.Println("Temporal dev server stopped")
	return nil
}
