package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/treecopy"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim/simrole"
	"github.com/sweepflow/sweepflow/workflows"
)

// seedLaunch is what the launcher records about one bring-up in its
// launch.json: the allocation and acceptance it rendered for.
type seedLaunch struct {
	JobID       string   `json:"job_id"`
	Nodes       []string `json:"nodes"`
	SyntheticAL float64  `json:"synthetic_al"`
	WorkersOnly bool     `json:"workers_only"`
	ReusedFrom  string   `json:"reused_from"`
}

// deploymentCheck is what a sweep's bring-ups show beyond a fresh render:
// the golden AL its perf bring-ups carry (0: none, so only a workers-only
// restart marks the eval bring-up), how a worker received it, and the
// benchmark environment InferenceX sets (besides CONC and MODEL).
type deploymentCheck struct {
	al        float64
	synthetic func(t *testing.T, name string, argv []string, env map[string]string, perf bool)
	benchEnv  map[string]string
	served    string // the model name the workers serve, when not the row's
}

var synthKeys = []string{"SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"}

// seedCheck: the seed's recipes (DSpark, 6 draft tokens, thinking on) get
// golden AL 3.77 as SGLang's three simulate variables in perf mode only.
var seedCheck = deploymentCheck{
	al: 3.77,
	synthetic: func(t *testing.T, name string, _ []string, env map[string]string, perf bool) {
		if perf {
			assert.Equal(t, "3.77", env["SGLANG_SIMULATE_ACC_LEN"], name)
			assert.Equal(t, "match-expected", env["SGLANG_SIMULATE_ACC_METHOD"], name)
			assert.Equal(t, "real-draft-token", env["SGLANG_SIMULATE_ACC_TOKEN_MODE"], name)
			return
		}
		for _, k := range synthKeys {
			assert.NotContains(t, env, k, "%s: eval-mode workers get no synthetic acceptance", name)
		}
	},
	benchEnv: map[string]string{"MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4",
		"KV_OFFLOADING": "dram", "KV_OFFLOAD_BACKEND": "hicache", "IS_MULTINODE": "true"},
}

// TestSlurmSeedSweep runs the whole seed sweep (8 points) through the real
// launcher on the emulated 18-node partition, with the seed's recipes in
// schema 2 (srt-slurm 2.x's format, written by `starter recipe migrate`'s
// code) and the sweep file unchanged; beside it, the sweep of the two
// DeepSeek-V4-Pro-0813 AgentX points InferenceX keeps as schema-2 recipes
// (configs/sweeps/dsv4-gb200-agentx-schema2.yaml: TP8 agg c1, 1P1D
// DEP8/DEP16 c64 with HiCache and dedicated etcd/NATS), planned with a
// --set override. The seed's schema-1 recipes run in TestSlurm,
// TestSlurmBackends and TestSlurmIXFeatures, and both spellings render the
// same process sets (srtlaunch's reference tests), so this run replaces the
// schema-1 seed run rather than adding one.
//
// The schema-2 seed plans to the identities of the schema-1 seed (one
// deployment whichever way it is spelled). Every process of every bring-up
// is the one srtlaunch.Render gives for that allocation, handed to a
// simulator role: from the roles' own logs it checks that each received its
// rendered argv and env_to_set unchanged (the --set's effect included),
// that perf-mode workers got the golden AL exactly as InferenceX delivers
// it and eval-mode workers none of it, and that perf went through the
// rendered benchmark process with InferenceX's environment. Afterwards no
// job is left in squeue and no role process is left on the machine.
func TestSlurmSeedSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	s := newSlurmIT(t)
	v1 := s.sweep(t, "slurm-seed-v1")
	configs := schema2Configs(t)
	s.profile = filepath.Join(configs, "clusters", "slurm-emu.yaml")
	s.startWorker(0) // reads recipes from the schema-2 tree

	in := s.sweepOf(t, filepath.Join(configs, "sweeps", "dsv4-gb200-agentx.yaml"), "slurm-seed-all")
	require.Len(t, in.Points, 8, "the whole seed sweep")
	for i, p := range in.Points {
		require.Equal(t, v1.Points[i].Identity, p.Identity, "%s: the schema-2 seed is the schema-1 seed's deployment", p.ExpName)
	}
	probe := "environment.SWEEPFLOW_SET_PROBE=schema2"
	ix := s.plan(t, control.Request{SweepFile: filepath.Join(configs, "sweeps", "dsv4-gb200-agentx-schema2.yaml"), ID: "slurm-ix-schema2",
		RecipeSets: []string{probe}})
	require.Len(t, ix.Points, 2)
	s.runToCompletion(t, 15*time.Minute, in, ix)

	deployments, perfBringUps, evalBringUps := checkSweepBringUps(t, s.profile, in, func(point.Spec) deploymentCheck { return seedCheck })
	require.Equal(t, 6, deployments, "the seed sweep has 6 deployments")
	require.GreaterOrEqual(t, perfBringUps, deployments, "one perf bring-up per deployment")
	require.Less(t, perfBringUps, len(in.Points), "points of one deployment share its perf bring-up")
	require.GreaterOrEqual(t, evalBringUps, 1)

	// InferenceX's AgentX recipes draft 7 tokens: golden AL 3.73.
	ixCheck := seedCheck
	ixCheck.al = 3.73
	ixCheck.synthetic = func(t *testing.T, name string, argv []string, env map[string]string, perf bool) {
		assert.Equal(t, "schema2", env["SWEEPFLOW_SET_PROBE"], "%s: the point's --set reached the worker", name)
		if perf {
			assert.Equal(t, "3.73", env["SGLANG_SIMULATE_ACC_LEN"], name)
			return
		}
		assert.NotContains(t, env, "SGLANG_SIMULATE_ACC_LEN", name)
	}
	ixCheck.benchEnv = map[string]string{"MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4",
		"KV_OFFLOADING": "dram", "KV_OFFLOAD_BACKEND": "hicache"}
	deployments, perfBringUps, evalBringUps = checkSweepBringUps(t, s.profile, ix, func(point.Spec) deploymentCheck { return ixCheck })
	require.Equal(t, 2, deployments)
	require.Equal(t, 2, perfBringUps)
	require.Equal(t, 1, evalBringUps, "the c64 point's eval restart")
}

// schema2Configs is a copy of the repository's configs/ whose seed recipes
// are rewritten in schema 2 by sweepflow's migration (config.MigrateRecipe,
// what `starter recipe migrate` writes); its cluster profiles read recipes
// from it.
func schema2Configs(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "configs"))
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), "configs")
	seed := "recipes/sglang/deepseek-v4-0813/gb200/agentic"
	migrated := 0
	require.NoError(t, treecopy.Copy(src, dst, func(rel string, data []byte) ([]byte, error) {
		if path.Dir(rel) != seed {
			return data, nil
		}
		migrated++
		return config.MigrateRecipe(rel, data)
	}))
	require.Equal(t, 6, migrated, "the seed's six recipes")
	return dst
}

// runToCompletion runs whole sweeps side by side on the emulated partition
// and requires every point completed, no job of the sweeps left in squeue
// and no role process left on the machine.
func (s *slurmIT) runToCompletion(t *testing.T, limit time.Duration, ins ...*workflows.SweepInput) {
	t.Helper()
	t0 := time.Now()
	for _, in := range ins {
		s.start(in)
	}
	for _, in := range ins {
		pr := s.wait(in.SweepID, limit-time.Since(t0))
		t.Logf("%s on the emulated partition: %d points in %s", in.Name, len(in.Points), time.Since(t0).Round(time.Second))
		for _, p := range in.Points {
			s.logFailures(t, workflows.PointWorkflowID(in.SweepID, p.PointID))
		}
		require.Equal(t, len(in.Points), pr.Counts[point.StatusCompleted], "%+v", pr)
		s.settled(t, in)
	}
	require.Eventually(t, func() bool { return len(simRoleProcs(t)) == 0 }, 30*time.Second, 500*time.Millisecond,
		"simulator role processes left: %v", simRoleProcs(t))
}

// checkSweepBringUps checks every bring-up of every deployment of a sweep
// that ran on the emulated partition (checkSeedDeployment, with the checks
// dc gives for the point's deployment); it returns the number of
// deployments and of complete perf and eval bring-ups.
func checkSweepBringUps(t *testing.T, profile string, in *workflows.SweepInput, dc func(point.Spec) deploymentCheck) (deployments, perfBringUps, evalBringUps int) {
	t.Helper()
	cl, err := config.LoadCluster(profile)
	require.NoError(t, err)
	// Points of one deployment share one allocation (the holder job of the
	// point that allocated) and its bring-ups; each point's perf ran its own
	// benchmark process in the perf bring-up's directory.
	groups := map[string][]point.Spec{}
	var order []string
	for _, p := range in.Points {
		id, err := point.Parse(p.Identity)
		require.NoError(t, err, p.ExpName)
		if _, ok := groups[id.DeploymentHash]; !ok {
			order = append(order, id.DeploymentHash)
		}
		groups[id.DeploymentHash] = append(groups[id.DeploymentHash], p)
	}
	evals := 0
	for _, dep := range order {
		pts := groups[dep]
		var dirs []string
		for _, p := range pts {
			if p.Eval {
				evals++
			}
			dir := filepath.Join(cl.SharedRoot, "jobs", slurm.JobName("sweepflow", in.SweepID, p.PointID))
			if _, err := os.Stat(dir); err == nil {
				dirs = append(dirs, dir)
			}
		}
		require.NotEmpty(t, dirs, "%s: no holder job directory for the deployment", pts[0].ExpName)
		perf, eval := checkSeedDeployment(t, cl, pts, dirs, dc(pts[0]))
		perfBringUps += perf
		evalBringUps += eval
	}
	t.Logf("bring-ups checked: %d perf, %d eval for %d deployments of %d points (points with eval: %d)",
		perfBringUps, evalBringUps, len(order), len(in.Points), evals)
	return len(order), perfBringUps, evalBringUps
}

// checkSeedDeployment checks every bring-up of one deployment's holder
// jobs (their serve-N directories) against a fresh render, and that each of
// its points ran its own benchmark in a perf bring-up; it returns how many
// complete perf and eval bring-ups it checked.
func checkSeedDeployment(t *testing.T, cl *config.Cluster, pts []point.Spec, jobDirs []string, dc deploymentCheck) (perf, eval int) {
	t.Helper()
	benchDone := map[int]bool{}
	anyEval := false
	for _, p := range pts {
		anyEval = anyEval || p.Eval
	}
	for _, jobDir := range jobDirs {
		modes, perfDirs := checkSeedServes(t, cl, pts[0], jobDir, dc)
		for _, m := range modes {
			if m == "perf" {
				perf++
			} else {
				eval++
			}
		}
		for _, pd := range perfDirs {
			for _, p := range pts {
				if benchDone[p.Conc] {
					continue
				}
				if logs, _ := filepath.Glob(filepath.Join(pd.dir, fmt.Sprintf("benchmark-*-conc%d.out", p.Conc))); len(logs) > 0 {
					checkSeedBenchmark(t, p, pd.dir, pd.procs, dc)
					benchDone[p.Conc] = true
				}
			}
		}
		if len(modes) > 0 && jobDir == jobDirs[len(jobDirs)-1] {
			if anyEval && dc.al > 0 {
				require.Equal(t, "eval", modes[len(modes)-1], "%s: the last bring-up is the eval restart (%v)", pts[0].ExpName, modes)
			} else {
				// Without synthetic acceptance perf and eval run the same
				// processes: the eval uses the perf bring-up, no restart.
				require.NotContains(t, modes, "eval", "%s: no eval", pts[0].ExpName)
			}
		}
	}
	for _, p := range pts {
		require.True(t, benchDone[p.Conc], "%s: perf ran the benchmark process at c%d in a perf bring-up", p.ExpName, p.Conc)
	}
	return perf, eval
}

type perfServe struct {
	dir   string
	procs []*srtlaunch.Process
}

// checkSeedServes checks every bring-up of one holder job (its serve-N
// directories) against a fresh render; it returns the modes of the complete
// bring-ups in order and the perf ones' directories and processes.
func checkSeedServes(t *testing.T, cl *config.Cluster, p point.Spec, jobDir string, dc deploymentCheck) (modes []string, perfDirs []perfServe) {
	t.Helper()
	rec, err := config.LoadRecipe(cl.RecipesRoot, p.RecipePath, p.RecipeSets...)
	require.NoError(t, err)
	model := cl.Models[rec.Model.Path].Path
	require.NotEmpty(t, model, "%s: model %s in the profile", p.ExpName, rec.Model.Path)
	serves, _ := filepath.Glob(filepath.Join(jobDir, "serve-*"))
	require.NotEmpty(t, serves, "%s: no bring-up in %s", p.ExpName, jobDir)
	sort.Slice(serves, func(i, j int) bool { return serveN(serves[i]) < serveN(serves[j]) })
	for _, dir := range serves {
		data, err := os.ReadFile(filepath.Join(dir, "launch.json"))
		require.NoError(t, err)
		var st seedLaunch
		require.NoError(t, json.Unmarshal(data, &st))
		addrs := make([]string, len(st.Nodes))
		for i, n := range st.Nodes {
			k, err := strconv.Atoi(strings.TrimPrefix(n, "gb200-"))
			require.NoError(t, err, n)
			addrs[i] = fmt.Sprintf("10.0.0.%d", k) // the emulation's per-node addresses
		}
		rendered, err := srtlaunch.Render(rec, srtlaunch.Allocation{Nodes: st.Nodes, Addrs: addrs}, srtlaunch.Options{
			SyntheticAL: st.SyntheticAL, JobID: st.JobID,
			Paths: srtlaunch.Paths{LogDir: dir, ModelDir: model, ModelName: filepath.Base(model), Image: rec.Model.Container,
				SrtRoot: cl.SrtRoot, InfmaxWorkspace: cl.InfmaxWorkspace},
		})
		require.NoError(t, err)
		procs := rendered.Processes
		perfMode := st.SyntheticAL > 0 || (dc.al == 0 && !st.WorkersOnly)
		if perfMode {
			require.Equal(t, dc.al, st.SyntheticAL, "%s: perf bring-ups inject the golden AL", p.ExpName)
		}
		// The files the render returns are the files the launch wrote.
		for name, body := range rendered.Files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err, "%s: %s/%s written before launch", p.ExpName, filepath.Base(dir), name)
			require.Equal(t, body, string(got), "%s: %s/%s", p.ExpName, filepath.Base(dir), name)
		}
		complete := true
		for _, proc := range procs {
			if proc.Role == srtlaunch.RoleBenchmark {
				continue
			}
			worker := proc.Role == srtlaunch.RolePrefill || proc.Role == srtlaunch.RoleDecode || proc.Role == srtlaunch.RoleAgg
			argv, env, ok := roleLog(t, proc.Output)
			name := p.ExpName + " " + filepath.Base(dir) + "/" + filepath.Base(proc.Output)
			if st.WorkersOnly && !worker {
				require.False(t, ok, "%s: a workers-only restart keeps infra, nginx and the frontends of %s running", name, st.ReusedFrom)
				continue
			}
			if !ok {
				complete = false // a bring-up retried before this process started
				continue
			}
			if argv == nil {
				continue // header damaged by another task of the step (roleLog says so)
			}
			require.Equal(t, proc.Command, argv, "%s: the role received the rendered argv", name)
			for _, k := range proc.EnvKeys() {
				v, _ := proc.EnvValue(k)
				require.Contains(t, env, k, "%s: env_to_set %s", name, k)
				require.Equal(t, v, env[k], "%s: env_to_set %s", name, k)
			}
			if worker {
				dc.synthetic(t, name, argv, env, perfMode)
			}
		}
		if !complete {
			continue
		}
		if perfMode {
			modes = append(modes, "perf")
			perfDirs = append(perfDirs, perfServe{dir: dir, procs: procs})
		} else {
			modes = append(modes, "eval")
			require.True(t, st.WorkersOnly, "%s: the eval bring-up %s restarts the workers only", p.ExpName, filepath.Base(dir))
		}
	}
	require.Contains(t, modes, "perf", "%s: a complete perf bring-up", p.ExpName)
	return modes, perfDirs
}

// checkSeedBenchmark: perf ran the rendered benchmark process (agentic_srt.sh's
// command, env_to_set unchanged) with InferenceX's benchmark environment.
func checkSeedBenchmark(t *testing.T, p point.Spec, dir string, procs []*srtlaunch.Process, dc deploymentCheck) {
	t.Helper()
	var bench *srtlaunch.Process
	for _, proc := range procs {
		if proc.Role == srtlaunch.RoleBenchmark {
			bench = proc
		}
	}
	require.NotNil(t, bench, "%s: the recipe renders a benchmark process", p.ExpName)
	logs, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("benchmark-*-conc%d.out", p.Conc)))
	require.NotEmpty(t, logs, "%s: perf ran the benchmark process in %s", p.ExpName, dir)
	argv, env, ok := roleLog(t, logs[len(logs)-1])
	require.True(t, ok, "%s: the benchmark role logged its argv and env", p.ExpName)
	if data, err := os.ReadFile(logs[len(logs)-1]); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "Requests:") || strings.HasPrefix(l, "errors:") {
				t.Logf("%s benchmark: %s", p.ExpName, l)
			}
		}
	}
	require.Equal(t, bench.Command, argv, "%s: the benchmark received the rendered argv", p.ExpName)
	for _, k := range bench.EnvKeys() {
		v, _ := bench.EnvValue(k)
		require.Equal(t, v, env[k], "%s: benchmark env_to_set %s", p.ExpName, k)
	}
	assert.Equal(t, strconv.Itoa(p.Conc), env["CONC"], "%s: benchmark CONC", p.ExpName)
	assert.Equal(t, cmp.Or(dc.served, p.Model), env["MODEL"], "%s: benchmark MODEL", p.ExpName)
	for k, v := range dc.benchEnv {
		assert.Equal(t, v, env[k], "%s: benchmark %s", p.ExpName, k)
	}
	for _, k := range []string{"RESULT_FILENAME", "DURATION", "PREFILL_NUM_WORKERS", "PREFILL_TP", "DECODE_NUM_WORKERS", "DECODE_TP"} {
		assert.NotEmpty(t, env[k], "%s: benchmark %s", p.ExpName, k)
	}
}

// roleLog parses a role's two sweepflow-sim-role lines; ok is false when the
// log does not exist (the process never started).
func roleLog(t *testing.T, path string) (argv []string, env map[string]string, ok bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) || len(data) == 0 {
		return nil, nil, false
	}
	require.NoError(t, err)
	argv, env, err = simrole.ParseLog(bytes.NewReader(data))
	if err != nil && strings.Contains(err.Error(), "log line") {
		// A multi-node step's tasks write one output file, each from its own
		// offset, so the second task's output can overwrite the header the
		// first printed (srun --output as srt-slurm renders it). The process
		// ran; its header cannot be checked.
		t.Logf("%s: role header damaged by another task's write, not checked: %v", path, err)
		return nil, nil, true
	}
	require.NoError(t, err, path)
	return argv, env, true
}

func serveN(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "serve-"))
	return n
}

// simRoleProcs lists the processes running `starter sim role`.
func simRoleProcs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "sim" && args[i+1] == "role" {
				out = append(out, e.Name()+": "+strings.Join(args, " "))
				break
			}
		}
	}
	return out
}
