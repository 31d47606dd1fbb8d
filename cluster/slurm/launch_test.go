package slurm

import (
	"context"
	"encoding/json"
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
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

const seedRecipes = "recipes/sglang/deepseek-v4-0813/gb200/agentic/"

func emuEntrypoints(t *testing.T) []config.Entrypoint {
	cl, err := config.LoadCluster(filepath.Join("..", "..", "configs", "clusters", "slurm-emu.yaml"))
	require.NoError(t, err)
	return cl.Emulation.Entrypoints
}

func renderSeed(t *testing.T, name string, nodes int, al float64) []*srtlaunch.Process {
	t.Helper()
	rec, err := config.LoadRecipe(filepath.Join("..", "..", "configs"), seedRecipes+name+".yaml")
	require.NoError(t, err)
	procs, err := srtlaunch.Render(rec, srtlaunch.PlaceholderAllocation(rec, nodes), srtlaunch.Options{SyntheticAL: al,
		Paths: srtlaunch.PlaceholderPaths("DeepSeek-V4-Pro-0813"), JobID: "4242"})
	require.NoError(t, err)
	return procs.Processes
}

func TestRoleFor(t *testing.T) {
	eps := emuEntrypoints(t)
	for _, tc := range []struct {
		name string
		cmd  []string
		role string
	}{
		{"worker", []string{"python3", "-m", "dynamo.sglang", "--model-path", "/model"}, "sglang-worker"},
		{"frontend", []string{"python3", "-m", "dynamo.frontend", "--http-port=8180"}, "dynamo-frontend"},
		{"infra", []string{"python3", "/tmp/setup_head.py", "--name", "x"}, "infra"},
		{"nginx in bash -c", []string{"bash", "-c", "nginx -c /logs/nginx.conf -g 'daemon off;'"}, "nginx"},
		{"nginx after ulimit", []string{"bash", "-c", "ulimit -n 1048576 && nginx -c /logs/nginx.conf -g 'daemon off;'"}, "nginx"},
		{"benchmark in bash -lc", []string{"bash", "-lc", "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}, "benchmark"},
		{"trtllm worker behind numactl and the MPI launcher", strings.Fields("numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model --extra-engine-args /logs/trtllm_config_prefill.yaml"), "trtllm-worker"},
		{"trtllm worker, numactl --membind=", strings.Fields("numactl --membind=0,1 -l trtllm-llmapi-launch python3 -m dynamo.trtllm"), "trtllm-worker"},
		{"trtllm worker without numactl", strings.Fields("trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model"), "trtllm-worker"},
		{"trtllm worker bare", strings.Fields("python3 -m dynamo.trtllm --model-path /model"), "trtllm-worker"},
		{"trtllm in bash -c", []string{"bash", "-c", "numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model"}, "trtllm-worker"},
		{"vllm worker", strings.Fields("python3 -m dynamo.vllm --model /model --data-parallel-size 8"), "vllm-worker"},
		{"sglang server behind the router", strings.Fields("python3 -m sglang.launch_server --model-path /model"), "sglang-worker"},
		{"sglang router", strings.Fields("python -m sglang_router.launch_router --worker-urls http://10.0.0.1:6100 --host 0.0.0.0 --port 8180"), "sglang-router"},
		{"numactl alone is no match", strings.Fields("numactl -m 0,1"), ""},
		{"a launcher word inside a command is no match", strings.Fields("python3 -m other trtllm-llmapi-launch python3 -m dynamo.trtllm"), ""},
		{"prefix of a word is no match", []string{"python3", "-m", "dynamo.sglangx"}, ""},
		{"unknown", []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role, ok := RoleFor(eps, tc.cmd)
			assert.Equal(t, tc.role, role)
			assert.Equal(t, tc.role != "", ok)
		})
	}
	// Every entry point names a role the simulator runs.
	for _, e := range eps {
		assert.Contains(t, simrole.Roles(), e.Role, e.Match)
	}
	// Every process of every seed render maps to a role.
	for _, p := range renderSeed(t, "disagg-gb200-2p1d-dep16-dep32-c1280-dspark6-hicache", 16, 0) {
		_, ok := RoleFor(eps, p.Command)
		assert.True(t, ok, "%s: %s", p.Output, p.CommandLine())
	}
}

func TestSrunArgs(t *testing.T) {
	procs := renderSeed(t, "disagg-gb200-1p1d-dep8-dep16-c64-dspark6-hicache", 6, 3.77)
	t.Run("pyxis: srt-slurm's srun line plus a step name", func(t *testing.T) {
		l := Launch{Runtime: config.RuntimePyxis, SrtRoot: "{SRT_ROOT}"}
		require.NoError(t, l.validate())
		for _, p := range procs {
			s, err := l.newStep(p)
			require.NoError(t, err)
			got := l.srunArgs(s, "4242", "/bin/starter")
			i := indexOf(got, "--job-name")
			require.GreaterOrEqual(t, i, 0)
			assert.Equal(t, stepName(p), got[i+1])
			got = append(append([]string{"srun"}, got[:i]...), got[i+2:]...)
			assert.Equal(t, p.Argv, got, p.Output)
		}
	})
	t.Run("pyxis: a TensorRT-LLM worker's MPI srun spans its nodes with one task per GPU", func(t *testing.T) {
		rec, err := config.LoadRecipe(filepath.Join("srtlaunch", "testdata"), "trtllm-disagg.yaml")
		require.NoError(t, err)
		rendered, err := srtlaunch.Render(rec, srtlaunch.PlaceholderAllocation(rec, 3), srtlaunch.Options{Paths: srtlaunch.PlaceholderPaths("Tiny-1B"), JobID: "4242"})
		require.NoError(t, err)
		l := Launch{Runtime: config.RuntimePyxis, SrtRoot: "{SRT_ROOT}"}
		d := rendered.Processes[2]
		require.Equal(t, srtlaunch.RoleDecode, d.Role)
		s, err := l.newStep(d)
		require.NoError(t, err)
		got := l.srunArgs(s, "4242", "/bin/starter")
		i := indexOf(got, "--job-name")
		require.GreaterOrEqual(t, i, 0)
		got = append(append([]string{"srun"}, got[:i]...), got[i+2:]...)
		assert.Equal(t, d.Argv, got)
		assert.Contains(t, strings.Join(got, " "), "--mpi pmix --oversubscribe --cpu-bind=verbose,none --nodes 2 --ntasks 8 ")
	})
	t.Run("pyxis: containers map to squash files", func(t *testing.T) {
		l := Launch{Runtime: config.RuntimePyxis, SrtRoot: "x", Containers: map[string]string{"{CONTAINER_IMAGE}": "/sq/sglang.sqsh", "nginx:1.27.4": "/sq/nginx.sqsh"}}
		for _, p := range procs {
			s, err := l.newStep(p)
			require.NoError(t, err)
			got := l.srunArgs(s, "4242", "/bin/starter")
			want := "/sq/sglang.sqsh"
			if p.Role == srtlaunch.RoleNginx {
				want = "/sq/nginx.sqsh"
			}
			assert.Equal(t, want, got[indexOf(got, "--container-image")+1], p.Output)
		}
	})
	t.Run("emulated: no container flags, the role gets the rendered argv", func(t *testing.T) {
		l := Launch{Runtime: config.RuntimeNone, SrtRoot: "x", Entrypoints: emuEntrypoints(t)}
		roles := map[srtlaunch.Role]string{srtlaunch.RoleInfra: "infra", srtlaunch.RolePrefill: "sglang-worker", srtlaunch.RoleDecode: "sglang-worker",
			srtlaunch.RoleNginx: "nginx", srtlaunch.RoleFrontend: "dynamo-frontend", srtlaunch.RoleBenchmark: "benchmark"}
		for _, p := range procs {
			s, err := l.newStep(p)
			require.NoError(t, err)
			got := l.srunArgs(s, "77", "/bin/starter")
			assert.Equal(t, []string{"--jobid", "77", "--overlap", "--nodes", "1", "--ntasks", "1", "--nodelist", p.Nodelist[0],
				"--output", p.Output, "--job-name", stepName(p)}, got[:13], p.Output)
			for _, a := range got {
				assert.False(t, strings.HasPrefix(a, "--container") || a == "--mpi", "%s: %s", p.Output, a)
			}
			dash := indexOf(got, "--")
			require.Greater(t, dash, 4)
			assert.Equal(t, []string{"/bin/starter", "sim", "role", roles[p.Role]}, got[dash-4:dash], p.Output)
			assert.Equal(t, p.Command, got[dash+1:], "%s: the role receives the rendered command unchanged", p.Output)
		}
	})
	t.Run("emulated: a step over several nodes runs one role per node", func(t *testing.T) {
		l := Launch{Runtime: config.RuntimeNone, SrtRoot: "x", Entrypoints: emuEntrypoints(t)}
		s := step{Name: stepPrefix + "gb200-03_decode_w0", Nodes: []string{"gb200-03", "gb200-04"}, Output: "/logs/gb200-03_decode_w0.out", MPI: "pmix",
			SimRole: "trtllm-worker", Command: strings.Fields("numactl -m 0,1 trtllm-llmapi-launch python3 -m dynamo.trtllm --model-path /model")}
		got := l.srunArgs(s, "77", "/bin/starter")
		assert.Equal(t, []string{"--jobid", "77", "--overlap", "--nodes", "2", "--ntasks", "2", "--nodelist", "gb200-03,gb200-04"}, got[:9])
		assert.Equal(t, append([]string{"/bin/starter", "sim", "role", "trtllm-worker", "--"}, s.Command...), got[len(got)-len(s.Command)-5:])
	})
	t.Run("emulation without an entry point is a config error", func(t *testing.T) {
		l := Launch{SrtRoot: "x", Entrypoints: []config.Entrypoint{{Match: "nginx", Role: "nginx"}}}
		_, err := l.newStep(procs[1])
		require.ErrorIs(t, err, cluster.ErrBadConfig)
		require.ErrorContains(t, err, "no entry point in the cluster profile matches")
	})
}

func TestStepEnv(t *testing.T) {
	t.Setenv("SWEEPFLOW_SIM_STALE", "x")
	t.Setenv("SLURM_CONF", "/etc/slurm-test.conf")
	procs := renderSeed(t, "disagg-gb200-1p1d-dep8-dep16-c64-dspark6-hicache", 6, 3.77)
	l := Launch{Runtime: config.RuntimeNone, SrtRoot: "x", Entrypoints: emuEntrypoints(t), SimEnv: map[string]string{"SWEEPFLOW_SIM_TIME_SCALE": "0.1"}}
	worker := procs[3] // gb200-03 decode leader
	require.Equal(t, srtlaunch.RoleDecode, worker.Role)
	s, err := l.newStep(worker)
	require.NoError(t, err)
	s.Mounts = append(s.Mounts, kv{"/nvme/%n/models/ckpt", "/model"}) // a node-local model path
	env := l.stepEnv(s, []kv{{"CONC", "64"}})
	var tail []string
	for _, e := range env {
		assert.NotContains(t, e, "SWEEPFLOW_SIM_STALE")
		k, _, _ := strings.Cut(e, "=")
		if _, ok := worker.EnvValue(k); ok {
			tail = append(tail, k)
		}
	}
	assert.Equal(t, worker.EnvKeys(), tail, "env_to_set exported in srt-slurm's order")
	assert.Contains(t, env, "SGLANG_SIMULATE_ACC_LEN=3.77")
	assert.Contains(t, env, "CONC=64")
	assert.Contains(t, env, "SLURM_CONF=/etc/slurm-test.conf", "srun finds the cluster")
	assert.Contains(t, env, "SWEEPFLOW_SIM_TIME_SCALE=0.1")
	var mounts map[string]string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "SWEEPFLOW_SIM_MOUNTS="); ok {
			require.NoError(t, json.Unmarshal([]byte(v), &mounts))
		}
	}
	assert.Equal(t, "{LOG_DIR}", mounts["/logs"])
	assert.Equal(t, "/nvme/gb200-03/models/ckpt", mounts["/model"], "%n is the step's node")

	real := Launch{Runtime: config.RuntimePyxis, SrtRoot: "x"}
	s, err = real.newStep(worker)
	require.NoError(t, err)
	env = real.stepEnv(s, nil)
	for _, e := range env {
		assert.False(t, strings.HasPrefix(e, "SGLANG_SIMULATE_ACC_LEN="), "real engines get env_to_set from the bash -c exports")
	}
	assert.Contains(t, real.srunArgs(s, "1", "x")[len(real.srunArgs(s, "1", "x"))-1], "export SGLANG_SIMULATE_ACC_LEN=3.77")
}

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

// The launcher writes exactly the files the render returns into the log
// directory before it starts anything (rendered == launched).
func TestLaunchWritesRenderedFiles(t *testing.T) {
	rec, err := config.LoadRecipe(filepath.Join("..", "..", "configs"), seedRecipes+"disagg-gb200-1p1d-dep8-dep16-c64-dspark6-hicache.yaml")
	require.NoError(t, err)
	rendered, err := srtlaunch.Render(rec, srtlaunch.PlaceholderAllocation(rec, 6), srtlaunch.Options{
		Paths: srtlaunch.PlaceholderPaths("DeepSeek-V4-Pro-0813"), JobID: "4242"})
	require.NoError(t, err)
	require.Contains(t, rendered.Files, "nginx.conf", "nginx fronts the frontends of a 6-node layout")
	dir := t.TempDir()
	require.NoError(t, writeFiles(dir, rendered.Files))
	for name, body := range rendered.Files {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, body, string(data), name)
	}
	conf := rendered.Files["nginx.conf"]
	for i := 2; i <= 6; i++ {
		assert.Contains(t, conf, fmt.Sprintf("server 10.0.0.%d:8180;", i), "one upstream per frontend")
	}
	assert.NotContains(t, conf, "10.0.0.1:8180", "no frontend on the nginx node")
	assert.Error(t, writeFiles(t.TempDir(), map[string]string{"../x": ""}), "a file name cannot leave the log directory")
}

func TestHostPath(t *testing.T) {
	mounts := []kv{{"/shared/jobs/x/serve-1", "/logs"}, {"/nvme/%n/ckpt", "/model"}, {"/ws", "/infmax-workspace"}}
	p, ok := hostPath(mounts, "/logs/agentic", []string{"gb200-02"})
	assert.True(t, ok)
	assert.Equal(t, "/shared/jobs/x/serve-1/agentic", p)
	p, _ = hostPath(mounts, "/model", []string{"gb200-02"})
	assert.Equal(t, "/nvme/gb200-02/ckpt", p)
	_, ok = hostPath(mounts, "/elsewhere", nil)
	assert.False(t, ok)
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// A recipe behind the SGLang router renders and launches: Health reads the
// router's /workers (a dynamo frontend's /health otherwise), as srt-slurm's
// check_sglang_router_health and check_dynamo_health do.
func TestRenderSGLangRouterAndReadItsWorkers(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("srtlaunch", "testdata"))
	require.NoError(t, err)
	b, err := New(Config{Partition: "p", SharedRoot: dir, NodeLocalRoot: dir, StarterBin: "/bin/true", RecipesRoot: root, Launch: Launch{SrtRoot: "x"}})
	require.NoError(t, err)
	spec := func(name string) cluster.ServeSpec {
		data, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		return cluster.ServeSpec{RecipePath: name, RecipeDigest: config.RecipeDigest(data)}
	}
	alloc := cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02"}, WorkDir: dir}
	_, routed, err := b.render(context.Background(), alloc, spec("sglang-router.yaml"), dir, []string{"10.0.0.1", "10.0.0.2"})
	require.NoError(t, err)
	assert.Equal(t, "sglang", routed.Frontend)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/workers":
			_, _ = w.Write([]byte(`{"workers":[],"stats":{"prefill_count":2,"decode_count":1,"regular_count":0}}`))
		case "/health":
			_, _ = w.Write([]byte(`{"status":"healthy","instances":[{"component":"prefill","endpoint":"generate"}]}`))
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"M","object":"model"}]}`))
		}
	}))
	defer srv.Close()
	p, d, err := frontendWorkers(context.Background(), srv.URL, "sglang")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1}, []int{p, d}, "the router's /workers")
	p, d, err = frontendWorkers(context.Background(), srv.URL, "dynamo")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0}, []int{p, d}, "dynamo's /health")
	p, d, err = frontendWorkers(context.Background(), srv.URL, "vllm")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, []int{p, d}, "vllm serve's /v1/models: its one aggregate worker serves a model")
	_, rendered, err := b.render(context.Background(), cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02", "gb200-03"}, WorkDir: dir},
		spec("trtllm-disagg.yaml"), dir, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	require.NoError(t, err)
	assert.Contains(t, rendered.Files, "trtllm_config_decode.yaml")
}

// A recipe whose model.container the profile binds to the row's image runs
// the point's image, as InferenceX's launchers write dynamo-sglang into
// srtslurm.yaml for each key; other containers, and points without an
// image, keep the profile's entry.
func TestRowImageContainers(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("srtlaunch", "testdata"))
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "sglang-router.yaml"))
	require.NoError(t, err)
	rec, err := config.ParseRecipe("sglang-router.yaml", data, "")
	require.NoError(t, err)
	name := rec.Model.Container
	b, err := New(Config{Partition: "p", SharedRoot: dir, NodeLocalRoot: dir, StarterBin: "/bin/true", RecipesRoot: root,
		Launch: Launch{SrtRoot: "x", Runtime: config.RuntimePyxis, RowImageContainers: []string{name},
			Containers: map[string]string{name: "/sq/profile.sqsh", "lmsysorg/sglang:row": "/sq/row.sqsh"}}})
	require.NoError(t, err)
	alloc := cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02"}, WorkDir: dir}
	images := func(rowImage string) map[string]string {
		_, rendered, err := b.render(context.Background(), alloc,
			cluster.ServeSpec{RecipePath: "sglang-router.yaml", RecipeDigest: config.RecipeDigest(data), Image: rowImage}, dir, []string{"10.0.0.1", "10.0.0.2"})
		require.NoError(t, err)
		out := map[string]string{}
		for _, p := range rendered.Processes {
			s, err := b.cfg.Launch.newStep(p)
			require.NoError(t, err)
			out[string(p.Role)] = s.Image
		}
		return out
	}
	row, none := images("lmsysorg/sglang:row"), images("")
	workers := 0
	for role, img := range none {
		if img == "/sq/profile.sqsh" {
			workers++
			assert.Equal(t, "/sq/row.sqsh", row[role], "%s runs in the recipe's container, so the row's image", role)
		} else {
			assert.Equal(t, img, row[role], "%s has a container of its own", role)
		}
	}
	assert.Positive(t, workers, "without a row image the recipe's container resolves through the profile: %v", none)
}

// TestBringUpSimSettings: a bring-up's SWEEPFLOW_SIM_* settings reach its
// simulator roles only, and its health budget may only be cut.
func TestBringUpSimSettings(t *testing.T) {
	spec := cluster.ServeSpec{Env: map[string]string{"SWEEPFLOW_MODE": "perf", "SWEEPFLOW_SIM_CRASH": "cuda-oom"}}
	assert.Equal(t, []kv{{"SWEEPFLOW_SIM_CRASH", "cuda-oom"}}, simEnv(step{SimRole: "sglang-worker"}, spec))
	assert.Nil(t, simEnv(step{}, spec), "a real engine's step gets none")
	assert.Equal(t, 14400.0, healthBudget(4*time.Hour, cluster.ServeSpec{}))
	assert.Equal(t, 15.0, healthBudget(4*time.Hour, cluster.ServeSpec{HealthBudget: 15 * time.Second}))
	assert.Equal(t, 10.0, healthBudget(10*time.Second, cluster.ServeSpec{HealthBudget: time.Minute}), "never lengthened")
}
