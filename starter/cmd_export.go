package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/inferencex/export"
	"github.com/sweepflow/sweepflow/results"
)

func init() {
	register("export", newExportCmd)
}

// ledgerFlags locate the results store and the artifact store the way the
// worker does (workers.Config): --results / SWEEPFLOW_RESULTS, else
// <home>/results.db; --artifacts / SWEEPFLOW_ARTIFACTS, else <home>/artifacts;
// home is --home / SWEEPFLOW_HOME, default .sweepflow.
type ledgerFlags struct {
	home, results, artifacts string
}

func (l *ledgerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&l.home, "home", envOr("SWEEPFLOW_HOME", ".sweepflow"), "local state directory the worker writes (ledger, artifacts)")
	fs.StringVar(&l.results, "results", os.Getenv("SWEEPFLOW_RESULTS"), "results store DSN: SQLite path or postgres://... (default: <home>/results.db)")
	fs.StringVar(&l.artifacts, "artifacts", os.Getenv("SWEEPFLOW_ARTIFACTS"), "artifact store: directory, file:///dir or s3://bucket/prefix?endpoint=... (default: <home>/artifacts)")
}

// dsn is the results store the flags name.
func (l *ledgerFlags) dsn() string {
	if l.results != "" {
		return l.results
	}
	return filepath.Join(l.home, "results.db")
}

// where names the store for messages, without a password.
func (l *ledgerFlags) where() string {
	if l.results != "" {
		return "--results"
	}
	return l.dsn()
}

// openOrCreate opens the results store, creating a SQLite ledger if there
// is none yet (a sweep start records its plan before a worker ran).
func (l *ledgerFlags) openOrCreate(ctx context.Context) (*results.Store, error) {
	s, err := results.Open(ctx, l.dsn())
	if err != nil {
		return nil, err
	}
	if moved := s.LegacyMovedTo(); moved != "" {
		fmt.Fprintf(os.Stderr, "note: the ledger predates point identities; it was moved to %s and a new one started\n", moved)
	}
	return s, nil
}

// open opens the results store (which must exist: reading never creates an
// empty ledger) and the artifact store (nil with a warning when it cannot be
// opened: rows then carry the ledger's figures only).
func (l *ledgerFlags) open(ctx context.Context) (*results.Store, artifacts.Store, []string, error) {
	dsn := l.dsn()
	if l.results == "" {
		if _, err := os.Stat(dsn); err != nil {
			return nil, nil, nil, &exitError{code: 1, msg: fmt.Sprintf("no results store at %s (run a sweep first, or pass --home or --results)", dsn)}
		}
	}
	store, err := results.Open(ctx, dsn)
	if err != nil {
		return nil, nil, nil, err
	}
	art := l.artifacts
	if art == "" {
		art = filepath.Join(l.home, "artifacts")
	}
	var warnings []string
	arts, err := artifacts.Open(art)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("artifact store %s: %v; using ledger figures only", art, err))
		arts = nil
	}
	return store, arts, warnings, nil
}

func runExport(args []string) error { return execute(nil, newExportCmd(), args, nil, nil) }

func newExportCmd() *cobra.Command {
	c := &cobra.Command{Use: "export", Short: "write a sweep's results as InferenceX agg_bmk / agg_eval_all JSON rows", Args: noArgs}
	fs := c.Flags()
	var lf ledgerFlags
	lf.bind(fs)
	sweep := fs.String("sweep", "", "sweep ID to export (required)")
	format := fs.String("format", "ix", "output format: ix (InferenceX agg_bmk.json + agg_eval_all.json)")
	out := fs.String("out", "", "directory to write the files into (default: ./export-<sweep>)")
	asJSON := fs.Bool("json", false, "print a JSON summary instead of text")
	c.RunE = func(*cobra.Command, []string) error {
		if *sweep == "" {
			return &exitError{code: 2, msg: "--sweep ID is required"}
		}
		if *format != "ix" {
			return &exitError{code: 2, msg: fmt.Sprintf("--format %q: only \"ix\" is supported", *format)}
		}
		dir := *out
		if dir == "" {
			dir = "export-" + *sweep
		}
		ctx := context.Background()
		store, arts, warnings, err := lf.open(ctx)
		if err != nil {
			return err
		}
		defer store.Close()
		e, err := export.Build(ctx, store, arts, *sweep)
		if errors.Is(err, export.ErrNoSweep) {
			return &exitError{code: 1, msg: err.Error()}
		}
		if err != nil {
			return err
		}
		e.Warnings = append(warnings, e.Warnings...)
		paths, err := e.WriteDir(dir)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"sweep_id": *sweep, "files": paths, "bmk_rows": len(e.Bmk), "eval_rows": len(e.Evals), "warnings": nonNil(e.Warnings)})
		}
		for _, w := range e.Warnings {
			fmt.Fprintln(os.Stderr, "warning: "+w)
		}
		fmt.Printf("%s: %d rows\n%s: %d rows\n", paths[0], len(e.Bmk), paths[1], len(e.Evals))
		if len(paths) > 2 {
			fmt.Printf("%s: the append-only perf-changelog entries of the points adaptive searches added\n", paths[2])
		}
		return nil
	}
	return c
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
