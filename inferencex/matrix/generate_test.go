package matrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

func TestConcRange(t *testing.T) {
	cases := []struct {
		start, end int
		want       []int
	}{
		{4, 64, []int{4, 8, 16, 32, 64}},
		{3, 20, []int{3, 6, 12, 20}},
		{1, 1, []int{1}},
		{5, 6, []int{5, 6}},
		{1 << 61, 1<<62 + 1, []int{1 << 61, 1 << 62, 1<<62 + 1}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, concRange(tc.start, tc.end), "%d..%d", tc.start, tc.end)
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern, key string
		match        bool
	}{
		{"dsv4-*", "dsv4-fp4-gb200", true},
		{"dsv4-*", "xdsv4-fp4", false},
		{"*gb200*", "a/gb200/b", true}, // fnmatch's * crosses '/'
		{"k?", "k1", true},
		{"k[12]", "k2", true},
		{"k[!12]", "k2", false},
		{"k[!12]", "k3", true},
		{"k[", "k[", true}, // unclosed class is literal
		{"a.b*", "axb", false},
	}
	for _, tc := range cases {
		re, err := globRegexp(tc.pattern)
		require.NoError(t, err)
		assert.Equal(t, tc.match, re.MatchString(tc.key), "%s vs %s", tc.pattern, tc.key)
	}
}

func hw(t *testing.T, mib int64, gpn int) *ixconfig.Runners {
	r, err := ixconfig.ParseRunners("r.yaml", []byte(fmt.Sprintf(
		"labels: {cluster:x: [x_0, x_1, y_0]}\nhardware: {cluster:x: {available-cpu-dram-mib: %d, gpus-per-node: %d}}\n", mib, gpn)))
	require.NoError(t, err)
	return r
}

// agenticMaster builds a one-key multinode agentic config.
func agenticMaster(t *testing.T, util string, prefillTP int, extraEntry string) *ixconfig.Master {
	src := fmt.Sprintf(`k:
  image: i
  model: m
  model-prefix: mp
  runner: cluster:x
  precision: fp4
  framework: f
  multinode: true
  scenarios:
    agentic-coding:
    - dram-utilization: %s
      search-space:
      - conc-list: [16, 32, 32]
        kv-offloading: dram
        kv-offload-backend: {name: hicache, version: null}
        prefill: {num-worker: 2, tp: %d, ep: 2, dp-attn: true}
        decode: {num-worker: 1, tp: 4, ep: 0, dp-attn: false}
%s`, util, prefillTP, extraEntry)
	m, err := ixconfig.ParseMaster("m.yaml", []byte(src))
	require.NoError(t, err)
	return m
}

func TestDRAMBudget(t *testing.T) {
	cases := []struct {
		mib    int64
		gpn    int
		util   string
		tp     int
		want   int
		errMsg string
	}{
		{860160, 4, "0.8", 16, 721, ""},
		{860160, 4, "0.80", 8, 721, ""},
		{860160, 4, "0.8", 4, 721, ""},
		{860160, 4, "0.9", 2, 405, ""},
		{860160, 4, "0.887", 1, 200, ""},
		{2063920, 8, "0.8", 16, 1731, ""},
		{1471356, 8, "0.8", 8, 1234, ""},
		{2964436, 8, "0.8", 8, 2399, ""}, // capped at 3 TB
		{860160, 4, "0.8", 6, 0, "not a multiple of gpus-per-node=4"},
		{860160, 4, "0.8", 3, 0, "does not divide gpus-per-node=4 evenly"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s-tp%d", tc.mib, tc.util, tc.tp), func(t *testing.T) {
			rows, err := Generate(agenticMaster(t, tc.util, tc.tp, ""), hw(t, tc.mib, tc.gpn), Options{Keys: []string{"k"}})
			if tc.errMsg != "" {
				require.ErrorContains(t, err, tc.errMsg)
				return
			}
			require.NoError(t, err)
			require.Len(t, rows, 3, "one row per conc, duplicates kept")
			assert.Equal(t, tc.want, rows[0].Int("total-cpu-dram-gb"))
		})
	}
	_, err := Generate(agenticMaster(t, "0.8", 8, ""), nil, Options{Keys: []string{"k"}})
	require.ErrorContains(t, err, `runner "cluster:x" requires 'available-cpu-dram-mib'`)
}

func TestAgenticRowShape(t *testing.T) {
	rows, err := Generate(agenticMaster(t, "0.8", 8, ""), hw(t, 860160, 4), Options{Keys: []string{"k"}})
	require.NoError(t, err)
	r := rows[0]
	assert.Equal(t, "mp_p2x8ep2dpa_d1x4ep0_conc16_kvdram-hicache", r.ExpName())
	keys := make([]string, len(r.Fields))
	for i, f := range r.Fields {
		keys[i] = f.Key
	}
	assert.Equal(t, []string{"image", "model", "model-prefix", "precision", "framework", "runner", "spec-decoding", "prefill", "decode",
		"conc", "kv-offloading", "total-cpu-dram-gb", "duration", "exp-name", "disagg", "scenario-type", "kv-offload-backend"}, keys)
	backend, _ := r.Fields.Get("kv-offload-backend")
	assert.Equal(t, `{"name":"hicache","version":null}`, canonical(backend))

	// Evals: the three rows share a deployment; the highest conc wins and the
	// earlier duplicate 32 wins the tie.
	evals := EvalRows(rows)
	require.Len(t, evals, 1)
	assert.Equal(t, "mp_p2x8ep2dpa_d1x4ep0_conc32_kvdram-hicache", evals[0].ExpName())
	assert.Equal(t, []int{32}, evals[0].Conc())
	picks := SelectEvals(rows)
	assert.Equal(t, []EvalPick{{Index: 1, Conc: 32, HasEvalConc: true}}, picks)
	n := len(evals[0].Fields)
	assert.Equal(t, []string{"run-eval", "eval-conc", "eval-only"}, []string{evals[0].Fields[n-3].Key, evals[0].Fields[n-2].Key, evals[0].Fields[n-1].Key})
	_, hasEval := rows[1].Fields.Get("run-eval")
	assert.False(t, hasEval, "selection does not modify the throughput rows")
}

const fixedMaster = `k:
  image: i
  model: m
  model-prefix: mp
  runner: cluster:x
  precision: fp8
  framework: f
  router: {version: "2", name: r}
  multinode: true
  disagg: true
  kv-p2p-transfer: nixl
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - conc-list: [32, 8, 32]
        prefill: {num-worker: 1, tp: 4, pcp-size: 2, pp: 1, ep: 4, dp-attn: true}
        decode: {num-worker: 1, tp: 8, ep: 8, dp-attn: true}
      - conc-start: 3
        conc-end: 20
        router: null
        prefill: {num-worker: 1, tp: 4, ep: 4, dp-attn: true}
        decode: {num-worker: 2, tp: 8, ep: 8, dp-attn: true}
    - isl: 1024
      osl: 1024
      search-space:
      - conc-list: [64]
        prefill: {num-worker: 1, tp: 4, ep: 4, dp-attn: true}
        decode: {num-worker: 1, tp: 8, ep: 8, dp-attn: true}
`

func TestFixedRows(t *testing.T) {
	m, err := ixconfig.ParseMaster("m.yaml", []byte(fixedMaster))
	require.NoError(t, err)
	rows, err := Generate(m, nil, Options{Keys: []string{"k"}})
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, []int{32, 8, 32}, rows[0].Conc(), "conc-list kept raw")
	assert.Equal(t, []int{3, 6, 12, 20}, rows[1].Conc())
	assert.Equal(t, "mp_8k1k", rows[0].ExpName())
	assert.Equal(t, "mp_1k1k", rows[2].ExpName())
	assert.Equal(t, 9472, rows[0].Int("max-model-len"))
	prefill, _ := rows[0].Fields.Get("prefill")
	assert.Equal(t, `{"num-worker": 1, "tp": 4, "pcp-size": 2, "pp": 1, "ep": 4, "dp-attn": true, "dcp-size": 1}`, encodeCompact(t, prefill))
	router, _ := rows[0].Fields.Get("router")
	assert.Equal(t, `{"version": "2", "name": "r"}`, encodeCompact(t, router), "router keeps YAML key order")
	_, ok := rows[1].Fields.Get("router")
	assert.False(t, ok, "a null router in the entry overrides the top level")

	evals := EvalRows(rows)
	require.Len(t, evals, 2, "1k1k never evals")
	assert.Equal(t, 32, evals[0].Int("eval-conc"))
	assert.Equal(t, 20, evals[1].Int("eval-conc"))
	v, _ := evals[0].Fields.Get("run-eval")
	assert.Equal(t, true, v)

	marked := MarkEvals(rows)
	v, _ = marked[2].Fields.Get("run-eval")
	assert.Equal(t, false, v)
	_, ok = marked[2].Fields.Get("eval-conc")
	assert.False(t, ok)

	// Filters.
	rows, err = Generate(m, nil, Options{Keys: []string{"k"}, Conc: []int{8, 12}})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, []int{8}, rows[0].Conc())
	assert.Equal(t, []int{12}, rows[1].Conc())
	rows, err = Generate(m, nil, Options{Keys: []string{"k"}, SeqLens: []string{"1k1k"}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	rows, err = Generate(m, nil, Options{Keys: []string{"k"}, ScenarioTypes: []string{AgenticCoding}})
	require.NoError(t, err)
	require.Empty(t, rows)
	rows, err = Generate(m, hw(t, 1, 4), Options{Keys: []string{"k"}, RunnerNodeFilter: "x_", SeqLens: []string{"1k1k"}})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, "x_0", rows[0].Fields[5].Value)
	assert.Equal(t, "x_1", rows[1].Fields[5].Value)
	rows, err = Generate(m, hw(t, 1, 4), Options{Keys: []string{"k"}, RunnerNodeFilter: "zzz"})
	require.NoError(t, err)
	require.Empty(t, rows, "no runner matches: key skipped silently")
}

func encodeCompact(t *testing.T, v any) string {
	t.Helper()
	out, err := EncodeIXJSON([]*Row{{Fields: Object{{"v", v}}}}, 0)
	require.NoError(t, err)
	s := strings.TrimSuffix(strings.TrimPrefix(string(out), `[{"v": `), "}]")
	return s
}

func TestGenerationErrors(t *testing.T) {
	m, err := ixconfig.ParseMaster("m.yaml", []byte(fixedMaster))
	require.NoError(t, err)
	cases := []struct {
		keys []string
		want string
	}{
		{[]string{"nope"}, `config-keys: config key "nope" not found in m.yaml`},
		{[]string{"z*"}, `config-keys: no config key matches "z*"`},
		{nil, "config-keys: no config keys given"},
	}
	for _, tc := range cases {
		_, err := Generate(m, nil, Options{Keys: tc.keys})
		require.ErrorContains(t, err, tc.want)
	}

	// A null kv-p2p-transfer in an entry of a disaggregated key removes the
	// transfer the row needs; InferenceX's row check rejects it too.
	m, err = ixconfig.ParseMaster("m.yaml", []byte(strings.Replace(fixedMaster, "        router: null\n", "        router: null\n        kv-p2p-transfer: null\n", 1)))
	require.NoError(t, err)
	_, err = Generate(m, nil, Options{Keys: []string{"k"}})
	require.ErrorContains(t, err, "m.yaml:23: k.scenarios.fixed-seq-len[0].search-space[1].kv-p2p-transfer")

	m, err = ixconfig.ParseMaster("m.yaml", []byte(strings.Replace(fixedMaster, "      - conc-start: 3\n", "      - conc-start: 3\n        conc-list: null\n", 1)))
	require.NoError(t, err)
	_, err = Generate(m, nil, Options{Keys: []string{"k"}})
	require.ErrorContains(t, err, "null conc-list is not allowed")
}

func TestPyFloatAndStrings(t *testing.T) {
	for f, want := range map[float64]string{0.8: "0.8", 8: "8.0", 1e16: "1e+16", 1.5e-5: "1.5e-05", 123456.5: "123456.5", -0.0001: "-0.0001"} {
		assert.Equal(t, want, pyFloat(f))
	}
	out, err := EncodeIXJSON([]*Row{{Fields: Object{{"s", "é\"\x01\U0001F600"}}}}, 0)
	require.NoError(t, err)
	assert.Equal(t, `[{"s": "\u00e9\"\u0001\ud83d\ude00"}]`, string(out))
}

// BenchmarkLoadMaster measures strict loading of InferenceX's whole
// nvidia-master.yaml (152 keys, ~10k lines).
func BenchmarkLoadMaster(b *testing.B) {
	path := filepath.Join(reftest.InferenceX(b, "nvidia-master.yaml"), "nvidia-master.yaml")
	for b.Loop() {
		if _, err := ixconfig.LoadMaster(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateAllMultinode expands all 83 multinode keys in both modes.
func BenchmarkGenerateAllMultinode(b *testing.B) {
	m, r, _ := loadReference(b)
	var keys []string
	for _, e := range m.Entries {
		if e.Multinode {
			keys = append(keys, e.Key)
		}
	}
	for b.Loop() {
		rows, err := Generate(m, r, Options{Keys: keys})
		if err != nil {
			b.Fatal(err)
		}
		_ = EvalRows(rows)
	}
}

// FuzzGenerate checks that any master config the loader accepts expands
// without panicking (errors are fine).
func FuzzGenerate(f *testing.F) {
	if data, err := os.ReadFile("../../configs/dsv4-gb200-agentx.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("k:\n  image: i\n  model: m\n  model-prefix: p\n  runner: r\n  precision: fp8\n  framework: f\n  multinode: true\n" +
		"  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n      - conc-start: 3\n        conc-end: 20\n" +
		"        prefill: {num-worker: 1, tp: 4, ep: 1, dp-attn: false}\n        decode: {num-worker: 1, tp: 8, ep: 8, dp-attn: true}\n"))
	runners, err := ixconfig.ParseRunners("r.yaml", []byte("labels: {cluster:gb200-nv: [a, b]}\nhardware: {cluster:gb200-nv: {available-cpu-dram-mib: 860160, gpus-per-node: 4}}\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ixconfig.ParseMaster("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, e := range m.Entries {
			if !e.Multinode {
				continue
			}
			rows, err := Generate(m, runners, Options{Keys: []string{e.Key}})
			if err != nil {
				continue
			}
			_ = EvalRows(rows)
			_ = MarkEvals(rows)
			if _, err := EncodeIXJSON(rows, 1); err != nil {
				t.Fatalf("encode: %v", err)
			}
		}
	})
}

// loadReference reads InferenceX's master config, runners and expected
// generator output from SWEEPFLOW_INFERENCEX, or skips: these are reference
// tests, and users have no InferenceX checkout beside the repository.
func loadReference(t testing.TB) (*ixconfig.Master, *ixconfig.Runners, string) {
	t.Helper()
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "expected-matrix")
	m, err := ixconfig.LoadMaster(filepath.Join(ix, "nvidia-master.yaml"))
	require.NoError(t, err)
	r, err := ixconfig.LoadRunners(filepath.Join(ix, "runners.yaml"))
	require.NoError(t, err)
	return m, r, filepath.Join(ix, "expected-matrix")
}

// firstDiff names the first path where two decoded JSON values differ.
func firstDiff(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want object", path, got)
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				return fmt.Sprintf("%s.%s: missing, want %v", path, k, wv)
			case !wok:
				return fmt.Sprintf("%s.%s: unexpected %v", path, k, gv)
			}
			if d := firstDiff(gv, wv, path+"."+k); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want list", path, got)
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: got %d items, want %d", path, len(g), len(w))
		}
		for i := range w {
			if d := firstDiff(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s: got %v, want %v", path, got, want)
		}
	}
	return ""
}

// TestParityWithInferenceX checks every multinode key of the shared
// nvidia-master.yaml against InferenceX's own output, field for field, in
// both modes (83 keys x 2 = 166 files), and byte for byte in the indent=1
// layout the reference files use (which also pins key order).
func TestParityWithInferenceX(t *testing.T) {
	m, r, expectedDir := loadReference(t)
	files, err := filepath.Glob(filepath.Join(expectedDir, "*.json"))
	require.NoError(t, err)

	var multinode []string
	for _, e := range m.Entries {
		if e.Multinode {
			multinode = append(multinode, e.Key)
		}
	}
	require.Len(t, multinode, 83)
	require.Len(t, files, 2*len(multinode))

	checked := 0
	for _, key := range multinode {
		for _, mode := range parityModes {
			name := key + mode.suffix
			t.Run(name, func(t *testing.T) { checkParity(t, m, r, expectedDir, key, mode.suffix, mode.evalsOnly) })
			checked++
		}
	}
	require.Equal(t, 166, checked)
}

var parityModes = []struct {
	suffix    string
	evalsOnly bool
}{{".json", false}, {".evals.json", true}}

// checkParity generates key in one mode and compares it with the reference
// file: first field by field (naming the first difference), then byte for
// byte in the layout the reference file uses (which also pins key order).
func checkParity(t *testing.T, m *ixconfig.Master, r *ixconfig.Runners, dir, key, suffix string, evalsOnly bool) {
	t.Helper()
	name := key + suffix
	want, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	rows, err := Generate(m, r, Options{Keys: []string{key}, EvalsOnly: evalsOnly})
	require.NoError(t, err)
	got, err := EncodeIXJSON(rows, 0)
	require.NoError(t, err)

	var gotV, wantV any
	require.NoError(t, json.Unmarshal(got, &gotV))
	require.NoError(t, json.Unmarshal(want, &wantV))
	if d := firstDiff(gotV, wantV, "$"); d != "" {
		t.Fatalf("%s: %s", name, d)
	}
	require.Equal(t, wantV, gotV, name)

	// The multinode files are json.dumps(indent=1) with no trailing newline;
	// the single-node files are the generator's stdout as printed (compact
	// json.dumps plus a newline). Compare in whichever layout the file uses.
	var layout []byte
	if bytes.HasSuffix(want, []byte("\n")) {
		layout, err = EncodeIXJSON(rows, 0)
		layout = append(layout, '\n')
	} else {
		layout, err = EncodeIXJSON(rows, 1)
	}
	require.NoError(t, err)
	require.Equal(t, string(want), string(layout), "%s: byte layout (key order) differs", name)
}
