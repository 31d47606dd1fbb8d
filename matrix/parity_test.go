package matrix

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// loadReference reads InferenceX's master config, runners and expected
// generator output from SWEEPFLOW_INFERENCEX, or skips: these are reference
// tests, and users have no InferenceX checkout beside the repository.
func loadReference(t testing.TB) (*config.Master, *config.Runners, string) {
	t.Helper()
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "expected-matrix")
	m, err := config.LoadMaster(filepath.Join(ix, "nvidia-master.yaml"))
	require.NoError(t, err)
	r, err := config.LoadRunners(filepath.Join(ix, "runners.yaml"))
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
		for _, mode := range []struct {
			suffix    string
			evalsOnly bool
		}{{".json", false}, {".evals.json", true}} {
			name := key + mode.suffix
			t.Run(name, func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(expectedDir, name))
				require.NoError(t, err)
				rows, err := Generate(m, r, Options{Keys: []string{key}, EvalsOnly: mode.evalsOnly})
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

				pretty, err := EncodeIXJSON(rows, 1)
				require.NoError(t, err)
				require.Equal(t, string(want), string(pretty), "%s: byte layout (key order) differs", name)
			})
			checked++
		}
	}
	require.Equal(t, 166, checked)
}

func TestSingleNodeKeysLoadAndValidate(t *testing.T) {
	m, _, _ := loadReference(t)
	single := 0
	for _, e := range m.Entries {
		if !e.Multinode {
			single++
			require.NotEmpty(t, append(e.Fixed, nil), e.Key)
		}
	}
	require.Equal(t, 152-83, single)

	// Expanding a single-node key is refused clearly rather than guessed.
	_, err := Generate(m, nil, Options{Keys: []string{"dsr1-fp4-b200-sglang"}})
	if m.Entry("dsr1-fp4-b200-sglang") != nil {
		require.ErrorContains(t, err, "single-node")
	}
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
