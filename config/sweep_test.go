package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

func TestSweepAdaptive(t *testing.T) {
	base := "name: s\nconfig-files: [a.yaml]\nrunner-config: r.yaml\nconfig-keys: [k, j]\ncluster: c.yaml\n"
	ok := base + `adaptive:
  - config-key: k
    mode: fill
    factor: 1.5
    max-points: 3
    max-node-hours: 40
  - config-key: j
    mode: slo
    topology: 2P1D DEP16/DEP32
    slo: {metric: p99_ttft, max: 2}
    grid: {min: 64, max: 1280, step: 64}
    max-points: 6
`
	s, err := ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(ok))
	require.NoError(t, err)
	assert.Equal(t, []point.Adaptive{
		{ConfigKey: "k", Mode: point.AdaptiveFill, Factor: 1.5, MaxPoints: 3, MaxNodeHours: 40},
		{ConfigKey: "j", Mode: point.AdaptiveSLO, Topology: "2P1D DEP16/DEP32", SLO: &point.SLO{Metric: point.SLOTTFTp99, Max: 2},
			Grid: point.Grid{Min: 64, Max: 1280, Step: 64}, MaxPoints: 6},
	}, s.Adaptive)

	s, err = ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(base+"adaptive:\n  - {config-key: k, mode: fill}\n"))
	require.NoError(t, err)
	assert.Equal(t, point.DefaultAdaptivePoints, s.Adaptive[0].MaxPoints, "a budget by default")

	cases := []struct{ name, add, want string }{
		{"unknown field", "adaptive:\n  - {config-key: k, mode: fill, points: 3}\n", "s.yaml:7: adaptive[0].points: unknown field"},
		{"bad mode", "adaptive:\n  - {config-key: k, mode: grow}\n", `s.yaml:7: adaptive[0].mode: want fill or slo, got "grow"`},
		{"no key", "adaptive:\n  - {mode: fill}\n", "s.yaml:7: adaptive[0].config-key: required field is missing"},
		{"duplicate key", "adaptive:\n  - {config-key: k, mode: fill}\n  - {config-key: k, mode: fill}\n",
			"s.yaml:8: adaptive[1].config-key: k already has adaptive points (adaptive[0])"},
		{"slo without slo", "adaptive:\n  - {config-key: k, mode: slo, grid: {step: 8}}\n", "adaptive[0].slo: required for mode slo"},
		{"slo direction", "adaptive:\n  - {config-key: k, mode: slo, grid: {step: 8}, slo: {metric: median_intvty, max: 50}}\n",
			"adaptive[0].slo: median_intvty is a rate that must stay high"},
		{"slo metric", "adaptive:\n  - {config-key: k, mode: slo, grid: {step: 8}, slo: {metric: ttft, max: 5}}\n", `adaptive[0].slo: metric: want one of p90_ttft`},
		{"no step", "adaptive:\n  - {config-key: k, mode: slo, slo: {metric: p99_ttft, max: 5}}\n", "adaptive[0].grid.step: must be at least 1"},
		{"budget", "adaptive:\n  - {config-key: k, mode: fill, max-points: 0}\n", "adaptive[0].max-points: must be at least 1, got 0"},
		{"factor", "adaptive:\n  - {config-key: k, mode: fill, factor: 1}\n", "adaptive[0].factor: must be a finite number above 1"},
		{"not a list", "adaptive: {config-key: k}\n", "s.yaml:6: adaptive: expected a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSweep("s.yaml", "/x/sweeps/s.yaml", []byte(base+tc.add))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

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
