package goldenal

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

// TestSeedTable reads the repository's own copy of the seed's golden AL
// figures, which the seed sweep uses by default.
func TestSeedTable(t *testing.T) {
	tab, err := Load(filepath.Join("..", "..", "configs", "golden-al", "dsv4-pro-0813-dspark.yaml"))
	require.NoError(t, err)
	got, err := tab.Lookup("deepseek-ai/DeepSeek-V4-Pro-0813", true, 6)
	require.NoError(t, err)
	require.InDelta(t, 3.77, got, 1e-9, "DSpark, 6 draft tokens, thinking on")
}

// TestSeedTableMatchesInferenceX is a reference test: our copy of the seed's
// table must hold exactly InferenceX's figures.
func TestSeedTableMatchesInferenceX(t *testing.T) {
	ix := reftest.InferenceX(t, "golden_al_distribution")
	theirs, err := Load(filepath.Join(ix, "golden_al_distribution", "dsv4-pro-0813-dspark.yaml"))
	require.NoError(t, err)
	ours, err := Load(filepath.Join("..", "..", "configs", "golden-al", "dsv4-pro-0813-dspark.yaml"))
	require.NoError(t, err)
	require.Equal(t, theirs["deepseek-v4-pro-0813"], ours["deepseek-v4-pro-0813"])
}

func TestLookupRealFiles(t *testing.T) {
	dir := filepath.Join(reftest.InferenceX(t, "golden_al_distribution"), "golden_al_distribution")
	tests := []struct {
		file     string
		model    string
		thinking bool
		draft    int
		want     float64
	}{
		{"dsv4-pro-0813-dspark.yaml", "deepseek-ai/DeepSeek-V4-Pro-0813", true, 6, 3.77},
		{"dsv4_mtp.yaml", "deepseek-ai/DeepSeek-V4-Pro", true, 3, 2.49},
		{"dsv4_mtp.yaml", "deepseek-ai/DeepSeek-V4-Pro", false, 1, 1.92},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			tab, err := Load(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			got, err := tab.Lookup(tc.model, tc.thinking, tc.draft)
			require.NoError(t, err)
			require.InDelta(t, tc.want, got, 1e-9)
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad mode", "m:\n  thinking_maybe:\n    1: 2.0\n", "unknown mode"},
		{"bad level", "m:\n  thinking_on:\n    x: 2.0\n", "not a positive integer"},
		{"AL below one", "m:\n  thinking_on:\n    1: 0.5\n", "below 1"},
		{"not yaml", "m: [", "f.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
	tab, err := Parse("f.yaml", []byte("deepseek-v4-pro-0813:\n  thinking_on:\n    6: 3.77\n"))
	require.NoError(t, err)
	_, err = tab.Lookup("deepseek-ai/DeepSeek-V4-Pro-0813", false, 6)
	require.ErrorContains(t, err, "thinking_off")
	_, err = tab.Lookup("deepseek-ai/DeepSeek-V4-Pro-0813", true, 7)
	require.ErrorContains(t, err, "7 draft tokens")
	_, err = tab.Lookup("other/model", true, 6)
	require.ErrorContains(t, err, "no entry")
}
