package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small disaggregated recipe in schema 1 (modelled on srt-slurm v1.0.68's
// GB200 recipes) and the same recipe in schema 2 as srt-slurm 2.x spells it.
const v1Recipe = `name: r
model: {path: dsv4, container: dynamo-sglang, precision: fp4}
resources:
  gpu_type: gb200
  gpus_per_node: 4
  prefill_nodes: 2
  prefill_workers: 1
  gpus_per_prefill: 8
  decode_nodes: 4
  decode_workers: 1
  gpus_per_decode: 16
infra: {etcd_nats_dedicated_node: true, nats_max_payload_mb: 32}
frontend: {type: dynamo, dedicated_node: false, num_additional_frontends: 4, args: {router-mode: kv}}
dynamo: {version: 0.8.1, request_plane: nats}
benchmark:
  type: custom
  command: bash run.sh
  use_chat_template: true
  env: {PORT: "8000"}
backend:
  type: sglang
  prefill_environment: {A: "1", B: "2"}
  decode_environment: {A: "1"}
  kv_events_config: true
  sglang_config:
    prefill: {tp-size: 8, mem-fraction-static: 0.85, disaggregation-mode: prefill}
    decode: {tp-size: 16, speculative-num-draft-tokens: 6}
`

const v2Recipe = `schema: 2
name: r
model: {path: dsv4, container: dynamo-sglang, precision: fp4}
resources: {gpu_type: gb200, gpus_per_node: 4}
services:
  - {name: etcd, type: etcd, placement: {node: dedicated}}
  - {name: nats, type: nats, placement: {node: dedicated}, options: {max_payload_mb: 32}}
frontend: {type: dynamo, placement: {node: head}, num_additional_frontends: 4, args: {router-mode: kv}}
dynamo: {source: {pypi: 0.8.1}, request_plane: nats}
benchmark: {type: custom, command: bash run.sh, env: {PORT: "8000"}}
engine: sglang
roles:
  prefill:
    nodes: 2
    workers: 1
    gpus: 8
    env: {A: "1", B: "2"}
    args: {tp-size: 8, mem-fraction-static: 0.85, disaggregation-mode: prefill}
    kv_events: true
  decode:
    nodes: 4
    workers: 1
    gpus: 16
    env: {A: "1"}
    args: {tp-size: 16, speculative-num-draft-tokens: 6}
    kv_events: true
`

func parse(t *testing.T, src string, sets ...string) *Recipe {
	t.Helper()
	r, err := ParseRecipe("r.yaml", []byte(src), "", sets...)
	require.NoError(t, err)
	return r
}

func TestSchemasResolveToOneRecipe(t *testing.T) {
	a, b := parse(t, v1Recipe), parse(t, v2Recipe)
	assert.Equal(t, SchemaV1, a.Schema)
	assert.Equal(t, SchemaV2, b.Schema)
	require.Empty(t, canonicalDiff(a.Canonical(), b.Canonical()))

	// What both resolve to, defaults included.
	assert.Equal(t, 8, b.Roles.Prefill.GPUs)
	assert.Equal(t, []string{"A", "B"}, b.Roles.Prefill.Env.Keys)
	assert.Equal(t, true, b.Roles.Decode.KVEvents)
	assert.Nil(t, b.Roles.Agg)
	assert.Equal(t, NodeDedicated, b.Services.InfraNode)
	assert.Equal(t, 32, b.Services.NATSMaxPayloadMB)
	assert.Equal(t, DynamoSource{Kind: SourcePyPI, Value: "0.8.1"}, b.Dynamo.Source)
	assert.True(t, b.Frontend.EnableMultipleFrontends, "srt-slurm's default")
	assert.Equal(t, "nginx:1.27.4", b.Frontend.NginxContainer)
	assert.Nil(t, a.Benchmark.fields, "use_chat_template is not read by a custom benchmark")
	assert.Equal(t, 6, b.DraftTokens())
	f, err := b.Footprint(4)
	require.NoError(t, err)
	assert.Equal(t, 7, f.Nodes, "six worker nodes and the dedicated etcd/NATS node")

	// Anything that launches differently resolves differently.
	for _, edit := range [][2]string{
		{"B: \"2\"", "B: \"3\""},
		{"mem-fraction-static: 0.85", "mem-fraction-static: 0.86"},
		{"tp-size: 8,", "tp-size: 8.0,"},
		{"pypi: 0.8.1", "pypi: 0.8.0"},
		{"placement: {node: dedicated}}\n  - {name: nats, type: nats, placement: {node: dedicated}", "placement: {node: infra}}\n  - {name: nats, type: nats, placement: {node: infra}"},
		{"  decode:\n    nodes: 4", "  decode:\n    nodes: 5"},
		{"    kv_events: true\n  decode", "  decode"},
		{"env: {A: \"1\", B: \"2\"}", "env: {B: \"2\", A: \"1\"}"},
	} {
		require.Contains(t, v2Recipe, edit[0])
		c := parse(t, strings.Replace(v2Recipe, edit[0], edit[1], 1))
		assert.NotEqual(t, a.ResolvedDigest(), c.ResolvedDigest(), "%q -> %q", edit[0], edit[1])
	}
	// Spelling alone does not: comments, flow or block style, quoting.
	c := parse(t, "# a comment\n"+strings.Replace(v2Recipe, "router-mode: kv", "\"router-mode\": 'kv'", 1))
	assert.Equal(t, a.ResolvedDigest(), c.ResolvedDigest())
}

func TestSchemaErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown schema", strings.Replace(v2Recipe, "schema: 2", "schema: 3", 1),
			`r.yaml:1: schema: unknown recipe schema "3": sweepflow reads srt-slurm recipe schemas 1 and 2`},
		{"schema-2 field in schema 1", v1Recipe + "roles: {}\n", "roles: is a schema-2 field: add `schema: 2` at the top of the recipe"},
		{"roles and legacy role fields", v2Recipe + "backend: {prefill_environment: {X: y}}\n", "r.yaml:27: backend: schema 2 writes the engine as engine: and roles:"},
		{"roles and resources counts", strings.Replace(v2Recipe, "gpus_per_node: 4}", "gpus_per_node: 4, prefill_nodes: 2}", 1),
			"r.yaml:4: resources.prefill_nodes: roles: cannot be combined with the fields it expands into"},
		{"decode nodes 0", strings.Replace(v2Recipe, "    nodes: 4", "    nodes: 0", 1), "r.yaml:21: roles.decode.nodes: 0 is not accepted; write nodes: colocate"},
		{"colocate without gpus", strings.Replace(strings.Replace(v2Recipe, "    nodes: 4", "    nodes: colocate", 1), "    gpus: 16\n", "", 1),
			"roles.decode.nodes: colocate needs gpus: on both prefill and decode"},
		{"colocated prefill", strings.Replace(v2Recipe, "    nodes: 2", "    nodes: colocate", 1), "r.yaml:14: roles.prefill.nodes: only the decode role can colocate"},
		{"unknown role", v2Recipe + "  router: {nodes: 1}\n", "r.yaml:27: roles.router: unknown field (expected one of: prefill, decode, agg)"},
		{"generic service", strings.Replace(v2Recipe, "frontend:", "  - {name: dbg, command: [sleep, '1']}\nfrontend:", 1),
			"r.yaml:8: services[2].type: srt-slurm 2.x's service type generic is not launched by sweepflow yet"},
		{"service readiness", strings.Replace(v2Recipe, "options: {max_payload_mb: 32}}", "options: {max_payload_mb: 32}, readiness: {port: 4222}}", 1),
			"r.yaml:7: services[1].readiness: srt-slurm 2.x's services[].readiness for nats is not launched by sweepflow yet"},
		{"mooncake store config under sglang", strings.Replace(v2Recipe, "frontend:", "  - {name: mc, type: mooncake-master, options: {store_config: {a: 1}}}\nfrontend:", 1),
			"r.yaml:8: services[2].options.store_config: srt-slurm 2.x's store_config for engine sglang is not launched by sweepflow yet"},
		{"mooncake under trtllm", strings.Replace(strings.Replace(v2Recipe, "engine: sglang", "engine: trtllm", 1), "frontend:", "  - {name: mc, type: mooncake-master}\nfrontend:", 1),
			"r.yaml:8: services[2]: srt-slurm 2.x's mooncake-master with engine trtllm is not launched by sweepflow yet"},
		{"etcd and nats apart", strings.Replace(v2Recipe, "type: nats, placement: {node: dedicated}", "type: nats, placement: {node: infra}", 1),
			"etcd on dedicated and NATS on infra: sweepflow starts both on one node"},
		{"role sidecar", strings.Replace(v2Recipe, "    kv_events: true\n  decode", "    sidecar: true\n  decode", 1),
			"r.yaml:19: roles.prefill.sidecar: srt-slurm 2.x's roles.*.sidecar is not launched by sweepflow yet"},
		{"two dynamo sources", strings.Replace(v2Recipe, "source: {pypi: 0.8.1}", "source: {pypi: 0.8.1, rev: abc}", 1),
			"r.yaml:9: dynamo.source: give exactly one of pypi, wheel and rev, got 2"},
		{"source and version", strings.Replace(v2Recipe, "source: {pypi: 0.8.1}", "source: {pypi: 0.8.1}, version: 0.8.0", 1),
			"r.yaml:9: dynamo.version: cannot be combined with dynamo.source"},
		{"wheel file name", strings.Replace(v2Recipe, "source: {pypi: 0.8.1}", "source: {wheel: x.whl}", 1), "dynamo.wheel: must be a package version"},
		{"legacy sources", strings.Replace(v1Recipe, "version: 0.8.1", "wheel: '1.0', hash: abc", 1), "r.yaml:14: dynamo: give only one of hash, top_of_tree and wheel"},
		{"benchmark field its type does not read", strings.Replace(v2Recipe, "command: bash run.sh", "command: bash run.sh, isl: 1024", 1),
			"r.yaml:10: benchmark.isl: is not read by benchmark type custom (srt-slurm 2.x rejects it)"},
		{"frontend placement clash", strings.Replace(v2Recipe, "placement: {node: head}", "placement: {node: head}, dedicated_node: true", 1),
			"r.yaml:8: frontend.dedicated_node: cannot be combined with frontend.placement"},
		{"engine conflict", strings.Replace(v2Recipe, "    nodes: 2\n", "    nodes: 2\n    engine: vllm\n", 1),
			`roles.prefill.engine: "vllm" conflicts with the engine type "sglang"`},
		{"engine knob of another engine", strings.Replace(v2Recipe, "engine: sglang", "engine: {type: sglang, connector: nixl}", 1),
			"r.yaml:11: engine.connector: unknown field, or one of srt-slurm 2.x's that sweepflow does not launch yet for engine sglang"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecipe("r.yaml", []byte(tc.src), "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, strings.Split(err.Error(), " (and ")[0], "\n", "one line")
		})
	}
}

// TestFrontendNames: schema 1's sglang is the SGLang router; schema 2 says
// sglang-router and keeps sglang for a server without a router.
func TestFrontendNames(t *testing.T) {
	one := parse(t, strings.Replace(v1Recipe, "type: dynamo,", "type: sglang,", 1))
	assert.Equal(t, FrontendSGLangRouter, one.Frontend.Type)
	two := parse(t, strings.Replace(v2Recipe, "type: dynamo,", "type: sglang-router,", 1))
	assert.Equal(t, FrontendSGLangRouter, two.Frontend.Type)
	direct := parse(t, strings.Replace(v2Recipe, "type: dynamo,", "type: sglang,", 1))
	assert.Equal(t, FrontendSGLang, direct.Frontend.Type)
	assert.NotEqual(t, one.ResolvedDigest(), direct.ResolvedDigest())
}

// TestEngineSpellings: engine as a string or a mapping, and vLLM's
// connector default (nixl) against an explicit null (no connector).
func TestEngineSpellings(t *testing.T) {
	vllm := func(engine string) *Recipe {
		src := strings.Replace(v2Recipe, "engine: sglang", engine, 1)
		src = strings.ReplaceAll(src, "    kv_events: true\n", "")
		return parse(t, src)
	}
	s, m := vllm("engine: vllm"), vllm("engine: {type: vllm}")
	assert.Equal(t, s.ResolvedDigest(), m.ResolvedDigest())
	assert.Equal(t, "nixl", s.Engine.Connector)
	none := vllm("engine: {type: vllm, connector: null}")
	assert.Nil(t, none.Engine.Connector)
	assert.NotEqual(t, s.ResolvedDigest(), none.ResolvedDigest())
	legacy := parse(t, strings.Replace(strings.ReplaceAll(v1Recipe, "sglang_config", "vllm_config"), "type: sglang\n", "type: vllm\n  connector: null\n", 1))
	assert.Nil(t, legacy.Engine.Connector)
}

// TestColocateSpellings: decode_nodes: 0 and nodes: colocate are one layout.
func TestColocateSpellings(t *testing.T) {
	one := parse(t, strings.Replace(v1Recipe, "decode_nodes: 4", "decode_nodes: 0", 1))
	two := parse(t, strings.Replace(v2Recipe, "    nodes: 4", "    nodes: colocate", 1))
	assert.True(t, two.Roles.Decode.Colocate)
	assert.Equal(t, one.ResolvedDigest(), two.ResolvedDigest())
}

// TestMooncakeSpellings: backend.mooncake_kv_store is a mooncake-master
// service whose environment every role gets (Mooncake's values win) in the
// resolved recipe; schema 1 keeps it apart for the launch, which injects it
// where srt-slurm v1.0.68 did.
func TestMooncakeSpellings(t *testing.T) {
	one := parse(t, strings.Replace(v1Recipe, "  kv_events_config: true\n",
		"  kv_events_config: true\n  mooncake_kv_store: {container: mc:1, master_extra_args: [--v], env: {B: \"9\", MC: x}}\n", 1))
	two := parse(t, strings.Replace(strings.Replace(strings.Replace(v2Recipe,
		"options: {max_payload_mb: 32}}\n", "options: {max_payload_mb: 32}}\n  - {name: mooncake-master, type: mooncake-master, container: mc:1, args: [--v]}\n", 1),
		"env: {A: \"1\", B: \"2\"}", "env: {A: \"1\", B: \"9\", MC: x}", 1),
		"env: {A: \"1\"}", "env: {A: \"1\", B: \"9\", MC: x}", 1))
	require.Empty(t, canonicalDiff(one.Canonical(), two.Canonical()))
	assert.Equal(t, "mc:1", two.Services.Mooncake.Container)
	assert.Equal(t, "2", one.Roles.Prefill.Env.Str("B"))
	assert.Equal(t, []string{"B", "MC"}, one.Services.Mooncake.Env.Keys)
	assert.Nil(t, two.Services.Mooncake.Env)
}

const variantsRecipe = `schema: 2
base:
  name: v
  model: {path: m, container: c, precision: fp8}
  resources: {gpu_type: b200, gpus_per_node: 8}
  engine: sglang
  roles:
    prefill: {nodes: 1, workers: 1, gpus: 4, args: {tp-size: 4, dp-size: 4}}
    decode: {nodes: 1, workers: 1, args: {tp-size: 8}}
override_wide:
  roles:
    prefill: {nodes: 7, workers: 7, args: {dp-size: null}}
    decode: {nodes: 2, workers: 2}
zip_override_scale:
  name: [s1, s2]
  roles:
    decode: {nodes: [1, 5], workers: [1, 5]}
`

// TestVariantRoles pins the resolved roles of two variants of a schema-2
// override file.
func TestVariantRoles(t *testing.T) {
	wide, err := ParseRecipe("v.yaml", []byte(variantsRecipe), "override_wide")
	require.NoError(t, err)
	assert.Equal(t, "v_wide", wide.Name)
	assert.Equal(t, [3]int{7, 7, 4}, [3]int{wide.Roles.Prefill.Nodes, wide.Roles.Prefill.Workers, wide.Roles.Prefill.GPUs})
	assert.Equal(t, []string{"tp-size"}, wide.Roles.Prefill.Args.Keys, "a null in the override deletes the base's key")
	assert.Equal(t, [2]int{2, 2}, [2]int{wide.Roles.Decode.Nodes, wide.Roles.Decode.Workers})

	s2, err := ParseRecipe("v.yaml", []byte(variantsRecipe), "zip_override_scale[1]")
	require.NoError(t, err)
	assert.Equal(t, "s2", s2.Name)
	assert.Equal(t, [2]int{1, 1}, [2]int{s2.Roles.Prefill.Nodes, s2.Roles.Prefill.Workers})
	assert.Equal(t, [2]int{5, 5}, [2]int{s2.Roles.Decode.Nodes, s2.Roles.Decode.Workers})
	f, err := s2.Footprint(8)
	require.NoError(t, err)
	assert.Equal(t, 6, f.Nodes)
	assert.Equal(t, SchemaV2, s2.Schema, "the schema comes from the file, outside base")

	_, err = ParseRecipe("v.yaml", []byte(variantsRecipe), "zip_override_scale[2]")
	require.ErrorContains(t, err, "index [2] out of range (has 2 variants)")
}

func TestSets(t *testing.T) {
	r := parse(t, v2Recipe, "roles.decode.args.tp-size=8", "benchmark.env.EXTRA=on", "roles.prefill.env={Z: 1}", "slurm.time_limit='2:00:00'")
	v, _ := r.Roles.Decode.Args.Get("tp-size")
	assert.Equal(t, int64(8), v, "typed as YAML reads it")
	assert.Equal(t, true, mustGet(r.Benchmark.Env, "EXTRA"), "on is a YAML 1.1 bool, as PyYAML reads it")
	assert.Equal(t, []string{"Z"}, r.Roles.Prefill.Env.Keys)
	assert.Equal(t, "2:00:00", r.Slurm.TimeLimit)
	assert.NotEqual(t, parse(t, v2Recipe).ResolvedDigest(), r.ResolvedDigest(), "sets are part of what resolves")
	same := parse(t, v2Recipe, "roles.decode.args.tp-size=16")
	assert.Equal(t, parse(t, v2Recipe).ResolvedDigest(), same.ResolvedDigest())

	for set, want := range map[string]string{
		"name.x=1":             `--set name.x: name is string "r", not a mapping`,
		"noequals":             `--set "noequals": want dotted.key=value`,
		"roles..x=1":           "empty key in the dotted path",
		"roles.decode.nodes=0": "roles.decode.nodes: 0 is not accepted",
		"a=[":                  "malformed YAML",
	} {
		_, err := ParseRecipe("r.yaml", []byte(v2Recipe), "", set)
		assert.ErrorContains(t, err, want, set)
	}
}

func mustGet(m *Map, k string) any {
	v, _ := m.Get(k)
	return v
}

// TestMigrate: sweepflow's migration of an override file in schema 1
// resolves, variant by variant, to what the original resolves to.
func TestMigrate(t *testing.T) {
	src := "base:\n" + indent(v1Recipe) + `override_router:
  frontend: {type: sglang}
  infra: null
zip_override_dec:
  resources: {decode_nodes: [2, 4], gpus_per_decode: [8, 16]}
`
	out, err := MigrateRecipe("o.yaml", []byte(src))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), "schema: 2\n"), "%s", out)
	assert.NotContains(t, string(out), "backend:")
	assert.NotContains(t, string(out), "prefill_nodes")
	for _, sel := range []string{"base", "override_router", "zip_override_dec[0]", "zip_override_dec[1]"} {
		a, err := ParseRecipe("o.yaml", []byte(src), sel)
		require.NoError(t, err, sel)
		b, err := ParseRecipe("migrated", out, sel)
		require.NoError(t, err, "%s\n%s", sel, out)
		assert.Empty(t, canonicalDiff(a.Canonical(), b.Canonical()), "%s\n%s", sel, out)
	}
	// A schema-2 file migrates to itself (as resolved).
	again, err := MigrateRecipe("v2.yaml", []byte(v2Recipe))
	require.NoError(t, err)
	assert.Equal(t, parse(t, v2Recipe).ResolvedDigest(), parse(t, string(again)).ResolvedDigest())
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestPlannedRecipe: a worker launches the file a point was planned from as
// long as it resolves the same (a comment, or its schema-2 conversion),
// and refuses one that resolves differently or no longer loads.
func TestPlannedRecipe(t *testing.T) {
	root := t.TempDir()
	write := func(src string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "r.yaml"), []byte(src), 0o644))
	}
	planned := parse(t, v1Recipe).ResolvedDigest()
	for _, tc := range []struct {
		name, src, want string
		digest          string
	}{
		{name: "as planned", src: v1Recipe},
		{name: "a comment added", src: "# note\n" + v1Recipe},
		{name: "converted to schema 2", src: v2Recipe},
		{name: "planned by an older starter (file bytes)", src: v1Recipe, digest: RecipeDigest([]byte(v1Recipe))},
		{name: "edited", src: strings.Replace(v1Recipe, "tp-size: 16", "tp-size: 8", 1), want: "the file changed since planning"},
		{name: "broken", src: v1Recipe + "nope: 1\n", want: "changed since the point was planned and no longer loads"},
		{name: "older point, file edited", src: "# note\n" + v1Recipe, digest: RecipeDigest([]byte(v1Recipe)), want: "the file changed since planning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.src)
			digest := tc.digest
			if digest == "" {
				digest = planned
			}
			r, err := LoadPlannedRecipe(root, "r.yaml", digest)
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "r", r.Name)
		})
	}
	write(v2Recipe)
	require.NoError(t, VerifyPlannedRecipe(root, "r.yaml", parse(t, v2Recipe, "roles.decode.gpus=16").ResolvedDigest(), "roles.decode.gpus=16"))
	require.ErrorContains(t, VerifyPlannedRecipe(root, "r.yaml", planned, "roles.decode.gpus=4"), "the file changed since planning")
}

// TestCanonicalCoversTheTypes fails when a typed field is added without
// deciding whether it is part of the resolved recipe (canonicalParts).
func TestCanonicalCoversTheTypes(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[Recipe](): 35, reflect.TypeFor[Role](): 12, reflect.TypeFor[Engine](): 12, reflect.TypeFor[Services](): 4,
		reflect.TypeFor[MooncakeMaster](): 5, reflect.TypeFor[Frontend](): 13, reflect.TypeFor[Benchmark](): 13,
		reflect.TypeFor[Dynamo](): 5, reflect.TypeFor[DynamoSource](): 3, reflect.TypeFor[Resources](): 7,
		reflect.TypeFor[RecipeModel](): 3, reflect.TypeFor[HealthCheck](): 3, reflect.TypeFor[Slurm](): 3,
		// Read from parts hashed as written (benchmark.fields, telemetry, the sections).
		reflect.TypeFor[SABench](): 16, reflect.TypeFor[MooncakeRouterBench](): 3, reflect.TypeFor[Telemetry](): 10,
		reflect.TypeFor[Section](): 3,
	} {
		assert.Equal(t, n, typ.NumField(), "%s changed: update canonicalParts and this count", typ)
	}
}

// TestMergeKeys: a YAML merge key in an environment or engine args merges
// as PyYAML merges it: merged keys first, the mapping's own keys win, and
// of a list of anchors the earlier wins.
func TestMergeKeys(t *testing.T) {
	src := strings.Replace(v1Recipe, "  prefill_environment: {A: \"1\", B: \"2\"}\n  decode_environment: {A: \"1\"}\n",
		"  prefill_environment: &pe {A: \"1\", B: \"2\"}\n  decode_environment:\n    <<: [{B: \"x\", C: \"3\"}, *pe]\n    A: \"9\"\n", 1)
	r := parse(t, src)
	env := r.Roles.Decode.Env
	assert.Equal(t, []string{"A", "B", "C"}, env.Keys)
	assert.Equal(t, []any{"9", "x", "3"}, []any{env.Vals["A"], env.Vals["B"], env.Vals["C"]})
}

// TestRepoRecipesMigrate: each of the repository's recipes (the seed,
// backends, features and schema-2 AgentX sweeps') migrates to schema 2 and
// resolves to itself (a schema-2 recipe stays what it is).
func TestRepoRecipesMigrate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "recipes", "*", "*", "*", "*", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 14)
	for _, f := range files {
		a := loadFile(t, f)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		out, err := MigrateRecipe(f, data)
		require.NoError(t, err)
		b, err := ParseRecipe("migrated "+f, out, "")
		require.NoError(t, err, "%s", out)
		assert.Empty(t, RecipeDiff(a, b), f)
	}
}
