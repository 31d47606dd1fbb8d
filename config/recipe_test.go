package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/fuzzseed"
)

const disaggRecipe = `name: r
model: {path: alias, container: dynamo-sglang, precision: fp4}
resources:
  gpu_type: gb200
  gpus_per_node: 4
  prefill_nodes: 8
  prefill_workers: 2
  gpus_per_prefill: 16
  decode_nodes: 8
  decode_workers: 1
  gpus_per_decode: 32
infra: {etcd_nats_dedicated_node: false, nats_max_payload_mb: 64}
frontend: {type: dynamo, enable_multiple_frontends: true, num_additional_frontends: 4}
health_check: {max_attempts: 1440, interval_seconds: 10}
slurm: {time_limit: "8:00:00"}
benchmark:
  type: custom
  env: {PORT: "8000", IS_MULTINODE: "true"}
backend:
  type: sglang
  sglang_config:
    prefill: {speculative-algorithm: DSPARK, speculative-num-draft-tokens: 6}
    decode: {speculative-algorithm: DSPARK, speculative-num-draft-tokens: 6}
`

func TestParseRecipe(t *testing.T) {
	r, err := ParseRecipe("r.yaml", []byte(disaggRecipe), "")
	require.NoError(t, err)
	assert.Equal(t, "r", r.Name)
	assert.Equal(t, "alias", r.Model.Path)
	assert.True(t, r.Resources.Disaggregated)
	assert.Equal(t, 4*time.Hour, r.HealthCheck.Timeout())
	assert.Equal(t, "8:00:00", r.Slurm.TimeLimit)
	assert.Equal(t, 6, r.DraftTokens())
	assert.Equal(t, "DSPARK", r.Roles.Decode.Args.Str("speculative-algorithm"))
	assert.Equal(t, "8000", r.Benchmark.Env.Str("PORT"))
	assert.Equal(t, []byte(disaggRecipe), r.Raw, "the document is kept byte for byte")

	_, err = ParseRecipe("r.yaml", []byte(disaggRecipe+"whatever_srt_slurm_adds: {x: 1}\n"), "")
	require.ErrorContains(t, err, "r.yaml:24: whatever_srt_slurm_adds: unknown field (srt-slurm rejects it)")
}

func TestFootprint(t *testing.T) {
	agg := func(extra string) string {
		return "name: a\nmodel: {path: p, container: c}\nresources: {gpus_per_node: 4, agg_nodes: 2, agg_workers: 1, gpus_per_agg: 8}\n" + extra
	}
	disagg := func(res string, extra string) string {
		return "name: d\nmodel: {path: p, container: c}\nresources: {gpus_per_node: 4, " + res + "}\n" + extra
	}
	cases := []struct {
		name                string
		src                 string
		nodes, gpus, pg, dg int
	}{
		{"TP8 agg", agg(""), 2, 8, 8, 0},
		{"1P1D DEP8/DEP16", disagg("prefill_nodes: 2, prefill_workers: 1, gpus_per_prefill: 8, decode_nodes: 4, decode_workers: 1, gpus_per_decode: 16", ""), 6, 24, 8, 16},
		{"1P1D DEP16/DEP32", disagg("prefill_nodes: 4, prefill_workers: 1, gpus_per_prefill: 16, decode_nodes: 8, decode_workers: 1, gpus_per_decode: 32", ""), 12, 48, 16, 32},
		{"2P1D DEP16/DEP32", disagg("prefill_nodes: 8, prefill_workers: 2, gpus_per_prefill: 16, decode_nodes: 8, decode_workers: 1, gpus_per_decode: 32", ""), 16, 64, 32, 32},
		{"GPUs per worker derived", disagg("prefill_nodes: 4, prefill_workers: 2, decode_nodes: 4, decode_workers: 1", ""), 8, 32, 16, 16},
		{"dedicated etcd/NATS", agg("infra: {etcd_nats_dedicated_node: true}\n"), 3, 8, 8, 0},
		// srt-slurm's submit.py: dedicated roles share one reserved node while
		// the benchmark is colocated with the frontend (the default).
		{"dedicated frontend and client, colocated", agg("frontend: {dedicated_node: true}\nbenchmark: {client_dedicated_node: true}\n"), 3, 8, 8, 0},
		{"dedicated etcd/NATS, frontend and client, colocated", agg("infra: {etcd_nats_dedicated_node: true}\nfrontend: {dedicated_node: true}\nbenchmark: {client_dedicated_node: true}\n"), 3, 8, 8, 0},
		{"dedicated frontend and client, apart", agg("frontend: {dedicated_node: true}\nbenchmark: {client_dedicated_node: true, colocate_with_frontend: false}\n"), 4, 8, 8, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRecipe("r.yaml", []byte(tc.src), "")
			require.NoError(t, err)
			f, err := r.Footprint(4)
			require.NoError(t, err)
			assert.Equal(t, tc.nodes, f.Nodes)
			assert.Equal(t, tc.gpus, f.GPUs)
			assert.Equal(t, tc.pg, f.PrefillGPUs)
			assert.Equal(t, tc.dg, f.DecodeGPUs)
		})
	}

	r, err := ParseRecipe("r.yaml", []byte(agg("")), "")
	require.NoError(t, err)
	half, err := r.Footprint(8)
	require.NoError(t, err, "a recipe may use 4 of a node's 8 GPUs, as srt-slurm's --gpus-per-node does")
	full, err := r.Footprint(4)
	require.NoError(t, err)
	assert.Equal(t, full, half, "nodes and GPUs follow the recipe's GPUs per node, not the hardware's")
	_, err = r.Footprint(2)
	require.ErrorContains(t, err, "resources.gpus_per_node: recipe says 4 GPUs per node but the runner hardware has only 2")

	r, err = ParseRecipe("r.yaml", []byte(disagg("prefill_nodes: 1, prefill_workers: 3, decode_nodes: 1, decode_workers: 1", "")), "")
	require.NoError(t, err)
	_, err = r.Footprint(4)
	require.ErrorContains(t, err, "resources.prefill_nodes: 1 nodes x 4 GPUs cannot be split evenly over 3 workers")

	r, err = ParseRecipe("r.yaml", []byte(disagg("prefill_nodes: 1, prefill_workers: 1, gpus_per_prefill: 8, decode_nodes: 1, decode_workers: 1", "")), "")
	require.NoError(t, err)
	_, err = r.Footprint(4)
	require.ErrorContains(t, err, "1 workers x 8 GPUs do not fit on 1 nodes x 4 GPUs")
}

func TestParseRecipeErrors(t *testing.T) {
	cases := []struct{ name, old, new, want string }{
		{"typo in resources", "  prefill_workers: 2\n", "  prefil_workers: 2\n", "r.yaml:7: resources.prefil_workers: unknown field"},
		{"negative nodes", "prefill_nodes: 8", "prefill_nodes: -1", "r.yaml:6: resources.prefill_nodes: must be >= 0, got -1"},
		{"agg and disagg", "  gpu_type: gb200\n", "  gpu_type: gb200\n  agg_nodes: 2\n", "r.yaml:4: resources: give either"},
		{"string nodes", "decode_nodes: 8", "decode_nodes: eight", "resources.decode_nodes: expected an integer, got string \"eight\""},
		{"no resources", "resources:\n", "resourcez:\n", "r.yaml:1: resources: required field is missing"},
		{"bad health", "max_attempts: 1440", "max_attempts: 0", "health_check.max_attempts: must be > 0"},
		{"bad time limit", `time_limit: "8:00:00"`, `time_limit: "soon"`, "slurm.time_limit: expected a Slurm time limit"},
		{"bad infra", "etcd_nats_dedicated_node: false", "etcd_nats_dedicated_node: nope", "infra.etcd_nats_dedicated_node: expected true or false"},
		{"tab indentation", "  gpu_type: gb200\n", "\tgpu_type: gb200\n", "r.yaml:4: yaml: malformed YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, disaggRecipe, tc.old)
			_, err := ParseRecipe("r.yaml", []byte(strings.Replace(disaggRecipe, tc.old, tc.new, 1)), "")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

const overrideRecipe = `base:
  name: base
  model: {path: p, container: c}
  resources: {gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1, decode_nodes: 1, decode_workers: 1}
  backend:
    sglang_config:
      decode: {max-running-requests: 8, speculative-num-draft-tokens: 3}
override_big:
  resources: {decode_nodes: 4}
  backend: {sglang_config: {decode: {max-running-requests: null}}}
zip_override_lat:
  resources:
    decode_nodes: [1, 2, 4]
  backend:
    sglang_config:
      decode: {speculative-num-draft-tokens: [2]}
`

func TestRecipeSelectors(t *testing.T) {
	r, err := ParseRecipe("o.yaml", []byte(overrideRecipe), "zip_override_lat[2]")
	require.NoError(t, err)
	assert.Equal(t, "base_lat_2", r.Name)
	assert.Equal(t, 4, r.Roles.Decode.Nodes)
	assert.Equal(t, 2, r.DraftTokens(), "length-1 lists broadcast")
	assert.Equal(t, []byte(overrideRecipe), r.Raw)

	r, err = ParseRecipe("o.yaml", []byte(overrideRecipe), "override_big")
	require.NoError(t, err)
	assert.Equal(t, "base_big", r.Name)
	assert.Equal(t, 4, r.Roles.Decode.Nodes)
	assert.Equal(t, 1, r.Roles.Prefill.Nodes, "deep merge keeps base keys")
	assert.False(t, r.Roles.Decode.Args.Has("max-running-requests"), "null deletes")

	r, err = ParseRecipe("o.yaml", []byte(overrideRecipe), "base")
	require.NoError(t, err)
	assert.Equal(t, 1, r.Roles.Decode.Nodes)

	for sel, want := range map[string]string{
		"": "o.yaml:1: base: override-format recipe named without a variant: srtctl apply would submit all 4 " +
			"(override_big, zip_override_lat[0], zip_override_lat[1], zip_override_lat[2]), one job each, but a matrix row is one deployment; " +
			"pick one with CONFIG_FILE=FILE:<variant> (FILE:override_<name>, FILE:zip_override_<name>[i] or FILE:base)",
		"zip_override_lat[3]": "index [3] out of range (has 3 variants)",
		"zip_override_x[0]":   "zip group not found",
		"override_small":      "override not found",
		"weird":               "unsupported selector",
	} {
		_, err := ParseRecipe("o.yaml", []byte(overrideRecipe), sel)
		require.ErrorContains(t, err, want, sel)
	}
	_, err = ParseRecipe("r.yaml", []byte(disaggRecipe), "override_x")
	require.ErrorContains(t, err, "has no base/override sections")
}

// TestRecipeWithoutVariant: named without a selector, an override file
// launches what srtctl apply submits for it: its one variant; with none it
// submits nothing, which is refused.
func TestRecipeWithoutVariant(t *testing.T) {
	zipOnly := strings.Replace(overrideRecipe, "override_big:\n  resources: {decode_nodes: 4}\n  backend: {sglang_config: {decode: {max-running-requests: null}}}\n", "", 1)
	one := strings.Replace(zipOnly, "decode_nodes: [1, 2, 4]", "decode_nodes: [2]", 1)
	r, err := ParseRecipe("o.yaml", []byte(one), "")
	require.NoError(t, err)
	assert.Equal(t, "base_lat_0", r.Name, "srtctl's name for the zip group's only variant")
	assert.Equal(t, 2, r.Roles.Decode.Nodes)

	bigOnly := overrideRecipe[:strings.Index(overrideRecipe, "zip_override_lat:")]
	r, err = ParseRecipe("o.yaml", []byte(bigOnly), "")
	require.NoError(t, err)
	assert.Equal(t, "base_big", r.Name)
	assert.Equal(t, 4, r.Roles.Decode.Nodes)

	baseOnly := overrideRecipe[:strings.Index(overrideRecipe, "override_big:")]
	_, err = ParseRecipe("o.yaml", []byte(baseOnly), "")
	require.ErrorContains(t, err, "o.yaml:1: base: override-format recipe with no override_* or zip_override_* variant: srtctl apply would submit nothing")

	_, err = ParseRecipe("o.yaml", []byte(zipOnly), "")
	require.ErrorContains(t, err, "would submit all 3 (zip_override_lat[0], zip_override_lat[1], zip_override_lat[2])")
}

func TestLoadRecipePaths(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "recipes", "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "recipes", "a", "r.yaml"), []byte(disaggRecipe), 0o644))

	r, err := LoadRecipe(root, " recipes/./a/r.yaml ")
	require.NoError(t, err)
	assert.Equal(t, "recipes/a/r.yaml", r.Path)
	assert.Equal(t, filepath.Join(root, "recipes", "a", "r.yaml"), r.File)

	_, err = LoadRecipe(root, "recipes/a/missing.yaml")
	require.ErrorContains(t, err, "recipe recipes/a/missing.yaml not found under recipes root")
	_, err = LoadRecipe(root, "../etc/passwd")
	require.ErrorContains(t, err, "must be relative to the recipes root and stay inside it")
	_, err = LoadRecipe(root, "/etc/passwd")
	require.ErrorContains(t, err, "must be relative")
}

func TestParseSlurmTime(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90": 90 * time.Minute, "6:00:00": 6 * time.Hour, "30:15": 30*time.Minute + 15*time.Second,
		"1-12": 36 * time.Hour, "2-00:30": 48*time.Hour + 30*time.Minute, "1-0:0:5": 24*time.Hour + 5*time.Second, "6h": 6 * time.Hour,
	} {
		got, err := ParseSlurmTime(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "0", "abc", "-1h", "1:2:3:4"} {
		_, err := ParseSlurmTime(bad)
		assert.Error(t, err, bad)
	}
}

// TestRecipePyYAML: srt-slurm reads recipes with PyYAML, so a merge key
// expands and a key written twice launches its last value; the duplicate
// comes back as a warning naming its file, line and field.
func TestRecipePyYAML(t *testing.T) {
	r, err := ParseRecipe("r.yaml", []byte(`name: x
model: {path: /m, container: i}
resources: {gpus_per_node: 4, agg_nodes: 1}
backend:
  type: vllm
  prefill_environment: &env {A: "1"}
  aggregated_environment:
    <<: *env
    B: "2"
  vllm_config:
    aggregated:
      max-num-seqs: 8
      max-num-seqs: 16
`), "")
	require.NoError(t, err)
	require.Len(t, r.Warnings, 1)
	assert.Equal(t, "r.yaml:13: backend.vllm_config.aggregated.max-num-seqs: duplicate key (first defined on line 12); srt-slurm's YAML loader keeps this later value, so it is the one launched",
		r.Warnings[0].Error())
	require.NotNil(t, r.Roles.Agg)
	assert.Equal(t, []string{"A", "B"}, r.Roles.Agg.Env.Keys, "the merged key is in the mapping")
	assert.Equal(t, int64(16), r.Roles.Agg.Args.Vals["max-num-seqs"])
}

// The loaders face hand-edited files; whatever the bytes, they must return
// an error or a value, never panic.

func FuzzParseRecipe(f *testing.F) {
	f.Add([]byte(disaggRecipe), "")
	f.Add([]byte(overrideRecipe), "zip_override_lat[1]")
	f.Add([]byte(overrideRecipe), "override_big")
	fuzzseed.Files(f, []string{"../configs/recipes/sglang/deepseek-v4-0813/gb200/agentic/*.yaml"}, "")
	f.Fuzz(func(t *testing.T, data []byte, selector string) {
		r, err := ParseRecipe("fuzz.yaml", data, selector)
		if err != nil {
			return
		}
		_, _ = r.Footprint(4)
	})
}
