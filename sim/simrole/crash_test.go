package simrole

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// sglangArgv is a worker command line the worker role accepts.
var sglangArgv = []string{"python3", "-m", "sglang.launch_server", "--model-path", "/m"}

// runCrashWorker runs the sglang worker role with env as its environment.
func runCrashWorker(ctx context.Context, env map[string]string) (string, error) {
	var out bytes.Buffer
	err := Run(ctx, RoleWorker, sglangArgv,
		Options{Getenv: func(k string) string { return env[k] }, Environ: []string{}, Stdout: &out, Stderr: &out})
	return out.String(), err
}

// Each injected crash prints a tail the built-in signatures classify as the
// crash it names, and the worker role fails; other roles ignore it.
func TestCrashTailsMatchTheirSignatures(t *testing.T) {
	for _, name := range Crashes() {
		if name == hangKind || engineFaults[name] != nil {
			continue // blocks (TestCrashHangBlocksUntilCancelled) or serves (TestEngineFault)
		}
		t.Run(name, func(t *testing.T) {
			out, err := runCrashWorker(context.Background(), map[string]string{simenv.EnvCrash: name})
			require.Error(t, err)
			assert.False(t, errors.Is(err, ErrUsage), "%v", err)
			f, ok := failure.Builtin().Match(out)
			require.True(t, ok, out)
			assert.Equal(t, failure.Class(name), f.Class)
		})
	}
	_, err := runCrashWorker(context.Background(), map[string]string{simenv.EnvCrash: "disk-full"})
	require.True(t, errors.Is(err, ErrUsage), "%v", err)
	assert.Contains(t, err.Error(), simenv.EnvCrash)
	assert.Contains(t, err.Error(), `entry "disk-full"`)
	assert.Contains(t, err.Error(), "want comma-separated KIND, KIND@node=NAME or KIND@job=SUBSTRING, KIND one of cuda-oom, gpu-xid, hang, nccl, zero-usage")
}

func TestCrashesListsHang(t *testing.T) {
	assert.Equal(t, []string{"cuda-oom", "gpu-xid", "hang", "nccl", "zero-usage"}, Crashes())
}

// TestEngineFault: an engine-fault kind does not stop the worker; the
// first entry that selects the task sets the engine's fault.
func TestEngineFault(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	var f sim.Faults
	engineFault(env(map[string]string{simenv.EnvCrash: "zero-usage@job=conc128_", "SLURM_JOB_NAME": "sweepflow.s.dsv4_conc128_x"}), &f)
	assert.True(t, f.ZeroUsage)
	f = sim.Faults{}
	engineFault(env(map[string]string{simenv.EnvCrash: "zero-usage@job=conc128_", "SLURM_JOB_NAME": "sweepflow.s.dsv4_conc1_x"}), &f)
	assert.False(t, f.ZeroUsage, "another job")
	engineFault(env(map[string]string{simenv.EnvCrash: "zero-usage@job=conc128_", EnvJob: "sweepflow.s.dsv4_conc128_x", "SLURM_JOB_NAME": "sweepflow-serve-gb200-01_agg_w0"}), &f)
	assert.True(t, f.ZeroUsage, "a step's SLURM_JOB_NAME is its own; the holder job's name comes in EnvJob")
	f = sim.Faults{}
	engineFault(env(map[string]string{simenv.EnvCrash: "cuda-oom@job=conc1_,zero-usage", "SLURM_JOB_NAME": "sweepflow.s.dsv4_conc1_x"}), &f)
	assert.False(t, f.ZeroUsage, "the first entry that applies wins: a crash")
	var buf bytes.Buffer
	require.NoError(t, crash(context.Background(), &buf, env(map[string]string{"SLURMD_NODENAME": "gb200-01"}), "zero-usage"))
	assert.Empty(t, buf.String(), "the worker starts as usual")
}

func TestParseCrash(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []crashEntry
		bad  string // substring of the error; "" = valid
	}{
		{in: "nccl", want: []crashEntry{{Kind: "nccl"}}},
		{in: "cuda-oom@node=gb200-03", want: []crashEntry{{Kind: "cuda-oom", Node: "gb200-03"}}},
		{in: "gpu-xid@job=.p0007", want: []crashEntry{{Kind: "gpu-xid", Job: ".p0007"}}},
		{in: "hang@job=sweepflow.s1.p2, nccl@node=n1 ,cuda-oom", want: []crashEntry{
			{Kind: "hang", Job: "sweepflow.s1.p2"}, {Kind: "nccl", Node: "n1"}, {Kind: "cuda-oom"}}},
		{in: "disk-full", bad: `entry "disk-full": unknown kind "disk-full"`},
		{in: "nccl,oom@node=n1", bad: `entry "oom@node=n1": unknown kind "oom"`},
		{in: "@node=n1", bad: `unknown kind ""`},
		{in: "nccl@host=n1", bad: `entry "nccl@host=n1": unknown selector "host"`},
		{in: "nccl@", bad: `unknown selector ""`},
		{in: "nccl@node=", bad: `entry "nccl@node=": empty node name`},
		{in: "nccl@node", bad: `empty node name`},
		{in: "nccl@job=", bad: `empty job name`},
		{in: "nccl,", bad: `entry "": empty entry`},
		{in: "nccl,,gpu-xid", bad: `empty entry`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseCrash(tc.in)
			if tc.bad == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.True(t, errors.Is(err, ErrUsage), "%v", err)
			assert.Contains(t, err.Error(), simenv.EnvCrash+"=")
			assert.Contains(t, err.Error(), tc.bad)
			assert.Contains(t, err.Error(), "KIND@node=NAME or KIND@job=SUBSTRING, KIND one of cuda-oom, gpu-xid, hang, nccl, zero-usage")
		})
	}
}

// Selectors pick the task that crashes; where none applies the worker runs
// normally (here it starts, then stops for want of ETCD_ENDPOINTS: its own
// error, no crash's).
func TestCrashSelectors(t *testing.T) {
	const job = "sweepflow.sw-42.p0007"
	for _, tc := range []struct {
		name, value, node string
		want              string // kind whose tail is printed; "" = runs normally
	}{
		{"node match", "nccl@node=gb200-03", "gb200-03", "nccl"},
		{"node mismatch", "nccl@node=gb200-03", "gb200-04", ""},
		{"node prefix is no match", "nccl@node=gb200-0", "gb200-03", ""},
		{"job substring", "gpu-xid@job=.p0007", "gb200-01", "gpu-xid"},
		{"job mismatch", "gpu-xid@job=.p0008", "gb200-01", ""},
		{"first applies wins", "cuda-oom@node=gb200-09,nccl@job=sw-42,gpu-xid", "gb200-01", "nccl"},
		{"unselected fallback", "cuda-oom@node=gb200-09,gpu-xid", "gb200-01", "gpu-xid"},
		{"first of two applying", "gpu-xid@node=gb200-01,nccl@job=sw-42", "gb200-01", "gpu-xid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{simenv.EnvCrash: tc.value, "SLURMD_NODENAME": tc.node, "SLURM_JOB_NAME": job}
			out, err := runCrashWorker(context.Background(), env)
			if tc.want == "" {
				require.Error(t, err)
				assert.False(t, errors.Is(err, ErrUsage), "%v", err)
				assert.NotContains(t, err.Error(), "simulated")
				assert.Contains(t, err.Error(), "ETCD_ENDPOINTS is not set")
				assert.Contains(t, out, "SIMULATED sglang")
				_, matched := failure.Builtin().Match(out)
				assert.False(t, matched, out)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "simulated "+tc.want+" crash")
			assert.NotContains(t, out, "SIMULATED sglang")
			f, ok := failure.Builtin().Match(out)
			require.True(t, ok, out)
			assert.Equal(t, failure.Class(tc.want), f.Class)
		})
	}
}

// A malformed value is refused even where no entry would apply.
func TestCrashMalformedRefusedWhereNothingApplies(t *testing.T) {
	for _, v := range []string{"nccl@node=gb200-09,disk-full@node=gb200-09", "nccl@nod=gb200-01", "nccl@job="} {
		t.Run(v, func(t *testing.T) {
			out, err := runCrashWorker(context.Background(),
				map[string]string{simenv.EnvCrash: v, "SLURMD_NODENAME": "gb200-01", "SLURM_JOB_NAME": "sweepflow.s.p"})
			require.True(t, errors.Is(err, ErrUsage), "%v", err)
			assert.Contains(t, err.Error(), simenv.EnvCrash)
			assert.NotContains(t, out, "SIMULATED sglang")
		})
	}
}

// The nccl and gpu-xid tails name the node as real logs do: SLURMD_NODENAME,
// else the host's name.
func TestCrashTailsNameTheNode(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, tc := range []struct{ kind, node, line string }{
		{"nccl", "gb200-03", "gb200-03:2231:2598 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41287> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"},
		{"gpu-xid", "gb200-03", "Dec  5 03:12:01 gb200-03 kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus.\n"},
		{"nccl", "", host + ":2231:2598 [0] "},
		{"gpu-xid", "", "Dec  5 03:12:01 " + host + " kernel: NVRM: Xid "},
	} {
		t.Run(tc.kind+"/"+tc.node, func(t *testing.T) {
			out, err := runCrashWorker(context.Background(), map[string]string{simenv.EnvCrash: tc.kind, "SLURMD_NODENAME": tc.node})
			require.Error(t, err)
			assert.Contains(t, out, tc.line)
			assert.NotContains(t, out, hostToken)
		})
	}
	// cuda-oom names no node.
	out, err := runCrashWorker(context.Background(), map[string]string{simenv.EnvCrash: "cuda-oom", "SLURMD_NODENAME": "gb200-03"})
	require.Error(t, err)
	assert.True(t, strings.HasSuffix(out, crashTails["cuda-oom"]), out)
	assert.NotContains(t, out, "gb200-03")
}

// hang prints its start-up lines, never becomes ready and returns
// ctx.Err() once its context is cancelled.
func TestCrashHangBlocksUntilCancelled(t *testing.T) {
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{simenv.EnvCrash: "hang@node=gb200-02", "SLURMD_NODENAME": "gb200-02"}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RoleVLLM, []string{"python3", "-m", "dynamo.vllm", "--model", "/m"},
			Options{Getenv: func(k string) string { return env[k] }, Environ: []string{}, Stdout: &out, Stderr: &out})
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Load weight begin.") }, 5*time.Second, 5*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("hang returned before cancel: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("hang did not return after cancel")
	}
	assert.Contains(t, out.String(), "[sim DP0 TP0] Init torch distributed begin.\n")
	assert.NotContains(t, out.String(), "SIMULATED")
	_, matched := failure.Builtin().Match(out.String())
	assert.False(t, matched, "a hang leaves no crash evidence: %s", out.String())

	// Directly: crash returns ctx.Err() (a deadline too).
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	var b bytes.Buffer
	err := crash(dctx, &b, func(string) string { return "" }, "hang")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, crashTails[hangKind], b.String())
}

// lockedBuffer is a bytes.Buffer a running role writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
