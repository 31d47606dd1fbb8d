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

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

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

func TestCompactOutputMatchesPythonSeparators(t *testing.T) {
	m, r, _ := loadReference(t)
	rows, err := Generate(m, r, Options{Keys: []string{"dsv4-fp4-gb300-dynamo-sglang-agentic-agg"}})
	require.NoError(t, err)
	out, err := EncodeIXJSON(rows, 0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), `[{"image": "lmsysorg/sglang:nightly-dev-cu13-20260719-99f5a6f4", "model": `), string(out[:80]))
	require.NotContains(t, string(out), "\n")
}
