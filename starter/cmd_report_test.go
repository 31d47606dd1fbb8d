package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReportCommand(t *testing.T) {
	t.Parallel()
	home := ledgerHome(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantMsg  string
		contains []string
		absent   []string
	}{
		{name: "sweep alone", args: []string{"--home", home, "--sweep", "sw"},
			contains: []string{`<svg id="pareto"`, `id="point-dsv4_p1x8_d0x8_conc4_kvdram-hicache"`, "SIMULATED DATA", "<h2>Latency coverage</h2>", `id="no-gaps"`},
			absent:   []string{`id="regressions"`}},
		{name: "coverage gaps of a seed-like sweep", args: []string{"--home", coverageHome(t), "--sweep", "cov"},
			contains: []string{`<svg id="e2el"`, `<table id="coverage-gaps">`, "add c369 c533", ">+c533<"}},
		{name: "coverage factor", args: []string{"--home", coverageHome(t), "--sweep", "cov", "--coverage-factor", "6"},
			contains: []string{`<svg id="e2el"`, `id="no-gaps"`, "No gaps wider than x6."}},
		{name: "coverage factor must be above 1", args: []string{"--home", home, "--sweep", "sw", "--coverage-factor", "0.5"}, wantCode: 2, wantMsg: "--coverage-factor must be above 1"},
		{name: "with baseline: 25 % slower is flagged", args: []string{"--home", home, "--sweep", "sw", "--baseline", "base"},
			contains: []string{`id="regressions"`, "<b>slower</b>: dsv4_p1x8_d0x8_conc4_kvdram-hicache output throughput per GPU", `class="pt baseline frontier"`}},
		{name: "looser thresholds: nothing flagged", args: []string{"--home", home, "--sweep", "sw", "--baseline", "base",
			"--max-tput-drop", "30", "--max-ttft-rise", "30", "--max-interactivity-drop", "30"},
			contains: []string{`id="regressions"`}, absent: []string{"<b>slower</b>"}},
		{name: "no sweep", args: []string{"--home", home}, wantCode: 2, wantMsg: "--sweep ID is required"},
		{name: "baseline is the sweep", args: []string{"--home", home, "--sweep", "sw", "--baseline", "sw"}, wantCode: 2, wantMsg: "another sweep"},
		{name: "unknown sweep", args: []string{"--home", home, "--sweep", "nope"}, wantCode: 1, wantMsg: `"nope" has no rows`},
		{name: "unknown baseline", args: []string{"--home", home, "--sweep", "sw", "--baseline", "nope"}, wantCode: 1, wantMsg: "baseline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sub", "report.html")
			err := runReport(append(tc.args, "--out", out))
			if tc.wantCode != 0 {
				requireExit(t, err, tc.wantCode, tc.wantMsg)
				return
			}
			require.NoError(t, err)
			data, err := os.ReadFile(out)
			require.NoError(t, err)
			for _, c := range tc.contains {
				assert.Contains(t, string(data), c)
			}
			for _, c := range tc.absent {
				assert.NotContains(t, string(data), c)
			}
		})
	}
}
