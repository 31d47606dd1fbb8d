package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepRegressionThresholds(t *testing.T) {
	base := "name: s\nconfig-files: [a.yaml]\nrunner-config: r.yaml\nconfig-keys: [k]\ncluster: c.yaml\n"
	cases := []struct {
		name string
		add  string
		want Regression
		err  string
	}{
		{"defaults", "", Regression{5, 10, 5}, ""},
		{"partial override", "regression:\n  ttft-p90-rise-pct: 15\n", Regression{5, 15, 5}, ""},
		{"all, negative turns off", "regression:\n  output-tput-per-gpu-drop-pct: 2.5\n  ttft-p90-rise-pct: -1\n  interactivity-drop-pct: 0\n", Regression{2.5, -1, 0}, ""},
		{"null keeps defaults", "regression:\n", Regression{5, 10, 5}, ""},
		{"not a number", "regression:\n  ttft-p90-rise-pct: lots\n", Regression{}, `s.yaml:7: regression.ttft-p90-rise-pct: expected a number, got string "lots"`},
		{"unknown key", "regression:\n  tpot-rise-pct: 3\n", Regression{}, "s.yaml:7: regression.tpot-rise-pct: unknown field"},
		{"not a mapping", "regression: 5\n", Regression{}, "s.yaml:6: regression: expected a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(base+tc.add))
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, strings.Contains(err.Error(), tc.err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.Regression)
		})
	}
}
