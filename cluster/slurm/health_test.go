package slurm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
)

// fakeSlurm puts squeue/sacct/scancel stand-ins on PATH: the job is RUNNING
// and its steps are the names in the steps file.
func fakeSlurm(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	steps := filepath.Join(dir, "steps")
	require.NoError(t, os.WriteFile(steps, nil, 0o644))
	squeue := fmt.Sprintf(`#!/bin/sh
case "$*" in
  *" -s "*) n=0; while read -r s; do n=$((n+1)); echo "7.$n|$s"; done < %q ;;
  *) echo "7|RUNNING|None|gb200-[01-02]|job" ;;
esac
`, steps)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "squeue"), []byte(squeue), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "scancel"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return steps
}

func TestHealthWaitsForRegisteredWorkers(t *testing.T) {
	dir := t.TempDir()
	stepsFile := fakeSlurm(t, dir)
	var body string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/health", r.URL.Path)
		fmt.Fprint(w, body)
	}))
	defer front.Close()
	b, err := New(Config{Partition: "p", SharedRoot: dir, NodeLocalRoot: dir, StarterBin: "/bin/true", Launch: Launch{SrtRoot: "x"}})
	require.NoError(t, err)
	serve := filepath.Join(dir, "serve-1")
	require.NoError(t, os.MkdirAll(serve, 0o755))
	st := launchState{Started: time.Now(), BudgetSec: 3600, URL: front.URL, Prefill: 2, Decode: 1, Steps: []step{
		{Name: stepPrefix + "infra", Role: "infra", Output: filepath.Join(serve, "infra.out")},
		{Name: stepPrefix + "gb200-01_prefill_w0", Role: "prefill", Output: filepath.Join(serve, "gb200-01_prefill_w0.out")},
		{Name: stepPrefix + "gb200-02_prefill_w1", Role: "prefill", Output: filepath.Join(serve, "gb200-02_prefill_w1.out")},
		{Name: stepPrefix + "gb200-03_decode_w0", Role: "decode", Output: filepath.Join(serve, "gb200-03_decode_w0.out")},
	}}
	require.NoError(t, writeJSON(filepath.Join(serve, "launch.json"), st))
	var names []string
	for _, s := range st.Steps {
		names = append(names, s.Name)
	}
	require.NoError(t, os.WriteFile(stepsFile, []byte(strings.Join(names, "\n")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("Load weights begin\n"), 0o644))
	alloc := cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02"}, WorkDir: dir}
	srv := cluster.Server{URL: front.URL, Handle: "serve-1"}
	inst := func(comp string) string {
		return `{"component":"` + comp + `","endpoint":"generate","namespace":"dynamo","instance_id":1,"transport":{"tcp":"10.0.0.1:1"}}`
	}
	ctx := context.Background()

	body = `{"status":"healthy","instances":[` + inst("prefill") + `,` + inst("decode") + `]}`
	phase, err := b.Health(ctx, alloc, srv)
	require.Error(t, err)
	assert.False(t, errorsIsAny(err), "still coming up is not a stage failure: %v", err)
	assert.Equal(t, "2/3 workers registered (prefill 1/2, decode 1/1), phase loading weights", phase)

	body = `{"status":"healthy","instances":[` + inst("prefill") + `,` + inst("prefill") + `,` + inst("decode") + `]}`
	phase, err = b.Health(ctx, alloc, srv)
	require.NoError(t, err)
	assert.Equal(t, "ready: 3/3 workers registered (prefill 2/2, decode 1/1), phase loading weights", phase)

	// Past the recipe's budget: fail with the tail of a worker that did
	// not register.
	body = `{"status":"healthy","instances":[` + inst("decode") + `]}`
	st.Started = time.Now().Add(-2 * time.Hour)
	require.NoError(t, writeJSON(filepath.Join(serve, "launch.json"), st))
	require.NoError(t, os.WriteFile(st.Steps[1].Output, []byte("loading shard 3/96\nNCCL WARN stuck\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	require.ErrorIs(t, err, cluster.ErrAllocationLost)
	assert.ErrorContains(t, err, "health_check budget 1h0m0s")
	assert.ErrorContains(t, err, "gb200-01_prefill_w0.out: loading shard 3/96 | NCCL WARN stuck")
	f, ok := failure.Of(err)
	require.True(t, ok)
	assert.Equal(t, failure.HealthBudget, f.Class, "every step still runs: the budget, not the NCCL line, is the evidence")
	assert.Equal(t, "budget 1h0m0s ran out: 1/3 workers registered (prefill 0/2, decode 1/1), phase loading weights", f.Excerpt)

	// A role that exits: its log's tail, and a refused configuration is
	// not retryable.
	st.Started = time.Now()
	require.NoError(t, writeJSON(filepath.Join(serve, "launch.json"), st))
	require.NoError(t, os.WriteFile(stepsFile, []byte(strings.Join(names[:3], "\n")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("usage: sglang [-h] ...\nsglang: error: --disaggregation-mode prefill needs --disaggregation-bootstrap-port\n"), 0o644))
	phase, err = b.Health(ctx, alloc, srv)
	assert.Equal(t, "exited", phase)
	require.ErrorIs(t, err, cluster.ErrBadConfig)
	assert.ErrorContains(t, err, "gb200-03_decode_w0 of slurm job 7 refused its configuration")
	assert.ErrorContains(t, err, "needs --disaggregation-bootstrap-port")
	f, _ = failure.Of(err)
	assert.Equal(t, failure.Failure{Class: failure.RefusedFlag, Excerpt: "sglang: error: --disaggregation-mode prefill needs --disaggregation-bootstrap-port"}, f)

	// A worker that dies of a CUDA OOM: not retryable (as before), class
	// cuda-oom with the torch line as the evidence.
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("Capture cuda graph begin.\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 184.00 GiB\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	require.ErrorIs(t, err, cluster.ErrOOM)
	f, _ = failure.Of(err)
	assert.Equal(t, failure.CUDAOOM, f.Class)
	assert.Contains(t, f.Excerpt, "Tried to allocate 2.00 GiB")

	// A profile signature comes before the built-ins; a role that exits
	// with nothing recognisable is engine-exit with its last lines.
	disk, err := failure.NewSignature("disk-full", `No space left on device`, "c.yaml:9")
	require.NoError(t, err)
	b.cfg.Signatures = failure.Builtin().With(disk)
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("OSError: [Errno 28] No space left on device: '/tmp/x'\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	f, _ = failure.Of(err)
	assert.Equal(t, failure.Class("disk-full"), f.Class)
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("serving\nshutting down\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	require.ErrorIs(t, err, cluster.ErrAllocationLost)
	f, _ = failure.Of(err)
	assert.Equal(t, failure.Failure{Class: failure.EngineExit, Excerpt: "gb200-03_decode_w0: serving | shutting down"}, f)

	// Hardware evidence names the node it happened on: the kernel's Xid as
	// syslog forwards it, NCCL's host prefix. Only the allocation's nodes
	// count, as whole names.
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("Load weight begin.\nDec  5 03:12:01 gb200-02 kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus.\nRuntimeError: CUDA error: unspecified launch failure\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	require.ErrorIs(t, err, cluster.ErrAllocationLost)
	f, _ = failure.Of(err)
	assert.Equal(t, failure.GPUXid, f.Class)
	assert.Equal(t, []string{"gb200-02"}, f.Nodes)
	require.NoError(t, os.WriteFile(st.Steps[3].Output, []byte("gb200-010:2231:2598 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41287> with status=12\n"), 0o644))
	_, err = b.Health(ctx, alloc, srv)
	f, _ = failure.Of(err)
	assert.Equal(t, failure.NCCL, f.Class)
	assert.Empty(t, f.Nodes, "gb200-010 is not gb200-01")
}

func TestNamedNodes(t *testing.T) {
	nodes := []string{"gb200-01", "gb200-02", "gb200-10"}
	for line, want := range map[string][]string{
		"gb200-02:2231:2598 [0] NCCL WARN NET/IB":                 {"gb200-02"},
		"Dec  5 03:12:01 gb200-10 kernel: NVRM: Xid 79":           {"gb200-10"},
		"node gb200-01 down (not responding), node gb200-02 down": {"gb200-01", "gb200-02"},
		"gb200-010:1:1 NCCL WARN":                                 nil,
		"xgb200-01 NCCL WARN":                                     nil,
		"NVRM: Xid (PCI:0000:1b:00): 79":                          nil,
		"lost gb200-01.":                                          {"gb200-01"},
	} {
		assert.Equal(t, want, namedNodes(line, nodes), line)
	}
}

func errorsIsAny(err error) bool {
	for _, e := range []error{cluster.ErrAllocationLost, cluster.ErrBadConfig, cluster.ErrOOM} {
		if err != nil && strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}
