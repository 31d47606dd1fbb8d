package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"
)

const seedAgg = "../configs/recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c1-dspark6-hicache.yaml"

func TestEngineRender(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, out string)
		wantErr string
	}{
		{"json placeholders", []string{"--recipe", seedAgg, "--nodes", "gb200-[01-02]", "--json", "--reference-placeholders", "--synthetic-acceptance", "3.77"},
			func(t *testing.T, out string) {
				var doc struct {
					Processes []map[string]any  `json:"processes"`
					Files     map[string]string `json:"files"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &doc))
				procs := doc.Processes
				require.Len(t, procs, 6)
				// nginx fronts the frontend on node 2: its config is rendered with the processes.
				require.Contains(t, doc.Files, "nginx.conf")
				assert.Contains(t, doc.Files["nginx.conf"], "server 10.0.0.2:8180;")
				for _, f := range []string{"output", "nodelist", "command", "env_to_set", "container_mounts", "srun_options", "mpi", "argv"} {
					assert.Contains(t, procs[1], f)
				}
				assert.Equal(t, "{LOG_DIR}/gb200-01_agg_w0.out", procs[1]["output"])
				assert.Equal(t, "3.77", procs[1]["env_to_set"].(map[string]any)["SGLANG_SIMULATE_ACC_LEN"])
				assert.Contains(t, procs[1]["container_mounts"], "{MODEL_DIR:DeepSeek-V4-Pro-0813}")
			}, ""},
		{"listing with real paths", []string{"--recipe", seedAgg, "--nodes", "gb200-01,gb200-02", "--cluster", "../configs/clusters/gb200-nvl72.yaml",
			"--addrs", "10.9.0.[1-2]", "--log-dir", "/x/logs"},
			func(t *testing.T, out string) {
				assert.Contains(t, out, "recipe agg-gb200-tp8-c1-dspark6-hicache: 6 processes")
				assert.Contains(t, out, "HEAD_NODE_IP=10.9.0.1")
				assert.Contains(t, out, "--dump-config-to /x/logs/gb200-01_config.json")
				assert.NotContains(t, out, "SGLANG_SIMULATE_ACC_LEN")
				assert.Contains(t, out, "file nginx.conf (written to the log directory before launch):")
			}, ""},
		{"trtllm files", []string{"--recipe", "../cluster/slurm/srtlaunch/testdata/trtllm-disagg.yaml", "--nodes", "gb200-[01-03]", "--json", "--reference-placeholders"},
			func(t *testing.T, out string) {
				var doc struct {
					Processes []map[string]any  `json:"processes"`
					Files     map[string]string `json:"files"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &doc))
				assert.Equal(t, "pmix", doc.Processes[2]["mpi"])
				assert.Contains(t, doc.Files["trtllm_config_decode.yaml"], "tensor_parallel_size: 8\n")
				assert.Contains(t, doc.Files["trtllm_config_prefill.yaml"], "cuda_graph_config: null\n")
				assert.Contains(t, doc.Files, "nginx.conf")
			}, ""},
		{"trtllm spec decode in perf mode", []string{"--recipe", "../cluster/slurm/srtlaunch/testdata/trtllm-disagg.yaml", "--nodes", "gb200-[01-03]",
			"--reference-placeholders", "--synthetic-acceptance", "3.77"}, nil, "InferenceX has no synthetic-acceptance injector for trtllm"},
		{"placeholders on the recipe's own allocation", []string{"--recipe", "../cluster/slurm/srtlaunch/testdata/trtllm-disagg.yaml", "--json", "--reference-placeholders"},
			func(t *testing.T, out string) {
				var doc struct {
					Processes []struct {
						Nodelist []string `json:"nodelist"`
					} `json:"processes"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &doc))
				var nodes []string
				for _, p := range doc.Processes {
					nodes = append(nodes, p.Nodelist...)
				}
				assert.Contains(t, nodes, "gb200-03", "the recipe needs 3 nodes")
				assert.NotContains(t, nodes, "gb200-04")
			}, ""},
		// srtctl's --set: the value typed as YAML, at the dotted path of the
		// file's own spelling; several apply in order.
		{"--set", []string{"--recipe", seedAgg, "--json", "--reference-placeholders",
			"--set", "backend.sglang_config.aggregated.mem-fraction-static=0.8", "--set", "backend.sglang_config.aggregated.page-size=128",
			"--set", "frontend.enable_multiple_frontends=false"},
			func(t *testing.T, out string) {
				var doc struct {
					Processes []struct {
						Output  string   `json:"output"`
						Command []string `json:"command"`
					} `json:"processes"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &doc))
				cmd := strings.Join(doc.Processes[1].Command, " ")
				assert.Contains(t, cmd, "--mem-fraction-static 0.8 ")
				assert.Contains(t, cmd, "--page-size 128 ")
				var outs []string
				for _, p := range doc.Processes {
					outs = append(outs, p.Output)
				}
				assert.Contains(t, outs, "{LOG_DIR}/gb200-01_frontend_0.out", "one frontend on the head")
				assert.NotContains(t, outs, "{LOG_DIR}/gb200-01_nginx.out", "no nginx")
			}, ""},
		{"bad --set", []string{"--recipe", seedAgg, "--reference-placeholders", "--set", "frontend"}, nil, `--set "frontend": want dotted.key=value`},
		{"no nodes without placeholders", []string{"--recipe", seedAgg}, nil, "--recipe and --nodes are required"},
		{"bad hostlist", []string{"--recipe", seedAgg, "--nodes", "gb200-[01-02"}, nil, "--nodes"},
		{"too few nodes", []string{"--recipe", seedAgg, "--nodes", "gb200-01", "--reference-placeholders"}, nil, "needs 2 nodes"},
		{"alias without profile", []string{"--recipe", seedAgg, "--nodes", "gb200-[01-02]"}, nil, "give --model-dir"},
		{"missing recipe", []string{"--nodes", "gb200-01"}, nil, "--recipe and --nodes are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := engineRender(tt.args, &out)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, strings.TrimSpace(out.String()))
		})
	}
}

// TestPlanWarnsOfDuplicateKeys: a key written twice in a recipe is warned of
// once per recipe, naming both lines, whichever points share the recipe.
func TestPlanWarnsOfDuplicateKeys(t *testing.T) {
	r, err := config.ParseRecipe("r.yaml", []byte("name: x\nmodel: {path: /m, container: i}\nresources: {gpus_per_node: 4, agg_nodes: 1}\n"+
		"backend:\n  aggregated_environment:\n    A: \"1\"\n    A: \"2\"\n"), "")
	require.NoError(t, err)
	var out bytes.Buffer
	warnRecipes(&out, &plan.Plan{Points: []plan.Point{{Recipe: r}, {Recipe: r}, {}}})
	assert.Equal(t, "warning: r.yaml:7: backend.aggregated_environment.A: duplicate key (first defined on line 6); "+
		"srt-slurm's YAML loader keeps this later value, so it is the one launched\n", out.String())
}
