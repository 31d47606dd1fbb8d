package gsm8k

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

// thresholdCase is one Floor lookup.
type thresholdCase struct {
	task, prefix string
	want         float64
	ok           bool
}

func checkFloors(t *testing.T, th *Thresholds, cases []thresholdCase) {
	t.Helper()
	for _, tc := range cases {
		got, ok := th.Floor(tc.task, tc.prefix)
		assert.Equal(t, tc.ok, ok, "%s/%s", tc.task, tc.prefix)
		assert.Equal(t, tc.want, got, "%s/%s", tc.task, tc.prefix)
	}
}

func TestLoadThresholdsFixture(t *testing.T) {
	t.Parallel()
	th, err := LoadThresholds(filepath.Join("testdata", "thresholds.yaml"))
	require.NoError(t, err)
	checkFloors(t, th, []thresholdCase{
		{"gsm8k", "dsv4", 0.91, true},
		{"gsm8k", "alpha", 0.94, true},
		{"gsm8k", "beta", 0.90, true},  // beta overrides another task: default
		{"gsm8k", "gamma", 0.90, true}, // no override: default
		{"gsm8k", "", 0.90, true},
		{"swebench_lite", "beta", 0.40, true},
		{"swebench_lite", "dsv4", 0.50, true}, // dsv4 overrides only gsm8k
		{"gsm8k_cot", "dsv4", 0, false},
	})
}

// The repository's own floors, which the worker gates on by default.
func TestLoadThresholdsRepoConfig(t *testing.T) {
	t.Parallel()
	th, err := LoadThresholds(filepath.Join("..", "configs", "thresholds.yaml"))
	require.NoError(t, err)
	checkFloors(t, th, []thresholdCase{{"gsm8k", "dsv4", 0.91, true}, {"gsm8k", "", 0.90, true}})
}

// TestLoadThresholdsInferenceXFile reads InferenceX's own file (reference
// test).
func TestLoadThresholdsInferenceXFile(t *testing.T) {
	t.Parallel()
	th, err := LoadThresholds(filepath.Join(reftest.InferenceX(t, "thresholds.yaml"), "thresholds.yaml"))
	require.NoError(t, err)
	checkFloors(t, th, []thresholdCase{
		{"gsm8k", "dsv4", 0.91, true},
		{"gsm8k", "dsr1", 0.91, true},
		{"gsm8k", "glm5", 0.94, true},
		{"gsm8k", "llama70b", 0.90, true}, // no override: default
		{"gsm8k", "", 0.90, true},
		{"swebench_lite", "dsv4", 0.50, true}, // dsv4 overrides only gsm8k
		{"gsm8k_cot", "dsv4", 0, false},
	})
}

func TestParseThresholdsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want string }{
		{"not a number", "default:\n  gsm8k: high\n", "th.yaml:2: field default.gsm8k: \"high\" is not a number"},
		{"out of range", "default:\n  gsm8k: 0.9\nmodels:\n  dsv4:\n    gsm8k: 91\n", "th.yaml:5: field models.dsv4.gsm8k: floor 91 is outside [0, 1]"},
		{"unknown key", "defaults:\n  gsm8k: 0.9\n", "th.yaml:1: field defaults: unknown key"},
		{"models not a map", "models: [dsv4]\n", "th.yaml:1: field models: must be a mapping"},
		{"model not a map", "models:\n  dsv4: 0.91\n", "th.yaml:2: field models.dsv4: must be a mapping"},
		{"top level list", "- a\n", "th.yaml:1: top level must be a mapping"},
		{"bad yaml", "default: [\n", "th.yaml: yaml:"},
		{"empty", "", "th.yaml: empty thresholds file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseThresholds([]byte(tc.body), "th.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := LoadThresholds(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "missing.yaml")
}

func TestParseThresholdsMinimal(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "th.yaml")
	require.NoError(t, os.WriteFile(p, []byte("default:\n  gsm8k: 0.9\nmodels:\n"), 0o644))
	th, err := LoadThresholds(p)
	require.NoError(t, err)
	f, ok := th.Floor("gsm8k", "x")
	assert.True(t, ok)
	assert.Equal(t, 0.9, f)
}

func TestGate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		strict, flex float64
		n            int
		floor        float64
		pass         bool
		reason       string
	}{
		{"both above", 0.95, 0.96, 1319, 0.91, true, "reach floor"},
		{"exactly at floor", 0.91, 0.91, 1319, 0.91, true, "reach floor"},
		{"strict below (format failure)", 0.20, 0.93, 1319, 0.91, false, "em_strict 0.2000 below floor 0.91 (em_flexible 0.9300)"},
		{"flexible below", 0.95, 0.90, 1319, 0.91, false, "em_flexible 0.9000 below floor 0.91"},
		{"both below", 0.85, 0.86, 1319, 0.91, false, "em_strict 0.8500 and em_flexible 0.8600 below floor 0.91"},
		{"nothing scored", 0, 0, 0, 0.0, false, "no documents were scored"},
	}
	for _, tc := range cases {
		v := Gate(Summary{EMStrict: tc.strict, EMFlexible: tc.flex, NEff: tc.n}, tc.floor)
		assert.Equal(t, tc.pass, v.Passed, tc.name)
		assert.Equal(t, tc.floor, v.Floor, tc.name)
		assert.Contains(t, v.Reason, tc.reason, tc.name)
	}
}
