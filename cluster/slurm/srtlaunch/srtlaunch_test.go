package srtlaunch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

func load(t *testing.T, name string) *config.Recipe {
	t.Helper()
	r, err := config.LoadRecipe("testdata", name)
	require.NoError(t, err)
	return r
}

func render(t *testing.T, name string, nodes int, al float64) []*Process {
	t.Helper()
	rec := load(t, name)
	procs, err := Render(rec, PlaceholderAllocation(rec, nodes), Options{SyntheticAL: al, Paths: PlaceholderPaths("Tiny-1B"), JobID: "7"})
	require.NoError(t, err)
	return procs.Processes
}

func outputs(procs []*Process) []string {
	var out []string
	for _, p := range procs {
		out = append(out, strings.TrimPrefix(p.Output, "{LOG_DIR}/"))
	}
	return out
}

func env(p *Process) map[string]string {
	m := map[string]string{}
	for _, k := range p.EnvKeys() {
		m[k], _ = p.EnvValue(k)
	}
	return m
}

func TestLayouts(t *testing.T) {
	tests := []struct {
		recipe string
		nodes  int
		want   []string
	}{
		{"agg.yaml", 1, []string{"infra.out", "gb200-01_agg_w0.out", "gb200-01_agg_w1.out", "gb200-01_frontend_0.out"}},
		{"1p1d.yaml", 4, []string{"infra.out", "gb200-02_prefill_w0.out", "gb200-03_decode_w0.out", "gb200-04_decode_w0.out",
			"gb200-02_frontend_0.out", "benchmark.out"}},
		{"2p1d.yaml", 3, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-01_prefill_w1.out", "gb200-02_decode_w0.out",
			"gb200-03_decode_w0.out", "gb200-01_nginx.out", "gb200-02_frontend_0.out", "gb200-03_frontend_1.out", "benchmark.out"}},
	}
	for _, tt := range tests {
		t.Run(tt.recipe, func(t *testing.T) {
			assert.Equal(t, tt.want, outputs(render(t, tt.recipe, tt.nodes, 0)))
		})
	}
}

func TestAggPackedWorkers(t *testing.T) {
	procs := render(t, "agg.yaml", 1, 0)
	w0, w1 := procs[1], procs[2]
	assert.Equal(t, "0,1", env(w0)["CUDA_VISIBLE_DEVICES"], "a worker using part of a node sees only its GPUs")
	assert.Equal(t, "2,3", env(w1)["CUDA_VISIBLE_DEVICES"])
	assert.Contains(t, w0.CommandLine(), "--port 6100 --nccl-port 17500 --dump-config-to")
	assert.Contains(t, w1.CommandLine(), "--port 6132 --nccl-port 17501 --dump-config-to", "second leader on a node: next HTTP port")
	assert.NotContains(t, w0.CommandLine(), "--dist-init-addr", "single-node workers have no dist init")
	assert.Equal(t, "gb200-01", env(w0)["WORKER_NODE"])
	assert.Equal(t, "0", env(w0)["WORKER_ID"])
	assert.Equal(t, "{kept} {unknown}", env(w0)["LITERAL"], "format_map: {{ unescapes, unknown fields stay")
	assert.Nil(t, w0.BashPreamble, "dynamo.install false: no install")
	assert.Equal(t, 0, w0.SrunExportEnv.Len())
	fe := procs[3]
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000"}, fe.Command, "one node: a single frontend on the public port")
	assert.Equal(t, "--served-model-name Tiny-1B", w0.Command[5]+" "+w0.Command[6], "default served name: the model directory's name")
}

func TestDisaggDedicatedInfra(t *testing.T) {
	procs := render(t, "1p1d.yaml", 4, 0)
	infra, prefill, d0, d1, fe, bench := procs[0], procs[1], procs[2], procs[3], procs[4], procs[5]
	assert.Equal(t, []string{"gb200-01"}, infra.Nodelist, "dedicated node runs only infra")
	assert.Equal(t, "10.0.0.2", env(prefill)["HEAD_NODE_IP"], "head is the first worker node")
	assert.Equal(t, "http://gb200-01:2379", env(prefill)["ETCD_ENDPOINTS"])
	assert.Equal(t, "nats", env(prefill)["DYN_REQUEST_PLANE"])
	assert.Equal(t, []string{"HEAD_NODE_IP", "ETCD_ENDPOINTS", "NATS_SERVER", "DYN_SYSTEM_PORT", "DYN_REQUEST_PLANE",
		"DYN_SKIP_SGLANG_LOG_FORMATTING", "DYN_LOG", "P", "GLOBAL"}, prefill.EnvKeys())
	assert.Equal(t, []string{"python3", "-m", "dynamo.sglang", "--model-path", "org/Tiny-1B", "--served-model-name", "tiny",
		"--host", "0.0.0.0", "--port", "6100", "--nccl-port", "17500", "--disaggregation-mode", "prefill",
		"--disaggregation-bootstrap-port", "7200", "--dump-config-to", "{LOG_DIR}/gb200-02_config.json", "--request-plane", "nats",
		"--disaggregation-mode", "prefill", "--tp-size", "4"}, prefill.Command, "hf: model id, served name from decode, duplicate flag kept")
	assert.Contains(t, d0.CommandLine(), "--port 6100 --nccl-port 17501 --disaggregation-mode decode --dist-init-addr 10.0.0.3:8300 --nnodes 2 --node-rank 0")
	assert.Contains(t, d1.CommandLine(), "--port 0 --nccl-port 17502 --disaggregation-mode decode --dist-init-addr 10.0.0.3:8300 --nnodes 2 --node-rank 1")
	assert.NotContains(t, prefill.ContainerMounts.Keys, "{MODEL_DIR:Tiny-1B}", "hf models are not mounted")
	assert.Equal(t, []string{"gb200-02"}, fe.Nodelist, "multiple frontends off: one on the head")
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000", "--router-mode", "kv"}, fe.Command)
	assert.Equal(t, []string{"gb200-02"}, bench.Nodelist)
	assert.Equal(t, []string{"SRT_PREFILL_IPS", "SRT_PREFILL_ENDPOINTS", "SRT_DECODE_IPS", "SRT_DECODE_ENDPOINTS", "SRTCTL_FRONTEND_TYPE",
		"SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "GLOBAL", "AIPERF_SERVER_METRICS_URLS", "CONC"}, bench.EnvKeys())
	assert.Equal(t, "http://10.0.0.2:7500/metrics,http://10.0.0.3:7501/metrics", env(bench)["AIPERF_SERVER_METRICS_URLS"], "leaders only")
	assert.Contains(t, *prefill.BashPreamble, "ai-dynamo==0.9.1", "dynamo.version: pip install")
	assert.Equal(t, "srun --jobid 7 --overlap --nodes 1", strings.Join(prefill.Argv[:6], " "))
}

func TestTwoPrefillOneDecodeNginx(t *testing.T) {
	procs := render(t, "2p1d.yaml", 3, 0)
	p0, p1, nginx, fe0 := procs[1], procs[2], procs[5], procs[6]
	assert.Contains(t, p0.CommandLine(), "--port 6100 --nccl-port 17500 --disaggregation-mode prefill --disaggregation-bootstrap-port 7200 ")
	assert.Contains(t, p1.CommandLine(), "--port 6132 --nccl-port 17501 --disaggregation-mode prefill --disaggregation-bootstrap-port 7201 ")
	assert.Equal(t, "ai_dynamo-1.2.0-py3-none-any.whl", env(p0)["DYNAMO_WHEEL_NAME"])
	assert.Equal(t, []string{"mem", "exclusive"}, p0.SrunOptions.Keys)
	assert.Contains(t, p0.Argv, "--mem=0")
	assert.Contains(t, p0.Argv, "--exclusive")
	assert.Contains(t, p0.Argv, "--export=ALL,ENROOT_REMAP_ROOT=yes")
	assert.Equal(t, []string{"container-remap-root"}, nginx.SrunOptions.Keys, "nginx never gets the recipe's srun options")
	assert.Equal(t, "nginx:1.27.4", nginx.ContainerImage)
	assert.Equal(t, "--http-port=8180", fe0.Command[3], "frontends behind nginx use the internal port")
	assert.Equal(t, 0, fe0.SrunOptions.Len(), "frontends do not get the recipe's srun options")
	assert.Equal(t, "pmix", *fe0.MPI)
	assert.Equal(t, "1", env(fe0)["FE"])
	assert.Equal(t, "true", procs[8].Command[2])
}

func TestFlagRendering(t *testing.T) {
	procs := render(t, "flags.yaml", 1, 0)
	w := procs[1]
	i := indexOf(w.Command, "--request-plane")
	require.Positive(t, i)
	assert.Equal(t, []string{"--kv-events-config", `{"publisher": "zmq", "topic": "kv-events", "endpoint": "tcp://*:5200"}`}, w.Command[i-2:i])
	assert.Equal(t, []string{
		"--request-plane", "tcp",
		"--big", "1.5e+20",
		"--cuda-graph-bs", "1", "2", "4",
		"--json-override", `{'a': 1, 'b': "it's"}`,
		"--mem-fraction-static", "0.85",
		"--mixed", "True", "0.5", "x",
		"--octal", "8",
		"--port", "9999",
		"--quoted", "yes",
		"--small", "1e-05",
		"--whole", "2.0",
		"--yes-word",
		"--zeta-flag",
	}, w.Command[i:])
	assert.Equal(t, "tiny-served", w.Command[6])
	fe := procs[len(procs)-1]
	assert.Equal(t, []string{"python3", "-m", "dynamo.frontend", "--http-port=8000", "--router-mode", "kv", "--verbose", "--literal", "None"}, fe.Command)
}

func TestSyntheticAcceptance(t *testing.T) {
	eval := render(t, "1p1d.yaml", 4, 0)
	perf := render(t, "1p1d.yaml", 4, 3.77)
	for _, i := range []int{1, 2, 3} {
		assert.NotContains(t, env(eval[i]), "SGLANG_SIMULATE_ACC_LEN")
		keys := perf[i].EnvKeys()
		assert.Equal(t, []string{"SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"}, keys[7:10],
			"injected first in the worker block, after srt-slurm's base env")
		assert.Equal(t, "3.77", env(perf[i])["SGLANG_SIMULATE_ACC_LEN"])
		assert.Equal(t, "match-expected", env(perf[i])["SGLANG_SIMULATE_ACC_METHOD"])
		assert.Equal(t, "real-draft-token", env(perf[i])["SGLANG_SIMULATE_ACC_TOKEN_MODE"])
	}
	assert.NotContains(t, env(perf[4]), "SGLANG_SIMULATE_ACC_LEN", "frontends are untouched")
	// A mode without an environment block gets nothing, as InferenceX rewrites blocks.
	two := render(t, "2p1d.yaml", 3, 2.5)
	assert.Equal(t, "2.5", env(two[1])["SGLANG_SIMULATE_ACC_LEN"])
	assert.NotContains(t, env(two[3]), "SGLANG_SIMULATE_ACC_LEN")
}

func TestErrors(t *testing.T) {
	recipe := func(y string) *config.Recipe {
		r, err := config.ParseRecipe("x.yaml", []byte(y), "")
		require.NoError(t, err)
		return r
	}
	base := "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}\n"
	tests := []struct {
		name   string
		recipe *config.Recipe
		nodes  int
		opt    Options
		want   string
	}{
		{"too few nodes", recipe(base + "backend: {type: sglang}\n"), 1, Options{}, "needs 2 nodes, the allocation has 1"},
		{"other backend", recipe(base + "backend: {type: mocker}\n"), 2, Options{}, `engine "mocker" is not supported by the engine launcher yet (sglang, trtllm, vllm)`},
		{"other frontend", recipe(base + "backend: {type: sglang}\nfrontend: {type: trtllm_serve}\n"), 2, Options{}, `frontend.type "trtllm_serve" is not supported`},
		{"vllm frontend on sglang", recipe(base + "backend: {type: sglang}\nfrontend: {type: vllm}\n"), 2, Options{}, "frontend.type: vllm requires the vllm engine"},
		{"custom without command", recipe(base + "backend: {type: sglang}\nbenchmark: {type: custom}\n"), 2, Options{}, "benchmark.command is required"},
		{"AL already set", recipe(base + "backend: {type: sglang, aggregated_environment: {SGLANG_SIMULATE_ACC_LEN: '2'}}\n"), 2,
			Options{SyntheticAL: 3}, "already sets SGLANG_SIMULATE_ACC_LEN"},
		{"negative AL", recipe(base + "backend: {type: sglang}\n"), 2, Options{SyntheticAL: -1}, "must be a positive number"},
		{"unsupported feature", recipe(base + "backend: {type: sglang}\nprofiling: {enabled: true}\n"), 2, Options{}, "profiling.enabled is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opt.Paths.LogDir == "" {
				tt.opt.Paths = PlaceholderPaths("M")
			}
			_, err := Render(tt.recipe, PlaceholderAllocation(tt.recipe, tt.nodes), tt.opt)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "\n", "one-line errors")
		})
	}
	_, err := config.ParseRecipe("x.yaml", []byte("model: {path: /m, container: i}\nresources: {agg_nodes: 1}\n"), "")
	require.Error(t, err, "a recipe without a name is refused by the loader")
	// srt-slurm's backend section defaults to SGLang.
	procs, err := Render(recipe(base), PlaceholderAllocation(recipe(base), 2), Options{Paths: PlaceholderPaths("M")})
	require.NoError(t, err)
	assert.Equal(t, []string{"python3", "-m", "dynamo.sglang"}, procs.Processes[1].Command[:3], "a recipe without backend runs SGLang")
}

func TestPythonFormatting(t *testing.T) {
	quotes := map[string]string{"": "''", "abc-1.2/x:y,z@%+=_": "abc-1.2/x:y,z@%+=_", "a b": "'a b'", "it's": `'it'"'"'s'`,
		"{LOG_DIR}/x": "{LOG_DIR}/x", "{MODEL_DIR:M-1}": "{MODEL_DIR:M-1}", "{node}": "'{node}'"}
	for in, want := range quotes {
		assert.Equal(t, want, shQuote(in), "%q", in)
	}
}

func TestPlaceholderPathsAndMounts(t *testing.T) {
	procs := render(t, "agg.yaml", 1, 0)
	assert.Equal(t, []string{"{LOG_DIR}", "{MODEL_DIR:Tiny-1B}", "{SRT_ROOT}/configs", "{SRT_ROOT}/src/srtctl/runtime_scripts",
		"{SRT_ROOT}/src/srtctl/benchmarks/scripts", "{INFMAX_WORKSPACE}"}, procs[1].ContainerMounts.Keys)
	assert.Equal(t, "/host-tmp", procs[0].ContainerMounts.Str("/tmp"))
	assert.Equal(t, filepath.Join("{SRT_ROOT}", "src/srtctl/cli/setup_head.py"), procs[0].ContainerMounts.Keys[6])
}

// envSrtSlurmSrc names an srt-slurm checkout (v1.0.68) whose recipes/ tree
// TestSrtSlurmGB200RecipesRender renders (not reference data CI has).
const envSrtSlurmSrc = "SWEEPFLOW_SRT_SLURM_SRC"

var (
	modelDirRe = regexp.MustCompile(`\{MODEL_DIR:[^}]*\}`)
	// srt-slurm draws TRTLLM_EPLB_SHM_NAME from uuid4 per worker; ours is a
	// deterministic value of the same shape (eplbShmName), so both sides
	// are normalised.
	eplbRe = regexp.MustCompile(`moe_shared_[0-9a-f]{32}`)
)

func normRef(v any) any {
	switch x := v.(type) {
	case string:
		return eplbRe.ReplaceAllString(modelDirRe.ReplaceAllString(x, "{MODEL_DIR}"), "moe_shared_X")
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normRef(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[normRef(k).(string)] = normRef(e)
		}
		return out
	}
	return v
}

// fleetRows is compare.py's view of a process list: the log file name and
// the compared fields, normalised, empty values as nil. env_to_set and the
// mounts keep their order (compared as ordered pairs).
func fleetRows(t *testing.T, raw []json.RawMessage) []map[string]any {
	var out []map[string]any
	for _, r := range raw {
		var p map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r, &p))
		var output string
		_ = json.Unmarshal(p["output"], &output)
		row := map[string]any{"name": filepath.Base(output)}
		for _, f := range []string{"nodelist", "command", "env_to_set", "container_mounts", "srun_options", "mpi"} {
			var v any
			if len(p[f]) > 0 {
				require.NoError(t, json.Unmarshal(p[f], &v))
			}
			if f == "env_to_set" || f == "container_mounts" || f == "srun_options" {
				v = orderedPairs(t, p[f])
			}
			v = normRef(v)
			switch x := v.(type) {
			case []any:
				if len(x) == 0 {
					v = nil
				}
			case map[string]any:
				if len(x) == 0 {
					v = nil
				}
			}
			row[f] = v
		}
		out = append(out, row)
	}
	return out
}

// orderedPairs reads a JSON object as [k, v, k, v, ...] so that order counts.
func orderedPairs(t *testing.T, raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	c := canon(t, raw)
	var keys []string
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	dec := json.NewDecoder(strings.NewReader(c))
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip any
		_ = dec.Decode(&skip)
	}
	out := []any{}
	for _, k := range keys {
		out = append(out, k, m[k])
	}
	return out
}

// fleetCompare is compare.py: the first difference, or "".
func fleetCompare(t *testing.T, want, got []byte) string {
	type doc struct {
		Processes []json.RawMessage `json:"processes"`
		Files     map[string]string `json:"files"`
	}
	var w, g doc
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	wr, gr := fleetRows(t, w.Processes), fleetRows(t, g.Processes)
	if len(wr) != len(gr) {
		var names, ours []string
		for _, r := range wr {
			names = append(names, r["name"].(string))
		}
		for _, r := range gr {
			ours = append(ours, r["name"].(string))
		}
		return fmt.Sprintf("%d processes, srt-slurm launches %d: %v; ours %v", len(gr), len(wr), names, ours)
	}
	for i := range wr {
		for _, k := range []string{"name", "nodelist", "command", "env_to_set", "container_mounts", "srun_options", "mpi"} {
			if !reflect.DeepEqual(wr[i][k], gr[i][k]) {
				return fmt.Sprintf("%s: %s: srt-slurm %.300v vs ours %.300v", wr[i]["name"], k, wr[i][k], gr[i][k])
			}
		}
	}
	for name, body := range w.Files {
		ours, ok := g.Files[name]
		if !ok {
			return "file " + name + ": srt-slurm writes it, ours does not"
		}
		a := strings.Split(strings.TrimSpace(normRef(body).(string)), "\n")
		b := strings.Split(strings.TrimSpace(normRef(ours).(string)), "\n")
		for i := 0; i < max(len(a), len(b)); i++ {
			if i >= len(a) || i >= len(b) || a[i] != b[i] {
				at := func(xs []string) string {
					if i < len(xs) {
						return xs[i]
					}
					return "<end>"
				}
				return fmt.Sprintf("file %s line %d: srt-slurm %q vs ours %q", name, i+1, at(a), at(b))
			}
		}
	}
	return ""
}

// placeholderModelName names {MODEL_DIR:...} for a recipe as the fleet
// references do: the directory's base name, or srt-slurm's alias as is.
func placeholderModelName(r *config.Recipe) string {
	return filepath.Base(strings.TrimPrefix(r.Model.Path, "hf:"))
}

// TestFleetReferences renders srt-slurm's own GB200 recipes
// (SWEEPFLOW_SRT_SLURM/rendered-fleet) and compares processes and files the
// way compare.py does (bash_preamble is not compared; {MODEL_DIR:x} equal
// whatever x; moe_shared_<hex> normalised). Each recipe's schema-2
// conversion (<name>.recipe.v2.yaml, srt-slurm 2.x's `srtctl migrate`) must
// render what its schema-1 original records.
func TestFleetReferences(t *testing.T) {
	compareRenderedDir(t, "rendered-fleet", placeholderModelName)
}

// ixModelDirs are the model directories rendered-ix's README maps
// InferenceX's aliases to (as InferenceX's launchers map them); any other
// alias names a directory of its own base name.
var ixModelDirs = map[string]string{
	"deepseek-v4-pro":             "DeepSeek-V4-Pro",
	"deepseek-ai/DeepSeek-V4-Pro": "DeepSeek-V4-Pro",
	"glm-5.2-fp4":                 "GLM-5.2-NVFP4",
}

// TestInferenceXReferences renders InferenceX's GB200 and GB300 recipes as
// srt-slurm v1.0.68 rendered them (SWEEPFLOW_SRT_SLURM/rendered-ix), each on
// nodes named by the recipe's platform, and compares them as compare.py does.
func TestInferenceXReferences(t *testing.T) {
	compareRenderedDir(t, "rendered-ix", func(r *config.Recipe) string {
		if d, ok := ixModelDirs[r.Model.Path]; ok {
			return d
		}
		return placeholderModelName(r)
	})
}

// compareRenderedDir renders every <case>.recipe.yaml of the reference
// directory sub, and its schema-2 conversion <case>.recipe.v2.yaml where
// there is one, on the smallest allocation it needs and compares it with
// <case>.json; a refusal counts apart from a wrong render, both fail.
func compareRenderedDir(t *testing.T, sub string, modelName func(*config.Recipe) string) {
	dir := filepath.Join(reftest.SrtSlurm(t, sub), sub)
	cases, err := filepath.Glob(filepath.Join(dir, "*.recipe.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	ok, refused, v2s := 0, 0, 0
	for _, f := range cases {
		name := strings.TrimSuffix(filepath.Base(f), ".recipe.yaml")
		files := []string{filepath.Base(f)}
		if _, err := os.Stat(filepath.Join(dir, name+".recipe.v2.yaml")); err == nil {
			files = append(files, name+".recipe.v2.yaml")
			v2s++
		}
		for _, file := range files {
			t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(dir, name+".json"))
				require.NoError(t, err)
				r, err := config.LoadRecipe(dir, file)
				require.NoError(t, err)
				require.Equal(t, strings.HasSuffix(file, ".v2.yaml"), r.Schema == config.SchemaV2, "the file's spelling")
				fp, err := r.Footprint(0)
				require.NoError(t, err)
				got, err := Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(modelName(r)), JobID: "4242"})
				if err != nil && strings.Contains(err.Error(), "not supported by the engine launcher") {
					refused++ // srt-slurm launches it, so a refusal is a gap, counted apart from wrong renders
				}
				require.NoError(t, err)
				b, err := json.Marshal(got)
				require.NoError(t, err)
				if d := fleetCompare(t, want, b); d != "" {
					t.Fatal(d)
				}
				ok++
			})
		}
	}
	t.Logf("%s: %d of %d renders compare ok (%d schema-1 recipes, %d schema-2 conversions), %d refused as not supported",
		sub, ok, len(cases)+v2s, len(cases), v2s, refused)
}

// TestSrtSlurmGB200RecipesRender renders every GB200 recipe of the srt-slurm
// checkout in SWEEPFLOW_SRT_SLURM_SRC (recipes/ with gb200 in the path) on
// the allocation it needs: each renders, or is refused with a one-line
// "not supported" naming the feature; anything else fails.
func TestSrtSlurmGB200RecipesRender(t *testing.T) {
	src := os.Getenv(envSrtSlurmSrc)
	if src == "" {
		t.Skipf("set %s to an srt-slurm checkout with recipes/", envSrtSlurmSrc)
	}
	root := filepath.Join(src, "recipes")
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(strings.ToLower(p), "gb200") && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	// An override-format recipe is one recipe per variant (what srtctl
	// apply submits; its base alone when it has none).
	var refs []string
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		variants, err := config.RecipeVariants(rel, data)
		switch {
		case err != nil || variants == nil:
			refs = append(refs, rel) // not an override file (or a broken one: reported below)
		case len(variants) == 0:
			refs = append(refs, rel+":base")
		}
		for _, v := range variants {
			refs = append(refs, rel+":"+v)
		}
	}
	ok := 0
	refused := map[string]int{}
	for _, rel := range refs {
		r, err := config.LoadRecipe(root, rel)
		if err == nil {
			var fp config.Footprint
			if fp, err = r.Footprint(0); err == nil {
				_, err = Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(placeholderModelName(r)), JobID: "4242"})
			}
		}
		switch {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "not supported by the engine launcher"):
			_, why, _ := strings.Cut(err.Error(), ": ")
			refused[why]++
		default:
			t.Errorf("%s: %v", rel, err)
		}
	}
	for why, n := range refused {
		t.Logf("refused %d: %s", n, why)
	}
	t.Logf("%d of %d srt-slurm GB200 recipes render (%d files, override variants expanded)", ok, len(refs), len(files))
}

// referenceAL is the golden AL the perf references were rendered with.
const referenceAL = 3.77

// TestReferenceRenders renders every recipe that srt-slurm's orchestrator
// rendered (SWEEPFLOW_SRT_SLURM/rendered, eval; rendered-perf, after the
// golden-AL rewrite) and compares them field by field. bash_preamble is
// srt-slurm's own script text, which we do not reproduce: it is swapped into
// our `bash -c` payload so everything around it is still compared.
func TestReferenceRenders(t *testing.T) {
	dir := reftest.SrtSlurm(t, "rendered", "rendered-perf")
	recipes := recipeIndex(t)
	n := 0
	for _, sub := range []string{"rendered", "rendered-perf"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "no reference renders in %s", sub)
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			n++
			t.Run(sub+"/"+name, func(t *testing.T) {
				recipe, ok := recipes[name]
				require.True(t, ok, "no recipe %s.yaml under configs/recipes", name)
				opt := Options{Paths: PlaceholderPaths(modelName(t, recipe)), JobID: "4242"}
				if sub == "rendered-perf" {
					opt.SyntheticAL = referenceAL
				}
				fp, err := recipe.Footprint(0)
				require.NoError(t, err)
				got, err := Render(recipe, PlaceholderAllocation(recipe, fp.Nodes), opt)
				require.NoError(t, err)
				compareReference(t, sub+"/"+name+".json", f, got.Processes)
			})
		}
	}
	t.Logf("compared %d reference renders", n)
}

// TestSchema2SeedReferences renders the nine recipes of the seed and
// backends sweeps as srt-slurm 2.x's migration converted them
// (SWEEPFLOW_SRT_SLURM/schema2-seed/*.recipe.v2.yaml): each launches
// exactly what its schema-1 original launches, in eval and in perf mode
// (every process, argv and file), and the six seed recipes what
// srt-slurm's renders record (rendered/, rendered-perf/).
func TestSchema2SeedReferences(t *testing.T) {
	dir := reftest.SrtSlurm(t, "schema2-seed", "rendered", "rendered-perf")
	v2s, err := filepath.Glob(filepath.Join(dir, "schema2-seed", "*.recipe.v2.yaml"))
	require.NoError(t, err)
	require.Len(t, v2s, 9, "the seed's six recipes and the backends sweep's three")
	withRefs := 0
	for _, f := range v2s {
		name := strings.TrimSuffix(filepath.Base(f), ".recipe.v2.yaml")
		t.Run(name, func(t *testing.T) {
			v1, err := config.LoadRecipe(filepath.Dir(f), name+".recipe.yaml")
			require.NoError(t, err)
			v2, err := config.LoadRecipe(filepath.Dir(f), filepath.Base(f))
			require.NoError(t, err)
			require.Equal(t, config.SchemaV2, v2.Schema)
			fp, err := v2.Footprint(0)
			require.NoError(t, err)
			for _, al := range []float64{0, referenceAL} {
				if al > 0 && v2.Engine.Type == "trtllm" {
					continue // no draft model: perf renders as eval
				}
				opt := Options{Paths: PlaceholderPaths(modelName(t, v2)), JobID: "4242", SyntheticAL: al}
				a, err := Render(v1, PlaceholderAllocation(v1, fp.Nodes), opt)
				require.NoError(t, err)
				b, err := Render(v2, PlaceholderAllocation(v2, fp.Nodes), opt)
				require.NoError(t, err)
				ja, err := json.Marshal(a)
				require.NoError(t, err)
				jb, err := json.Marshal(b)
				require.NoError(t, err)
				firstDiff(t, fmt.Sprintf("%s (synthetic AL %g)", name, opt.SyntheticAL), "render of the schema-2 conversion vs its original", string(ja), string(jb))
				sub := "rendered"
				if al > 0 {
					sub = "rendered-perf"
				}
				if ref := filepath.Join(dir, sub, name+".json"); fileExists(ref) {
					compareReference(t, sub+"/"+name+".json (schema 2)", ref, b.Processes)
					withRefs++
				}
			}
		})
	}
	require.Equal(t, 12, withRefs, "the six seed recipes' eval and perf renders")
}

// TestInferenceXSchema2ExamplesRender renders the schema-2 recipes
// InferenceX committed (SWEEPFLOW_INFERENCEX/schema2-examples), every variant
// of its override file included: each renders on the allocation it needs,
// or is refused with one line that names what is not rendered. The two
// DeepSeek-V4-Pro-0813 AgentX recipes render their topologies.
func TestInferenceXSchema2ExamplesRender(t *testing.T) {
	dir := filepath.Join(reftest.InferenceX(t, "schema2-examples"), "schema2-examples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 4)
	rendered := map[string]*Rendered{}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		sels, err := config.RecipeVariants(f, data)
		require.NoError(t, err)
		if sels == nil {
			sels = []string{""}
		}
		for _, sel := range sels {
			ref := filepath.Base(f)
			if sel != "" {
				ref += ":" + sel
			}
			r, err := config.LoadRecipe(dir, ref)
			require.NoError(t, err, ref)
			fp, err := r.Footprint(0)
			require.NoError(t, err)
			got, err := Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(placeholderModelName(r)), JobID: "4242"})
			if err != nil {
				assert.Contains(t, err.Error(), "not supported by the engine launcher yet", "%s:%s", filepath.Base(f), sel)
				assert.NotContains(t, err.Error(), "\n")
				t.Logf("%s:%s refused: %v", filepath.Base(f), sel, err)
				continue
			}
			rendered[r.Name] = got
			n++
		}
	}
	t.Logf("%d of 14 recipes and variants render", n)
	agg, dis := rendered["agg-gb200-tp8-c1-mtp-hicache"], rendered["disagg-gb200-1p1d-dep8-dep16-c64-mtp-kvoffload"]
	require.NotNil(t, agg)
	require.NotNil(t, dis)
	var aggOut, disOut []string
	for _, p := range agg.Processes {
		aggOut = append(aggOut, filepath.Base(p.Output))
	}
	for _, p := range dis.Processes {
		disOut = append(disOut, filepath.Base(p.Output))
	}
	assert.Equal(t, []string{"infra.out", "gb200-01_agg_w0.out", "gb200-02_agg_w0.out", "gb200-01_frontend_0.out", "benchmark.out"}, aggOut,
		"TP8 over two nodes, etcd/NATS and the one frontend on the head")
	assert.Equal(t, []string{"infra.out", "gb200-02_prefill_w0.out", "gb200-03_prefill_w0.out", "gb200-04_decode_w0.out", "gb200-05_decode_w0.out",
		"gb200-06_decode_w0.out", "gb200-07_decode_w0.out", "gb200-02_nginx.out", "gb200-03_frontend_0.out", "gb200-04_frontend_1.out",
		"gb200-05_frontend_2.out", "gb200-06_frontend_3.out", "gb200-07_frontend_4.out", "benchmark.out"}, disOut,
		"etcd/NATS on a node of their own, DEP8 prefill on two nodes, DEP16 decode on four, nginx before five frontends")
	assert.Equal(t, []string{"python3", "/tmp/setup_head.py", "--name", "disagg-gb200-1p1d-dep8-dep16-c64-mtp-kvoffload", "--log-dir", "{LOG_DIR}",
		"--nats-max-payload-mb", "32"}, dis.Processes[0].Command)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// recipeIndex maps recipe base names to the repo's recipes.
func recipeIndex(t *testing.T) map[string]*config.Recipe {
	root := filepath.Join("..", "..", "..", "configs", "recipes")
	out := map[string]*config.Recipe{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".yaml" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		r, err := config.LoadRecipe(root, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = r
		return nil
	})
	require.NoError(t, err)
	return out
}

// modelName resolves the recipe's model alias through the GB200 cluster
// profile, as a real run would, and keeps the directory's base name.
func modelName(t *testing.T, r *config.Recipe) string {
	c, err := config.LoadCluster(filepath.Join("..", "..", "..", "configs", "clusters", "gb200-nvl72.yaml"))
	require.NoError(t, err)
	m, ok := c.Models[r.Model.Path]
	require.True(t, ok, "gb200-nvl72 profile has no model %q", r.Model.Path)
	return filepath.Base(m.Path)
}

func compareReference(t *testing.T, label, file string, got []*Process) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var want []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &want))
	var gotRaw []map[string]json.RawMessage
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &gotRaw))

	for i := 0; i < min(len(want), len(got)); i++ {
		w, g := want[i], gotRaw[i]
		where := fmt.Sprintf("%s process %d (%s)", label, i, canon(t, w["output"]))
		require.Equal(t, sortedKeys(w), sortedKeys(g), "%s: field names differ", where)
		for _, k := range sortedKeys(w) {
			switch k {
			case "bash_preamble":
				continue
			case "argv":
				var wa []string
				require.NoError(t, json.Unmarshal(w[k], &wa))
				ga := got[i].Argv
				require.NotEmpty(t, wa)
				if !got[i].wrap {
					firstDiff(t, where, k, canonJSON(t, wa), canonJSON(t, ga))
					continue
				}
				firstDiff(t, where, "argv (srun options)", canonJSON(t, wa[:len(wa)-1]), canonJSON(t, ga[:len(ga)-1]))
				var pre *string
				require.NoError(t, json.Unmarshal(w["bash_preamble"], &pre))
				firstDiff(t, where, "argv (bash -c payload, their preamble swapped in)", wa[len(wa)-1], got[i].Payload(pre))
			default:
				firstDiff(t, where, k, canon(t, w[k]), canon(t, g[k]))
			}
		}
	}
	if len(want) != len(got) {
		var names []string
		for _, p := range got {
			names = append(names, p.Output)
		}
		t.Fatalf("%s: want %d processes, got %d: %v", label, len(want), len(got), names)
	}
}

// firstDiff fails with the first differing position and its surroundings.
func firstDiff(t *testing.T, where, field, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-60)
	clip := func(s string) string { return s[min(lo, len(s)):min(i+60, len(s))] }
	t.Fatalf("%s: field %s differs at byte %d\n want: …%s…\n  got: …%s…", where, field, i, clip(want), clip(got))
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return ks
}

func canonJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return canon(t, b)
}

// canon re-encodes JSON keeping object key order, so that Python's and Go's
// escaping choices do not matter but order does.
func canon(t *testing.T, raw []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				b.WriteByte('{')
				for first := true; dec.More(); first = false {
					if !first {
						b.WriteByte(',')
					}
					k, err := dec.Token()
					if err != nil {
						return err
					}
					b.WriteString(strconv.Quote(k.(string)) + ":")
					if err := walk(); err != nil {
						return err
					}
				}
				b.WriteByte('}')
			case '[':
				b.WriteByte('[')
				for first := true; dec.More(); first = false {
					if !first {
						b.WriteByte(',')
					}
					if err := walk(); err != nil {
						return err
					}
				}
				b.WriteByte(']')
			}
			_, err := dec.Token() // closing delimiter
			return err
		case string:
			b.WriteString(strconv.Quote(v))
		case nil:
			b.WriteString("null")
		default:
			fmt.Fprint(&b, v)
		}
		return nil
	}
	if err := walk(); err != nil && err != io.EOF {
		t.Fatalf("bad JSON %s: %v", raw, err)
	}
	return b.String()
}

// Expected values follow srt-slurm's frontends/sglang.py and the
// frontend_type == "sglang" branch of backends/sglang.py (v1.0.68).
func TestRenderSGLangRouter(t *testing.T) {
	procs := render(t, "sglang-router.yaml", 2, 0)
	assert.Equal(t, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-01_prefill_w1.out", "gb200-02_decode_w0.out",
		"gb200-01_router_0.out", "benchmark.out"}, outputs(procs))
	r := procs[4]
	assert.Equal(t, []string{"python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
		"--prefill", "http://10.0.0.1:6100", "7200", "--prefill", "http://10.0.0.1:6132", "7201",
		"--decode", "grpc://10.0.0.2:6100", "--host", "0.0.0.0", "--port", "8000", "--policy", "round_robin", "--mini-lb"}, r.Command)
	assert.Equal(t, []string{"R"}, r.EnvKeys(), "only frontend.env")
	assert.Nil(t, r.MPI)
	assert.Equal(t, "bash", r.Argv[len(r.Argv)-3])
	assert.Equal(t, "export R=1 && "+r.CommandLine(), r.Argv[len(r.Argv)-1])

	w := procs[1]
	require.Equal(t, RolePrefill, w.Role)
	assert.Equal(t, []string{"python3", "-m", "sglang.launch_server", "--model-path", "/model", "--served-model-name", "Tiny-1B",
		"--host", "0.0.0.0", "--port", "6100", "--nccl-port", "17500", "--disaggregation-mode", "prefill",
		"--disaggregation-bootstrap-port", "7200", "--tp-size", "2"}, w.Command, "no --dump-config-to, no --request-plane")
	assert.Nil(t, w.BashPreamble, "no dynamo install behind the SGLang router")
	b := procs[5]
	assert.Equal(t, "sglang", env(b)["SRTCTL_FRONTEND_TYPE"])
	// benchmark_stage._get_sa_bench_slow_down_env: decode leaders, times as floats.
	assert.Equal(t, []string{"SRTCTL_FRONTEND_TYPE", "SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "SA_BENCH_SLOW_DOWN_URLS",
		"SA_BENCH_SLOW_DOWN_SLEEP_TIME", "SA_BENCH_SLOW_DOWN_WAIT_TIME"}, b.EnvKeys())
	assert.Equal(t, "http://10.0.0.2:6100", env(b)["SA_BENCH_SLOW_DOWN_URLS"])
	assert.Equal(t, "2.0", env(b)["SA_BENCH_SLOW_DOWN_SLEEP_TIME"])
	assert.Equal(t, "0.5", env(b)["SA_BENCH_SLOW_DOWN_WAIT_TIME"])
}
