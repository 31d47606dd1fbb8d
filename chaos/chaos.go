// Package chaos makes a sweep on a simulated cluster meet the faults of a
// real one, drawn from a seed: engine crashes with a real engine's last
// words, node failures, bring-ups that hang past their health budget, perf
// streams cut mid-window, worker kills and a Temporal server restart, at
// random points and stages. The same seed over the same points and kinds
// draws the same faults.
//
// A fault of a stage attempt's own (crash, hang, stream cut) travels with
// the point's spec (point.Fault.Chaos; Apply) and the attempt carries it
// out on the worker, through the simulator's fault tooling (the emulated
// partition's SWEEPFLOW_SIM_CRASH, loadgen's cut streams). A fault from
// outside the worker (a node set DOWN, the worker SIGKILLed, the server
// restarted) is injected by the Driver while the sweep runs, when the
// fault's stage runs on its point. `starter sweep start --chaos SEED` does
// both and lists what it injected; docs/faults.md has the user's side.
package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// Kind is a kind of fault.
type Kind string

// The kinds.
const (
	// NodeFailure: a node of the point's allocation is set DOWN during
	// perf (scontrol); the allocation is lost (node-fail).
	NodeFailure Kind = "node-failure"
	// EngineCrash: the bring-up's engine workers die with the log tail a
	// real engine prints (CUDA OOM, NCCL, GPU Xid); the attempt's class is
	// the signature's.
	EngineCrash Kind = "engine-crash"
	// BringUpHang: the bring-up's workers never register and the health
	// budget, cut to activities.ChaosHangBudget, runs out (health-budget).
	BringUpHang Kind = "bringup-hang"
	// StreamCut: perf's response streams are cut half its window in; the
	// run fails the client's error-rate gate.
	StreamCut Kind = "stream-cut"
	// WorkerKill: the worker is SIGKILLed while the fault's stage runs on
	// the point, and started again; every attempt it ran is lost.
	WorkerKill Kind = "worker-kill"
	// ServerRestart: the Temporal server stops while the fault's stage
	// runs on the point and starts again after a pause longer than the
	// heartbeat timeout; every attempt in flight is lost.
	ServerRestart Kind = "server-restart"
)

// AllKinds lists every kind, in the order a run draws one of each.
var AllKinds = []Kind{NodeFailure, EngineCrash, BringUpHang, StreamCut, WorkerKill, ServerRestart}

// External reports whether the Driver injects the kind from outside the
// worker; the others travel with the point (Apply).
func (k Kind) External() bool { return k == NodeFailure || k == WorkerKill || k == ServerRestart }

// crashes are the engine crashes a draw picks from (the simulator's crash
// tails, sim/simrole). An NCCL or Xid crash and a node failure count
// against the node their evidence names, as real ones do (nodehealth).
var crashes = []string{string(failure.CUDAOOM), string(failure.NCCL), string(failure.GPUXid)}

// Fault is one drawn fault: what, on which point and stage, and the class
// of the failed attempt it makes in the ledger.
type Fault struct {
	Kind  Kind   `json:"kind"`
	Point string `json:"point"` // point ID
	Stage string `json:"stage"`
	// Crash is an engine crash's signature (cuda-oom, nccl, gpu-xid).
	Crash  string        `json:"crash,omitempty"`
	Expect failure.Class `json:"expect"`
}

func (f Fault) String() string {
	k := string(f.Kind)
	if f.Crash != "" {
		k += " (" + f.Crash + ")"
	}
	return fmt.Sprintf("%s in %s of %s", k, f.Stage, f.Point)
}

// Kinds lists the kinds a cluster can meet: the emulated partition all of
// them, the simulated local cluster those without Slurm roles (a stream
// cut, worker kills, a server restart); worker kills and server restarts
// need a process the run may restart.
func Kinds(emulated, worker, server bool) []Kind {
	var out []Kind
	for _, k := range AllKinds {
		switch {
		case !emulated && (k == EngineCrash || k == NodeFailure || k == BringUpHang):
		case k == WorkerKill && !worker, k == ServerRestart && !server:
		default:
			out = append(out, k)
		}
	}
	return out
}

// ParseKinds reads a comma-separated list of kinds ("" is every kind).
func ParseKinds(s string) ([]Kind, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(AllKinds), nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !slices.Contains(AllKinds, k) {
			names := make([]string, len(AllKinds))
			for i, a := range AllKinds {
				names[i] = string(a)
			}
			return nil, fmt.Errorf("unknown chaos kind %q (want %s)", k, strings.Join(names, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// target is a point's stage a fault may hit.
type target struct{ point, stage string }

// targets are the stages of the points a kind may hit: bring-up faults a
// point that brings its own server up (a later point of a shared
// deployment takes its predecessor's), perf faults any point with perf,
// and worker kills and server restarts the long stages (bring-up, perf,
// eval), where the Driver finds them running.
func targets(k Kind, pts []point.Spec) []target {
	deps := map[string]int{}
	for _, p := range pts {
		deps[p.DeploymentHash]++
	}
	var out []target
	for _, p := range pts {
		own := p.DeploymentHash == "" || deps[p.DeploymentHash] == 1
		perf := !p.Profile.EvalOnly
		switch k {
		case EngineCrash, BringUpHang:
			if own {
				out = append(out, target{p.PointID, point.StageBringUp})
			}
		case StreamCut, NodeFailure:
			if perf {
				out = append(out, target{p.PointID, point.StagePerf})
			}
		case WorkerKill, ServerRestart:
			if own {
				out = append(out, target{p.PointID, point.StageBringUp})
			}
			if perf {
				out = append(out, target{p.PointID, point.StagePerf})
			}
			if p.Eval {
				out = append(out, target{p.PointID, point.StageEval})
			}
		}
	}
	return out
}

// Draw draws n faults (n <= 0: one of each kind) of the kinds over the
// points from seed: first one of each kind in order, then kinds at random;
// each on a point and stage of its own, picked at random. The same seed,
// points and kinds give the same faults.
func Draw(seed int64, pts []point.Spec, kinds []Kind, n int) ([]Fault, error) {
	if len(kinds) == 0 {
		return nil, fmt.Errorf("chaos: no fault kind this cluster can meet")
	}
	kinds = slices.Clone(kinds)
	slices.SortFunc(kinds, func(a, b Kind) int { return cmp.Compare(slices.Index(AllKinds, a), slices.Index(AllKinds, b)) })
	if n <= 0 {
		n = len(kinds)
	}
	sorted := slices.Clone(pts)
	slices.SortFunc(sorted, func(a, b point.Spec) int { return cmp.Compare(a.PointID, b.PointID) })
	rng := rand.New(rand.NewPCG(uint64(seed), 0x63686173)) // "chas"
	used := map[target]bool{}
	var out []Fault
	for i := 0; i < n; i++ {
		k := kinds[i%len(kinds)]
		if i >= len(kinds) {
			k = kinds[rng.IntN(len(kinds))]
		}
		var free []target
		for _, t := range targets(k, sorted) {
			if !used[t] {
				free = append(free, t)
			}
		}
		if len(free) == 0 {
			return nil, fmt.Errorf("chaos: %d faults do not fit the sweep's %d points: no free point and stage for fault %d (%s)", n, len(pts), i+1, k)
		}
		t := free[rng.IntN(len(free))]
		used[t] = true
		f := Fault{Kind: k, Point: t.point, Stage: t.stage}
		switch k {
		case EngineCrash:
			f.Crash = crashes[rng.IntN(len(crashes))]
			f.Expect = failure.Class(f.Crash)
		case NodeFailure:
			f.Expect = failure.NodeFail
		case BringUpHang:
			f.Expect = failure.HealthBudget
		case StreamCut:
			f.Expect = failure.Transient
		case WorkerKill, ServerRestart:
			f.Expect = failure.LostWorker
		}
		out = append(out, f)
	}
	return out, nil
}

// Apply puts the faults a stage attempt carries out (engine crashes,
// hangs, stream cuts) into the points' specs, each for the stage's first
// attempt.
func Apply(faults []Fault, pts []point.Spec) {
	for _, f := range faults {
		var c string
		switch f.Kind {
		case EngineCrash:
			c = point.ChaosCrash + ":" + f.Crash
		case BringUpHang:
			c = point.ChaosHang
		case StreamCut:
			c = point.ChaosStreamCut
		default:
			continue
		}
		for i := range pts {
			if pts[i].PointID == f.Point {
				pts[i].Faults = append(pts[i].Faults, point.Fault{Stage: f.Stage, Times: 1, Chaos: c})
			}
		}
	}
}
