package slurm

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
)

const seedRecipes = "recipes/sglang/deepseek-v4-0813/gb200/agentic/"

func renderSeed(t *testing.T, name string, nodes int, al float64) []*srtlaunch.Process {
	t.Helper()
	rec, err := config.LoadRecipe(filepath.Join("..", "..", "configs"), seedRecipes+name+".yaml")
	require.NoError(t, err)
	procs, err := srtlaunch.Render(rec, srtlaunch.PlaceholderAllocation(rec, nodes), srtlaunch.Options{SyntheticAL: al,
		Paths: srtlaunch.PlaceholderPaths("DeepSeek-V4-Pro-0813"), JobID: "4242"})
	require.NoError(t, err)
	return procs.Processes
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

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
