package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSweepStartChaosRefusals: --chaos is refused in one line on a cluster
// of real engines, before anything is planned into the ledger or started;
// a seed must be an integer and a kind needs the process it acts on.
func TestSweepStartChaosRefusals(t *testing.T) {
	t.Setenv("SWEEPFLOW_HOME", t.TempDir())
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // nothing may be dialled
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"real cluster", []string{"--chaos", "7"}, "--chaos: cluster gb200-nvl72 runs real engines; chaos runs only on simulated and emulated clusters"},
		{"seed", []string{"--cluster", "../configs/clusters/local-sim.yaml", "--chaos", "seven"}, `--chaos "seven": want an integer seed`},
		{"kind without its process", []string{"--cluster", "../configs/clusters/local-sim.yaml", "--chaos", "7", "--chaos-kinds", "worker-kill"},
			"--chaos-kinds worker-kill: needs --chaos-worker or --chaos-server"},
		{"unknown kind", []string{"--cluster", "../configs/clusters/local-sim.yaml", "--chaos", "7", "--chaos-kinds", "meteor"}, `unknown chaos kind "meteor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runIO(append([]string{"sweep", "start", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml"}, tc.args...), &stdout, &stderr)
			assert.Equal(t, exitUsage, code, stderr.String())
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			assert.Len(t, lines, 1, "one line")
			assert.Contains(t, lines[0], tc.msg)
			assert.Empty(t, stdout.String())
		})
	}
}
