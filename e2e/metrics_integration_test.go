package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/testnet"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// sample returns the value of the first sample of metric whose labels
// include every given label="value" pair.
func sample(text, metric string, labels ...string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `\{([^}]*)\} (\S+)$`)
next:
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		for _, l := range labels {
			if !regexp.MustCompile(`(^|,)` + regexp.QuoteMeta(l) + `(,|$)`).MatchString(m[1]) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(m[2], 64)
		return v, err == nil
	}
	return 0, false
}

// TestIntegrationWorkerMetrics runs the worker binary with --metrics-addr,
// drives the agg sweep through an operator wait (the c1 point's perf fails
// its whole retry budget, then an operator retries it) and scrapes /metrics
// over HTTP: the SDK's metrics and sweepflow's must both be there.
func TestIntegrationWorkerMetrics(t *testing.T) {
	e := newITEnv(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	cfg := e.workerConfig()
	cmd := exec.Command(workerBinary(t), "--cluster", cfg.ClusterFile, "--home", e.home, "--gsm8k-dir", e.gsm8kDir,
		"--eval-limit", "40", "--thresholds", cfg.Thresholds, "--starter-bin", e.starterBin,
		"--sim-time-scale", "0.002", "--perf-duration", "2s", "--metrics-addr", addr)
	logf, err := os.Create(filepath.Join(e.home, "worker-metrics.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })

	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return ""
		}
		return string(b)
	}
	e.eventually("the worker to serve /metrics", time.Minute, func() bool { return scrape() != "" })

	out, code := e.cli("sweep", "start", "--sweep", "testdata/agg-sweep.yaml", "--fast-retries", "--inject-fault", "conc1_:perf:3", "--json")
	require.Equal(t, 0, code, out)
	var started struct {
		SweepID string `json:"sweep_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	pointWID := workflows.PointWorkflowID(started.SweepID, simID(t, "dsv4_p1x8_d0x8_conc1_kvdram-hicache"))
	waiting := fmt.Sprintf(`SweepID = %q AND PointStatus = "awaiting-operator"`, started.SweepID)
	e.eventually("the c1 point to wait for an operator", 3*time.Minute, func() bool { return len(e.list(waiting)) == 1 })
	time.Sleep(time.Second) // a measurable wait
	out, code = e.cli("retry", pointWID)
	require.Equal(t, 0, code, out)
	pr := e.wait(started.SweepID, 3*time.Minute)
	require.Equal(t, 2, pr.Counts[point.StatusCompleted], "%+v", pr.Counts)

	type want struct {
		metric string
		labels []string
		check  func(float64) bool
		what   string
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	wants := []want{
		// The SDK's own, through the tally contrib.
		{"temporal_request_total", []string{`namespace="default"`}, atLeast(1), ">= 1"},
		{"temporal_workflow_completed_total", []string{`workflow_type="PointWorkflow"`}, atLeast(2), ">= 2"},
		{"temporal_activity_execution_latency_seconds_count", []string{`activity_type="Perf"`}, atLeast(2), ">= 2"},
		// sweepflow's.
		{"sweepflow_points_finished_total", []string{`status="completed"`}, func(v float64) bool { return v == 2 }, "== 2"},
		{"sweepflow_stage_duration_seconds_count", []string{`stage="perf"`, `outcome="error"`}, func(v float64) bool { return v == 3 }, "== 3 (injected)"},
		{"sweepflow_stage_duration_seconds_count", []string{`stage="perf"`, `outcome="ok"`}, func(v float64) bool { return v == 2 }, "== 2"},
		{"sweepflow_stage_duration_seconds_count", []string{`stage="bringup"`, `outcome="ok"`}, atLeast(2), ">= 2"},
		{"sweepflow_operator_waits_total", []string{`stage="perf"`}, func(v float64) bool { return v == 1 }, "== 1"},
		{"sweepflow_operator_wait_seconds_count", []string{`stage="perf"`, `outcome="running"`}, func(v float64) bool { return v == 1 }, "== 1"},
		{"sweepflow_operator_wait_seconds_sum", []string{`stage="perf"`}, atLeast(1), ">= 1 s"},
	}
	var text string
	ok := func() bool {
		text = scrape()
		for _, w := range wants {
			if v, found := sample(text, w.metric, w.labels...); !found || !w.check(v) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(20 * time.Second) // tally reports every second
	for !ok() && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	for _, w := range wants {
		v, found := sample(text, w.metric, w.labels...)
		if assert.True(t, found, "%s%v missing", w.metric, w.labels) {
			assert.True(t, w.check(v), "%s%v = %g, want %s", w.metric, w.labels, v, w.what)
		}
	}
	if t.Failed() {
		t.Logf("scraped /metrics:\n%s", text)
	}
}
