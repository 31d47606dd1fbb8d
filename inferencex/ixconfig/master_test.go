package ixconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/internal/fuzzseed"
)

// baseMaster is a small valid master config with one key of each shape.
const baseMaster = `mn-agentic:
  image: img:1
  model: org/model
  model-prefix: mp
  runner: cluster:gb200-nv
  precision: fp4
  framework: dynamo-sglang
  router: { name: dynamo-router, version: "1.0" }
  kv-p2p-transfer: nixl
  multinode: true
  disagg: true
  scenarios:
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - spec-decoding: mtp
        conc-list: [64, 128]
        kv-offloading: dram
        kv-offload-backend: { name: hicache }
        prefill:
          num-worker: 1
          tp: 8
          ep: 8
          dp-attn: true
          additional-settings:
          - "CONFIG_FILE=recipes/x.yaml"
        decode:
          num-worker: 1
          tp: 16
          ep: 16
          dp-attn: true
mn-fixed:
  image: img:1
  model: org/model
  model-prefix: mp
  runner: b200
  precision: fp8
  framework: dynamo-trt
  multinode: true
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - conc-start: 4
        conc-end: 64
        prefill: { num-worker: 1, tp: 4, ep: 4, dp-attn: false }
        decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: false }
sn-fixed:
  image: img:1
  model: org/model
  model-prefix: mp
  runner: b200
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, ep: 1, conc-list: [4, 8] }
`

func TestParseMasterValid(t *testing.T) {
	m, err := ParseMaster("m.yaml", []byte(baseMaster))
	require.NoError(t, err)
	require.Equal(t, []string{"mn-agentic", "mn-fixed", "sn-fixed"}, m.Keys())

	e := m.Entry("mn-agentic")
	require.True(t, e.Multinode)
	require.True(t, e.Disagg)
	require.Equal(t, "dynamo-router", e.Router.Name)
	require.Equal(t, "nixl", *e.KVP2PTransfer)
	s := e.Agentic[0].SearchSpace[0]
	assert.Equal(t, []int{64, 128}, s.ConcList)
	assert.Equal(t, "dram", s.KVOffloading)
	assert.Equal(t, "hicache", s.KVOffloadBackend.Name)
	assert.Equal(t, 16, s.Decode.TP)
	assert.Equal(t, 1, s.Prefill.PP, "pp defaults to 1")
	assert.Equal(t, "0.8", e.Agentic[0].DramUtilizationText)
	v, pos, ok := s.Prefill.Setting("CONFIG_FILE")
	require.True(t, ok)
	assert.Equal(t, "recipes/x.yaml", v)
	assert.Equal(t, strictyaml.Pos{File: "m.yaml", Line: 26}, pos)
	assert.Equal(t, strictyaml.Pos{File: "m.yaml", Line: 16}, s.Pos)
	assert.Equal(t, "mn-agentic.scenarios.agentic-coding[0].search-space[0]", s.Path)

	f := m.Entry("mn-fixed").Fixed[0].SearchSpace[0]
	assert.Equal(t, 4, *f.ConcStart)
	assert.Equal(t, "none", f.SpecDecoding)
	assert.False(t, m.Entry("sn-fixed").Multinode)
}

// TestParseMasterErrors edits the valid config once per case and checks
// the one error it must produce: file, line, field and message.
func TestParseMasterErrors(t *testing.T) {
	cases := []struct {
		name       string
		old, new   string
		line       int
		field, msg string
	}{
		{"conc 0", "conc-list: [64, 128]", "conc-list: [0, 128]", 17,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].conc-list[0]", "must be > 0, got 0"},
		{"unknown top field", "  precision: fp4\n", "  precision: fp4\n  tensor: 1\n", 7,
			"mn-agentic.tensor", "unknown field"},
		{"unknown worker field", "          tp: 16\n", "          tp: 16\n          tpp: 2\n", 30,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].decode.tpp", "unknown field"},
		{"trace-source rejected", "    - dram-utilization: 0.80\n", "    - dram-utilization: 0.80\n      trace-source: x\n", 15,
			"mn-agentic.scenarios.agentic-coding[0].trace-source", "unknown field"},
		{"string for int", "          tp: 8\n", "          tp: \"8\"\n", 22,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].prefill.tp", "expected an integer, got string \"8\""},
		{"missing image", "  image: img:1\n  model: org/model\n  model-prefix: mp\n  runner: cluster", "  model: org/model\n  model-prefix: mp\n  runner: cluster", 2,
			"mn-agentic.image", "required field is missing"},
		{"range and list", "        conc-end: 64\n", "        conc-end: 64\n        conc-list: [8]\n", 47,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0].conc-list", "cannot be combined"},
		{"no conc", "      - conc-start: 4\n        conc-end: 64\n", "      - spec-decoding: none\n", 45,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0].conc-list", "give either a non-empty conc-list"},
		{"start > end", "conc-end: 64", "conc-end: 2", 45,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0].conc-start", "must be <= conc-end"},
		{"bad spec-decoding", "      - spec-decoding: mtp\n", "      - spec-decoding: eagle\n", 16,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].spec-decoding", "expected one of mtp, draft_model, none"},
		{"dram without utilisation", "    - dram-utilization: 0.80\n      search-space:", "    - search-space:", 14,
			"mn-agentic.scenarios.agentic-coding[0].dram-utilization", "required when"},
		{"utilisation above 1", "dram-utilization: 0.80", "dram-utilization: 1.5", 14,
			"mn-agentic.scenarios.agentic-coding[0].dram-utilization", "must be > 0 and <= 1"},
		{"dram without backend", "        kv-offload-backend: { name: hicache }\n", "", 16,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].kv-offload-backend", "required with kv-offloading: dram"},
		{"agentic needs cluster runner", "runner: cluster:gb200-nv", "runner: gb200", 5,
			"mn-agentic.runner", "cluster:<name>"},
		{"router twice", "      - spec-decoding: mtp\n", "      - spec-decoding: mtp\n        router: { name: r, version: \"2\" }\n", 17,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].router", "either at the top level"},
		{"router image version", `version: "1.0"`, `version: "image:foo"`, 8,
			"mn-agentic.router.version", "not an image: reference"},
		{"disagg without p2p", "  kv-p2p-transfer: nixl\n", "", 15,
			"mn-agentic.scenarios.agentic-coding[0].search-space[0].kv-p2p-transfer", "disaggregated configs must name a kv-p2p-transfer"},
		{"dcp does not divide tp", "prefill: { num-worker: 1, tp: 4,", "prefill: { num-worker: 1, tp: 4, dcp-size: 3,", 47,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0].prefill.tp", "must be divisible by 'dcp-size' (3)"},
		{"pp zero", "prefill: { num-worker: 1, tp: 4,", "prefill: { num-worker: 1, pp: 0, tp: 4,", 47,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0].prefill.pp", "must be > 0, got 0"},
		{"hardware on one side", "prefill: { num-worker: 1, tp: 4,", "prefill: { hardware: b200, num-worker: 1, tp: 4,", 45,
			"mn-fixed.scenarios.fixed-seq-len[0].search-space[0]", "hardware must be given on both"},
		{"single-node disagg", "  framework: sglang\n", "  framework: sglang\n  disagg: true\n", 56,
			"sn-fixed.disagg", "cannot be disaggregated"},
		{"single-node p2p", "  framework: sglang\n", "  framework: sglang\n  kv-p2p-transfer: nixl\n", 56,
			"sn-fixed.kv-p2p-transfer", "unknown field"},
		{"single-node needs tp", "{ tp: 8, ep: 1, conc-list: [4, 8] }", "{ ep: 1, conc-list: [4, 8] }", 62,
			"sn-fixed.scenarios.fixed-seq-len[0].search-space[0].tp", "required field is missing"},
		{"empty scenarios", "    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n      - { tp: 8, ep: 1, conc-list: [4, 8] }\n", "    fixed-seq-len: []\n", 58,
			"sn-fixed.scenarios", "at least one scenario type"},
		{"multinode not bool", "  multinode: false\n", "  multinode: maybe\n", 56,
			"sn-fixed.multinode", "expected true or false"},
		{"glob char in key", "sn-fixed:\n", "sn-fixed*:\n", 49,
			"sn-fixed*", "may not contain '*'"},
		{"duplicate key", "  precision: fp4\n", "  precision: fp4\n  precision: fp8\n", 7,
			"mn-agentic.precision", "duplicate key (first defined on line 6)"},
		{"malformed yaml", "  multinode: false\n", "  multinode: [false\n", 56,
			"yaml", "malformed YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, baseMaster, tc.old)
			src := strings.Replace(baseMaster, tc.old, tc.new, 1)
			_, err := ParseMaster("cfg/m.yaml", []byte(src))
			require.Error(t, err)
			var first *strictyaml.Error
			switch e := err.(type) {
			case strictyaml.Errors:
				first = e[0]
			case *strictyaml.Error:
				first = e
			default:
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			assert.Equal(t, "cfg/m.yaml", first.Pos.File)
			assert.Equal(t, tc.line, first.Pos.Line, err.Error())
			assert.Equal(t, tc.field, first.Field, err.Error())
			assert.Contains(t, first.Msg, tc.msg)
			assert.NotContains(t, err.Error(), "\n", "errors render on one line")
		})
	}
}

func TestErrorsCollectsEverything(t *testing.T) {
	src := strings.Replace(baseMaster, "conc-list: [64, 128]", "conc-list: [0, -1]", 1)
	src = strings.Replace(src, "  precision: fp8\n", "  precision: fp8\n  bogus: 1\n", 1)
	_, err := ParseMaster("m.yaml", []byte(src))
	var errs strictyaml.Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 3)
	require.Contains(t, err.Error(), "(and 2 more problems)")
}

func TestLoadMasterMergesFiles(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(a, []byte(baseMaster), 0o644))
	second := strings.ReplaceAll(baseMaster, "mn-agentic:", "other:")
	second = strings.ReplaceAll(second, "mn-fixed:", "other-fixed:")
	second = strings.ReplaceAll(second, "sn-fixed:", "other-sn:")
	require.NoError(t, os.WriteFile(b, []byte(second), 0o644))
	m, err := LoadMaster(a, b)
	require.NoError(t, err)
	require.Equal(t, []string{"mn-agentic", "mn-fixed", "sn-fixed", "other", "other-fixed", "other-sn"}, m.Keys())

	_, err = LoadMaster(a, a)
	require.ErrorContains(t, err, "duplicate config key (already defined at")

	_, err = LoadMaster(filepath.Join(dir, "missing.yaml"))
	require.ErrorContains(t, err, "missing.yaml")
	require.ErrorContains(t, err, "no such file")

	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = LoadMaster(empty)
	require.ErrorContains(t, err, "file is empty")
}

func TestParseRunners(t *testing.T) {
	good := "labels:\n  cluster:gb200-nv: [a, b]\nhardware:\n  cluster:gb200-nv:\n    available-cpu-dram-mib: 860_160\n    gpus-per-node: 4\n"
	r, err := ParseRunners("r.yaml", []byte(good))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Labels["cluster:gb200-nv"])
	require.Equal(t, int64(860160), r.Hardware["cluster:gb200-nv"].AvailableCPUDRAMMiB)
	require.Equal(t, 4, r.Hardware["cluster:gb200-nv"].GPUsPerNode)

	cases := []struct{ name, src, want string }{
		{"no labels", "hardware: {}\n", "r.yaml:1: labels: runner config must define a labels mapping"},
		{"label not list", "labels:\n  x: a\n", "r.yaml:2: labels.x: expected a list"},
		{"empty label", "labels:\n  x: []\n", "r.yaml:2: labels.x: cannot be an empty list"},
		{"non-string runner", "labels:\n  x: [1]\n", "r.yaml:2: labels.x[0]: expected a string, got integer 1"},
		{"extra key", "labels: {x: [a]}\nextra: 1\n", "r.yaml:2: extra: unknown field"},
		{"hardware null", "labels: {x: [a]}\nhardware:\n  x:\n", "r.yaml:3: hardware.x: expected a mapping, got null"},
		{"hardware zero", "labels: {x: [a]}\nhardware:\n  x: {available-cpu-dram-mib: 0, gpus-per-node: 4}\n", "hardware.x.available-cpu-dram-mib: must be > 0"},
		{"hardware extra", "labels: {x: [a]}\nhardware:\n  x: {available-cpu-dram-mib: 1, gpus-per-node: 4, cpus: 2}\n", "hardware.x.cpus: unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRunners("r.yaml", []byte(tc.src))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestAliasBombRejected(t *testing.T) {
	// Each level multiplies by 100: 100^3 search entries would be walked.
	var b strings.Builder
	b.WriteString("k:\n  multinode: true\n  scenarios:\n    fixed-seq-len:\n")
	b.WriteString("    - &f {isl: 1, osl: 1, search-space: [&s {conc-list: &c [" + strings.Repeat("1, ", 99) + "1], prefill: {num-worker: 1, tp: 1, ep: 1, dp-attn: false}, decode: {num-worker: 1, tp: 1, ep: 1, dp-attn: false}}")
	b.WriteString(strings.Repeat(", *s", 99) + "]}\n")
	for i := 0; i < 99; i++ {
		b.WriteString("    - *f\n")
	}
	_, err := ParseMaster("bomb.yaml", []byte(b.String()))
	require.ErrorContains(t, err, "aliases expand to too many nodes")

	// Plain anchors are fine.
	_, err = ParseMaster("ok.yaml", []byte(strings.Replace(baseMaster, "dp-attn: false }\n        decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: false }", "dp-attn: false }\n        decode: &d { num-worker: 1, tp: 8, ep: 8, dp-attn: false }", 1)))
	require.NoError(t, err)
}

// The loaders face hand-edited files; whatever the bytes, they must return
// an error or a value, never panic.

func FuzzLoadMaster(f *testing.F) {
	f.Add([]byte(baseMaster))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte("k:\n  <<: {image: x}\n"))
	f.Add([]byte("k: [1, {a: b}]\n---\nz: 1\n"))
	fuzzseed.Files(f, []string{"../../configs/*.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too: report the input instead of stalling the fuzzer.
		tm := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("slow input %q", data)) })
		defer tm.Stop()
		m, err := ParseMaster("fuzz.yaml", data)
		if err == nil && m == nil {
			t.Fatal("nil master without error")
		}
		if err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
