package matrix

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

func loadFixture(t *testing.T, name string) *ixconfig.Master {
	t.Helper()
	m, err := ixconfig.LoadMaster(filepath.Join("testdata", name))
	require.NoError(t, err)
	return m
}

func fieldKeys(r *Row) []string {
	keys := make([]string, len(r.Fields))
	for i, f := range r.Fields {
		keys[i] = f.Key
	}
	return keys
}

// tpConc lists rows as "tp/conc" for compact comparisons.
func tpConc(rows []*Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%d/%d", r.Int("tp"), r.Int("conc"))
	}
	return out
}

func TestSingleNodeFixedRows(t *testing.T) {
	m := loadFixture(t, "single-fixed.yaml")
	rows, err := Generate(m, nil, Options{Keys: []string{"sn-fixed"}})
	require.NoError(t, err)
	require.Equal(t, []string{
		"2/4", "2/8", "2/16", "2/32", "2/64", // conc range, one row per conc
		"4/8", "4/32", "4/64", "4/128", // conc-list kept in order
		"8/16", "8/32", "8/64", "8/128", "8/256",
		"8/1", "8/2", "8/4", "8/8",
		"4/4", "4/16",
		"8/64", "8/128", "8/256", "8/512", // 1k1k
	}, tpConc(rows))

	r := rows[9]
	assert.Equal(t, []string{"image", "model", "model-prefix", "precision", "framework", "runner",
		"isl", "osl", "tp", "pp", "dcp-size", "pcp-size", "conc", "max-model-len", "ep", "dp-attn",
		"spec-decoding", "exp-name", "disagg", "run-eval", "router"}, fieldKeys(r))
	out, err := EncodeIXJSON([]*Row{r}, 0)
	require.NoError(t, err)
	assert.Equal(t, `[{"image": "img:1", "model": "org/model-a", "model-prefix": "ma", "precision": "fp8", "framework": "sglang", "runner": "b200", `+
		`"isl": 8192, "osl": 1024, "tp": 8, "pp": 1, "dcp-size": 2, "pcp-size": 1, "conc": 16, "max-model-len": 9472, "ep": 8, "dp-attn": true, `+
		`"spec-decoding": "none", "exp-name": "ma_8k1k", "disagg": false, "run-eval": false, "router": {"version": "0.2", "name": "rt"}}]`, string(out))

	// Defaults: ep 1, dp-attn false, pp/dcp-size/pcp-size 1.
	assert.Equal(t, `{"dcp-size":1,"dp-attn":false,"ep":1,"pcp-size":1,"pp":1}`,
		canonical(Object{{"pp", get(rows[0], "pp")}, {"dcp-size", get(rows[0], "dcp-size")}, {"pcp-size", get(rows[0], "pcp-size")}, {"ep", get(rows[0], "ep")}, {"dp-attn", get(rows[0], "dp-attn")}}))
	assert.Equal(t, "ma_1k1k", rows[20].ExpName())
	assert.Equal(t, 2304, rows[20].Int("max-model-len"))
	assert.Equal(t, []int{16}, rows[9].Conc(), "a scalar conc reads as a one-element list")
}

func get(r *Row, k string) any {
	v, _ := r.Fields.Get(k)
	return v
}

// TestSingleNodeFixedEvals: per group across TP values, every row at the
// highest and at the median distinct conc >= 16.
func TestSingleNodeFixedEvals(t *testing.T) {
	m := loadFixture(t, "single-fixed.yaml")
	cases := []struct {
		name string
		keys []string
		want []string // tp/conc of the eval rows, in row order
	}{
		// (none,false): distinct {16,32,64,128} -> 128 and median 64, the
		// latter at both tp 2 and tp 4; (none,true): {16..256} -> 256 and 64;
		// (mtp,false): nothing >= 16; (mtp,true): {16} -> 16 once; 1k1k: none.
		{"even and odd groups", []string{"sn-fixed"}, []string{"2/64", "4/64", "4/128", "8/64", "8/256", "4/16"}},
		// {20,40,80} -> median 40 at tp 2 and tp 1, highest 80; 2048/512 never.
		{"median across tp", []string{"sn-fixed-odd"}, []string{"2/40", "2/80", "1/40"}},
		{"different models, different groups", []string{"sn-fixed-odd", "sn-fixed"}, []string{"2/40", "2/80", "1/40", "2/64", "4/64", "4/128", "8/64", "8/256", "4/16"}},
		// Groups span config keys: {20,40,80,160} -> median 80, highest 160.
		{"one group across keys", []string{"sn-fixed-odd", "sn-fixed-odd-twin"}, []string{"2/80", "4/160"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := Generate(m, nil, Options{Keys: tc.keys, EvalsOnly: true})
			require.NoError(t, err)
			assert.Equal(t, tc.want, tpConc(rows))
			for _, r := range rows {
				keys := fieldKeys(r)
				assert.Equal(t, "eval-only", keys[len(keys)-1], "eval-only appended")
				assert.Equal(t, []string{"disagg", "run-eval"}, keys[18:20], "run-eval keeps its place")
				assert.Equal(t, true, get(r, "run-eval"))
				_, hasConc := r.Fields.Get("eval-conc")
				assert.False(t, hasConc, "single-node rows have no eval-conc")
			}
		})
	}
}

func TestSingleNodeAgenticRows(t *testing.T) {
	m := loadFixture(t, "single-agentic.yaml")
	rows, err := Generate(m, hw(t, 1471356, 8), Options{Keys: []string{"sn-agentic", "sn-agentic-other"}})
	require.NoError(t, err)
	require.Equal(t, []string{"4/1", "4/2", "4/4", "8/2", "8/8", "8/8", "2/1", "2/2", "2/4", "2/6", "2/3"}, tpConc(rows))

	cases := []struct {
		row     int
		expName string
		dram    int
		keys    []string
	}{
		{0, "mc_tp4_conc1_kvnone", 0, []string{"image", "model", "model-prefix", "precision", "framework", "runner",
			"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding", "conc",
			"kv-offloading", "total-cpu-dram-gb", "duration", "exp-name", "scenario-type"}},
		{4, "mc_tp8_conc8_kvdram-hicache_spec-mtp", 1234, []string{"image", "model", "model-prefix", "precision", "framework", "runner",
			"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding", "conc",
			"kv-offloading", "total-cpu-dram-gb", "duration", "exp-name", "scenario-type", "kv-offload-backend", "router"}},
		{9, "mc_tp2_conc6_kvnone", 0, nil},
		{10, "md_tp2_conc3_kvdram-mooncake", 192, nil}, // tp 2 of 8 GPUs at 0.5
	}
	for _, tc := range cases {
		t.Run(tc.expName, func(t *testing.T) {
			r := rows[tc.row]
			assert.Equal(t, tc.expName, r.ExpName())
			assert.Equal(t, tc.dram, r.Int("total-cpu-dram-gb"))
			assert.Equal(t, AgenticDuration, r.Int("duration"))
			_, hasDisagg := r.Fields.Get("disagg")
			assert.False(t, hasDisagg, "single-node agentic rows have no disagg key")
			_, hasRunEval := r.Fields.Get("run-eval")
			assert.False(t, hasRunEval)
			if tc.keys != nil {
				assert.Equal(t, tc.keys, fieldKeys(r))
			}
		})
	}
	assert.Equal(t, 2, rows[6].Int("pp"))
	assert.Equal(t, 2, rows[10].Int("dcp-size"))
}

// TestSingleNodeAgenticEvals: the one highest-conc row per (model, runner,
// framework, precision), with no minimum conc; the earliest wins ties.
func TestSingleNodeAgenticEvals(t *testing.T) {
	m := loadFixture(t, "single-agentic.yaml")
	cases := []struct {
		name   string
		keys   []string
		filter string
		want   []string // exp-name/runner of the eval rows
	}{
		{"highest conc, earliest duplicate", []string{"sn-agentic"}, "", []string{"mc_tp8_conc8_kvdram-hicache_spec-mtp/cluster:x"}},
		{"no minimum conc", []string{"sn-agentic-other"}, "", []string{"md_tp2_conc3_kvdram-mooncake/cluster:x"}},
		{"one per model", []string{"sn-agentic", "sn-agentic-other"}, "", []string{"mc_tp8_conc8_kvdram-hicache_spec-mtp/cluster:x", "md_tp2_conc3_kvdram-mooncake/cluster:x"}},
		{"one per runner", []string{"sn-agentic"}, "x_", []string{"mc_tp8_conc8_kvdram-hicache_spec-mtp/x_0", "mc_tp8_conc8_kvdram-hicache_spec-mtp/x_1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all, err := Generate(m, hw(t, 1471356, 8), Options{Keys: tc.keys, RunnerNodeFilter: tc.filter})
			require.NoError(t, err)
			rows, err := Generate(m, hw(t, 1471356, 8), Options{Keys: tc.keys, RunnerNodeFilter: tc.filter, EvalsOnly: true})
			require.NoError(t, err)
			got := make([]string, len(rows))
			for i, r := range rows {
				runner, _ := r.Fields.Get("runner")
				got[i] = fmt.Sprintf("%s/%s", r.ExpName(), runner)
				keys := fieldKeys(r)
				assert.Equal(t, []string{"run-eval", "eval-only"}, keys[len(keys)-2:], "run-eval and eval-only appended")
				assert.NotContains(t, keys, "eval-conc")
			}
			assert.Equal(t, tc.want, got)
			for _, p := range SelectEvals(all) {
				assert.False(t, p.HasEvalConc)
			}
		})
	}
}

func TestSingleNodeRunnerOrderAndErrors(t *testing.T) {
	m := loadFixture(t, "single-agentic.yaml")
	// With a runner filter, runners are innermost; DRAM still comes from the
	// master's runner label.
	rows, err := Generate(m, hw(t, 1471356, 8), Options{Keys: []string{"sn-agentic-other"}, RunnerNodeFilter: "x_"})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for i, want := range []string{"x_0", "x_1"} {
		assert.Equal(t, want, get(rows[i], "runner"))
		assert.Equal(t, 192, rows[i].Int("total-cpu-dram-gb"))
	}

	// A server larger than a node cannot be budgeted.
	_, err = Generate(m, hw(t, 1471356, 4), Options{Keys: []string{"sn-agentic"}})
	require.ErrorContains(t, err, "tp=8 with pp=1 and pcp-size=1 requires 8 GPUs and exceeds gpus-per-node=4")

	// --conc and --seq-lens apply to single-node rows too.
	f := loadFixture(t, "single-fixed.yaml")
	rows, err = Generate(f, nil, Options{Keys: []string{"sn-fixed"}, Conc: []int{64}, SeqLens: []string{"8k1k"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"2/64", "4/64", "8/64"}, tpConc(rows))
}

// TestSingleNodeMarkEvals is the mode with neither flag: nothing dropped,
// chosen fixed rows get run-eval true in place, agentic rows run-eval false.
func TestSingleNodeMarkEvals(t *testing.T) {
	f := loadFixture(t, "single-fixed.yaml")
	rows, err := Generate(f, nil, Options{Keys: []string{"sn-fixed-odd"}})
	require.NoError(t, err)
	marked := MarkEvals(rows)
	require.Len(t, marked, len(rows))
	var on []string
	for _, r := range marked {
		assert.Equal(t, fieldKeys(rows[0]), fieldKeys(r), "no key added or moved")
		if get(r, "run-eval") == true {
			on = append(on, fmt.Sprintf("%d/%d", r.Int("tp"), r.Int("conc")))
		}
	}
	assert.Equal(t, []string{"2/40", "2/80", "1/40"}, on)

	a := loadFixture(t, "single-agentic.yaml")
	rows, err = Generate(a, hw(t, 1471356, 8), Options{Keys: []string{"sn-agentic"}})
	require.NoError(t, err)
	for _, r := range MarkEvals(rows) {
		assert.Equal(t, "run-eval", r.Fields[len(r.Fields)-1].Key)
		assert.Equal(t, false, get(r, "run-eval"), "agentic evals are opt-in (--evals-only)")
	}
}

// TestParitySingleNode checks every single-node reference file (InferenceX
// output for a subset of the 69 single-node keys, fixed-seq-len and
// agentic) in both modes, the same way as the multinode files.
func TestParitySingleNode(t *testing.T) {
	m, r, _ := loadReference(t)
	dir := filepath.Join(reftest.InferenceX(t, "expected-matrix-single"), "expected-matrix-single")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	checked, keys := 0, map[string]bool{}
	for _, f := range files {
		base := filepath.Base(f)
		for _, mode := range parityModes {
			key, ok := strings.CutSuffix(base, mode.suffix)
			if !ok || (mode.suffix == ".json" && strings.HasSuffix(key, ".evals")) {
				continue
			}
			e := m.Entry(key)
			require.NotNil(t, e, "%s: no such key in nvidia-master.yaml", base)
			require.False(t, e.Multinode, "%s is a multinode key", key)
			keys[key] = true
			t.Run(base, func(t *testing.T) { checkParity(t, m, r, dir, key, mode.suffix, mode.evalsOnly) })
			checked++
		}
	}
	require.Equal(t, len(files), checked, "every file is checked once")
	require.Equal(t, 2*len(keys), checked, "each key has both modes")
	t.Logf("%d single-node files (%d keys) checked", checked, len(keys))
}

func TestSingleNodeKeysLoadAndExpand(t *testing.T) {
	m, r, _ := loadReference(t)
	var single []string
	for _, e := range m.Entries {
		if !e.Multinode {
			single = append(single, e.Key)
		}
	}
	require.Len(t, single, 152-83)

	// Every single-node key expands in both modes, and a glob over a mix of
	// single-node and multinode keys expands too.
	for _, evalsOnly := range []bool{false, true} {
		rows, err := Generate(m, r, Options{Keys: single, EvalsOnly: evalsOnly})
		require.NoError(t, err)
		require.NotEmpty(t, rows)
	}
	rows, err := Generate(m, r, Options{Keys: []string{"dsv4-*"}})
	require.NoError(t, err)
	var sn, mn int
	for _, row := range rows {
		if row.Entry.Multinode {
			mn++
		} else {
			sn++
		}
	}
	require.Positive(t, sn)
	require.Positive(t, mn)
}
