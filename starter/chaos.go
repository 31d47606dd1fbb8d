package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	flag "github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/chaos"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// chaosFlags are `sweep start --chaos SEED` and its companions.
type chaosFlags struct {
	seed       string
	faults     int
	kinds      string
	worker     string
	server     string
	serverDown time.Duration
}

func (c *chaosFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.seed, "chaos", "", "simulated and emulated clusters only: draw faults from this seed (engine crashes, node failures, bring-up hangs, perf streams cut, worker kills, a server restart), inject them, wait for the sweep and print what was injected against the ledger's failed attempts (docs/faults.md)")
	fs.IntVar(&c.faults, "chaos-faults", 0, "with --chaos: how many faults (0: one of each kind the run can inject)")
	fs.StringVar(&c.kinds, "chaos-kinds", "", "with --chaos: only these kinds, comma-separated (node-failure, engine-crash, bringup-hang, stream-cut, worker-kill, server-restart)")
	fs.StringVar(&c.worker, "chaos-worker", "", "with --chaos: the worker's pid or pid file: worker kills SIGKILL it and start it again as it was")
	fs.StringVar(&c.server, "chaos-server", "", "with --chaos: the Temporal server's pid or pid file, restarted as it was (default: the embedded dev server's pid file, when it serves TEMPORAL_ADDRESS)")
	fs.DurationVar(&c.serverDown, "chaos-server-down", 0, "with --chaos: how long a restarted server stays down (default: the heartbeat timeout plus 5 s, so every attempt in flight is lost)")
}

func (c *chaosFlags) on() bool { return c.seed != "" }

// chaosRun is a prepared chaos run: the drawn faults and the processes it
// acts on.
type chaosRun struct {
	seed           int64
	faults         []chaos.Fault
	worker, server *chaos.Process
	serverDown     time.Duration
}

// prepare checks the flags, finds the processes and draws the faults into
// in's points (a real cluster is refused in one line).
func (c *chaosFlags) prepare(in *workflows.SweepInput, cl *config.Cluster, derivedID bool) (*chaosRun, error) {
	seed, err := strconv.ParseInt(c.seed, 10, 64)
	if err != nil {
		return nil, usageError("--chaos %q: want an integer seed", c.seed)
	}
	r := &chaosRun{seed: seed, serverDown: c.serverDown}
	var kinds []chaos.Kind
	if c.kinds != "" {
		if kinds, err = chaos.ParseKinds(c.kinds); err != nil {
			return nil, usageError("--chaos-kinds: %v", err)
		}
	}
	if c.worker != "" {
		if r.worker, err = chaos.OpenProcess("worker", c.worker); err != nil {
			return nil, usageError("--chaos-worker: %v", err)
		}
	}
	server := c.server
	if server == "" {
		server = embeddedServerPidFile()
	}
	if server != "" {
		if r.server, err = chaos.OpenProcess("temporal server", server); err != nil {
			return nil, usageError("--chaos-server: %v", err)
		}
	}
	for _, k := range kinds {
		if (k == chaos.WorkerKill && r.worker == nil) || (k == chaos.ServerRestart && r.server == nil) {
			return nil, usageError("--chaos-kinds %s: needs --chaos-worker or --chaos-server to act on", k)
		}
	}
	if r.serverDown <= 0 {
		hb := workflows.WorkerLossHeartbeat
		if in.Tuning.HeartbeatTimeout > 0 {
			hb = in.Tuning.HeartbeatTimeout
		}
		r.serverDown = hb + 5*time.Second
	}
	r.faults, err = control.ApplyChaos(in, cl, control.Chaos{Seed: seed, Faults: c.faults, Kinds: kinds,
		Worker: r.worker != nil, Server: r.server != nil}, derivedID)
	if err != nil {
		return nil, &exitError{code: exitUsage, msg: errtext.FirstLine(err)}
	}
	return r, nil
}

// embeddedServerPidFile is the pid file of `starter server start`'s dev
// server when it serves the address this command talks to ("" if not).
func embeddedServerPidFile() string {
	if a := os.Getenv("TEMPORAL_ADDRESS"); a != "" && a != "127.0.0.1:7233" && a != "localhost:7233" {
		return ""
	}
	f := filepath.Join(homeDir(), "temporal", "temporal.pid")
	if _, err := os.Stat(f); err != nil {
		return ""
	}
	return f
}

// memo is what the sweep's memo records of the run.
func (r *chaosRun) memo() map[string]any {
	return map[string]any{"seed": r.seed, "faults": r.faults}
}

// run starts the sweep, drives its external faults, waits for it to end
// and prints what was injected against the ledger (progress on stderr; the
// account, or with --json the chaos.Summary, on stdout).
func (r *chaosRun) run(c client.Client, in *workflows.SweepInput, f startFlags) error {
	say := func(s string) { fmt.Fprintln(os.Stderr, s) }
	if _, err := start(c, in, f); err != nil {
		return err
	}
	say(fmt.Sprintf("sweep %s: %d points on cluster %s, chaos seed %d\n  Web UI: %s", in.SweepID, len(in.Points), in.Cluster, r.seed,
		control.Link(f.uiURL, in.SweepID)))
	ids := make([]string, len(in.Points))
	for i, p := range in.Points {
		ids[i] = p.PointID
	}
	for _, fl := range r.faults {
		say("chaos: drawn " + fl.String())
	}
	d := &chaos.Driver{Client: c, SweepID: in.SweepID, Points: ids, Faults: r.faults, Worker: r.worker, Server: r.server,
		ServerDown: r.serverDown, NodeDownFor: 20 * time.Second, Log: say}
	ctx := context.Background()
	inj, err := d.Run(ctx)
	if err != nil {
		return err
	}
	pr, err := r.waitSweep(ctx, c, in.SweepID, say)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := f.ledger.openOrCreate(sctx)
	if err != nil {
		return err
	}
	defer store.Close()
	atts, err := store.Attempts(sctx, in.SweepID)
	if err != nil {
		return err
	}
	sum := chaos.Summarize(in.SweepID, r.seed, inj, atts, pr.Counts)
	if r.worker != nil {
		say(fmt.Sprintf("chaos: the worker now runs as pid %d", r.worker.Pid()))
	}
	if f.jsonOut {
		if err := json.NewEncoder(os.Stdout).Encode(sum); err != nil {
			return err
		}
	} else {
		sum.WriteText(os.Stdout)
	}
	if len(sum.Mismatches) > 0 {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("chaos: the ledger does not match the faults injected (%d mismatches)", len(sum.Mismatches))}
	}
	return nil
}

// waitSweep waits for the sweep to close, saying once when a point waits
// at the operator gate (a fault that spent its stage's budget).
func (r *chaosRun) waitSweep(ctx context.Context, c client.Client, id string, say func(string)) (*workflows.SweepProgress, error) {
	told := map[string]bool{}
	for {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		desc, err := c.DescribeWorkflowExecution(qctx, id, "")
		cancel()
		if err == nil && desc.GetWorkflowExecutionInfo().GetCloseTime() != nil {
			qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return control.Query(qctx, c, id)
		}
		qctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		if pr, err := control.Query(qctx, c, id); err == nil {
			for _, p := range pr.Points {
				if p.Status == point.StatusAwaitingOperator && !told[p.PointID] {
					told[p.PointID] = true
					say(fmt.Sprintf("chaos: point %s waits at the operator gate; `starter retry %s` (or skip, abort) lets the run end",
						p.PointID, workflows.PointWorkflowID(id, p.PointID)))
				}
			}
		}
		cancel()
		time.Sleep(time.Second)
	}
}
