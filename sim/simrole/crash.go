package simrole

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// EnvJob is the name of the holder job a role serves; the Slurm backend
// sets it for simulator roles (a step's own SLURM_JOB_NAME is the step's
// name, not the job's).
const EnvJob = "SWEEPFLOW_SIM_JOB"

// hangKind is the kind that never crashes: the worker prints its first
// start-up lines and blocks, never ready, until it is stopped (the
// cluster's health budget runs out).
const hangKind = "hang"

// hostToken is where a tail names the node it failed on.
const hostToken = "{{host}}"

// crashTails are what an SGLang worker on GB200 prints when it dies of each
// failure (written for the simulator after the formats of PyTorch 2.x,
// NCCL 2.26 and the NVIDIA driver as forwarded by syslog; hostToken is the
// node's name). The role exits 1 after printing one. The hang kind's tail
// is the start-up it prints before blocking.
var crashTails = map[string]string{
	"cuda-oom": `[sim DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.43 GB
[sim DP0 TP0] Capture cuda graph begin. This can take up to several minutes.
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 412, in capture
    graph.capture_end()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 184.00 GiB of which 1.12 GiB is free.
`,
	"nccl": `[sim DP0 TP0] Init torch distributed begin.
` + hostToken + `:2231:2598 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41287> with status=12 opcode=0 len=0 vendor err 129 (Recv)
torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3401, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2
`,
	"gpu-xid": `[sim DP0 TP0] Load weight begin.
Dec  5 03:12:01 ` + hostToken + ` kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus.
RuntimeError: CUDA error: unspecified launch failure
`,
	hangKind: `[sim DP0 TP0] Init torch distributed begin.
[sim DP0 TP0] Init torch distributed ends. mem usage=0.12 GB
[sim DP0 TP0] Load weight begin. avail mem=182.51 GB
`,
}

// engineFaults are the kinds that do not stop the worker: it starts and
// its engine misbehaves (sim.Faults), so the failure shows in what it
// serves.
var engineFaults = map[string]func(*sim.Faults){
	// Broken token accounting: usage reports 0 completion tokens, clients
	// that take output tokens from usage count none, and the validity gate
	// refuses the figures.
	"zero-usage": func(f *sim.Faults) { f.ZeroUsage = true },
}

// Crashes lists the kinds simenv.EnvCrash accepts (hang and the engine faults
// included).
func Crashes() []string {
	out := make([]string, 0, len(crashTails)+len(engineFaults))
	for k := range crashTails {
		out = append(out, k)
	}
	for k := range engineFaults {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// engineFault applies the first simenv.EnvCrash entry that selects this task to
// the engine's faults when it is an engine fault (a malformed value was
// refused by crash before the engine starts).
func engineFault(getenv func(string) string, f *sim.Faults) {
	v := getenv(simenv.EnvCrash)
	if v == "" {
		return
	}
	entries, err := parseCrash(v)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.applies(getenv) {
			if apply, ok := engineFaults[e.Kind]; ok {
				apply(f)
			}
			return
		}
	}
}

// crashEntry is one entry of simenv.EnvCrash: a kind and at most one selector
// (node and job both "" = every worker role).
type crashEntry struct {
	Kind string
	Node string // applies only where SLURMD_NODENAME equals it
	Job  string // applies only where SLURM_JOB_NAME contains it
}

// applies reports whether the entry selects the task getenv describes.
func (e crashEntry) applies(getenv func(string) string) bool {
	switch {
	case e.Node != "":
		return getenv("SLURMD_NODENAME") == e.Node
	case e.Job != "":
		return strings.Contains(cmp.Or(getenv(EnvJob), getenv("SLURM_JOB_NAME")), e.Job)
	}
	return true
}

// parseCrash parses simenv.EnvCrash's value into its entries, in order. Any
// malformed entry (empty, unknown kind, unknown selector, empty name) is
// an ErrUsage naming the variable, the entry and what is accepted.
func parseCrash(v string) ([]crashEntry, error) {
	var out []crashEntry
	for _, raw := range strings.Split(v, ",") {
		s := strings.TrimSpace(raw)
		bad := func(why string) error {
			return fmt.Errorf("%w: %s=%q: entry %q: %s; want comma-separated KIND, KIND@node=NAME or KIND@job=SUBSTRING, KIND one of %s",
				ErrUsage, simenv.EnvCrash, v, s, why, strings.Join(Crashes(), ", "))
		}
		if s == "" {
			return nil, bad("empty entry")
		}
		kind, sel, hasSel := strings.Cut(s, "@")
		if _, ok := crashTails[kind]; !ok && engineFaults[kind] == nil {
			return nil, bad(fmt.Sprintf("unknown kind %q", kind))
		}
		e := crashEntry{Kind: kind}
		if hasSel {
			key, name, _ := strings.Cut(sel, "=")
			switch key {
			case "node":
				e.Node = name
			case "job":
				e.Job = name
			default:
				return nil, bad(fmt.Sprintf("unknown selector %q", key))
			}
			if name == "" {
				return nil, bad("empty " + key + " name")
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// nodeName is the name the tails give the node: SLURMD_NODENAME, else the
// host's name.
func nodeName(getenv func(string) string) string {
	if n := getenv("SLURMD_NODENAME"); n != "" {
		return n
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// crash applies simenv.EnvCrash's value v to a worker role: the first entry that
// applies prints its tail to w and crash returns the role's error (for
// hang, ctx.Err() once ctx ends). It returns nil when no entry applies
// (the role runs normally), and ErrUsage when v is malformed.
func crash(ctx context.Context, w io.Writer, getenv func(string) string, v string) error {
	entries, err := parseCrash(v)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.applies(getenv) {
			continue
		}
		if engineFaults[e.Kind] != nil {
			return nil // the worker starts; its engine carries the fault (engineFault)
		}
		tail := strings.ReplaceAll(crashTails[e.Kind], hostToken, nodeName(getenv))
		if _, err := io.WriteString(w, tail); err != nil {
			return err
		}
		if e.Kind == hangKind {
			<-ctx.Done()
			return ctx.Err()
		}
		return fmt.Errorf("simulated %s crash (%s)", e.Kind, simenv.EnvCrash)
	}
	return nil
}
