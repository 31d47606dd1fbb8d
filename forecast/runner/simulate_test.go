package runner_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/forecast/runner"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// sortRule is the sweep's ordering rule as workflows/sweep.go states it
// (sortQueue, after canaries): the largest deployments first, they are the
// hardest to place.
const sortRule = "return b.nodes - a.nodes"

// envOrderFixture makes TestOrderFixture print its forecast (the child
// process of TestForecastIsTheScheduler).
const envOrderFixture = "SWEEPFLOW_FORECAST_ORDER_FIXTURE"

// orderFixture is a sweep whose makespan depends on the order: on 18
// nodes, one 10-node deployment of 4 h and four 8-node ones of 1 h.
// Largest first, the 10-node one runs beside the 8-node ones one after
// another (4 h); smallest first, the 8-node ones go two by two and the
// 10-node one starts only after them (6 h).
func orderFixture(t *testing.T) *forecast.Cluster {
	var pts []point.Spec
	add := func(name string, nodes int, d time.Duration) {
		pts = append(pts, point.Spec{PointID: name, ConfigKey: "fixture", Topology: name, Conc: 1, Nodes: nodes, GPUs: 4 * nodes,
			DeploymentHash: name, DurationSec: int(d.Seconds())})
	}
	for i := range 4 {
		add(fmt.Sprintf("small%d", i+1), 8, time.Hour)
	}
	add("large", 10, 4*time.Hour)
	in := workflows.SweepInput{SweepID: "order", Name: "order", Cluster: "fixture", NodeBudget: 18, Points: pts}
	// Bring-up only as long as the profile must say; no other stage time.
	c, err := runner.Run(in, forecast.Inputs{Profile: forecast.Profile{Name: "fixture", Nodes: 18, GPUsPerNode: 4, BringUp: time.Nanosecond}})
	require.NoError(t, err)
	return c
}

// TestOrderFixture prints the fixture's forecast when asked to (by
// TestForecastIsTheScheduler, in a build with another ordering rule).
func TestOrderFixture(t *testing.T) {
	if os.Getenv(envOrderFixture) == "" {
		t.Skip(envOrderFixture + " unset: run by TestForecastIsTheScheduler")
	}
	c := orderFixture(t)
	fmt.Printf("makespan_hours=%.6f node_hours=%.6f\n", c.MakespanHours, c.NodeHours)
}

// TestForecastIsTheScheduler forecasts the fixture, then builds this test
// again with a copy of workflows/sweep.go whose ordering rule starts the
// smallest deployments first (go test -overlay: the repository is not
// touched) and forecasts it there. The makespan follows the rule, because
// the forecast runs the sweep workflow rather than a model of it; the
// node-hours, which no order changes, stay.
func TestForecastIsTheScheduler(t *testing.T) {
	c := orderFixture(t)
	assert.InDelta(t, 4.0, c.MakespanHours, 1e-6, "largest first")
	assert.InDelta(t, 10*4.0+4*8, c.NodeHours, 1e-6)
	if testing.Short() {
		t.Skip("builds the forecast tests again with another ordering rule (-short)")
	}
	src, err := os.ReadFile("../../workflows/sweep.go")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(src), sortRule), "the sweep's ordering rule moved; update sortRule")
	dir := t.TempDir()
	smallFirst := filepath.Join(dir, "sweep.go")
	require.NoError(t, os.WriteFile(smallFirst, []byte(strings.Replace(string(src), sortRule,
		"return a.nodes - b.nodes", 1)), 0o644))
	orig, err := filepath.Abs("../../workflows/sweep.go")
	require.NoError(t, err)
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {orig: smallFirst}})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, overlay, 0o644))

	cmd := exec.Command("go", "test", "-overlay", overlayFile, "-count=1", "-run", "^TestOrderFixture$", "-v", ".")
	cmd.Env = append(os.Environ(), envOrderFixture+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`makespan_hours=([0-9.]+) node_hours=([0-9.]+)`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	makespan, _ := strconv.ParseFloat(string(m[1]), 64)
	nodeHours, _ := strconv.ParseFloat(string(m[2]), 64)
	assert.InDelta(t, 6.0, makespan, 1e-6, "smallest first: the 10-node deployment waits for all four")
	assert.InDelta(t, c.NodeHours, nodeHours, 1e-6, "no order changes the node-hours")
}
