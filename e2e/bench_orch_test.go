package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/bench"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/temporalx"
)

// The orchestration benchmark (`starter bench orchestration`) run as a user
// runs it: the built binary against a dev server it starts, or one it is
// given.

const benchSweepFile = "../configs/sweeps/dsv4-gb200-agentx.yaml"

// runStarter runs the built starter with extra environment entries.
func runStarter(t *testing.T, env []string, args ...string) (out, errb bytes.Buffer, err error) {
	cmd := exec.Command(starterBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out, errb, err
}

func benchCLI(t *testing.T) string {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	wd, _ := os.Getwd()
	bin, err := temporalx.CLIPath(wd)
	if err != nil {
		prereq.Missingf(t, "no Temporal CLI (%v); scripts/install-temporal.sh installs it", err)
	}
	return bin
}

// TestBenchOrchEmbedded runs the command as a user does: it starts the tuned
// embedded dev server, runs two small sweeps (the second continuing as new
// through a low history limit) and removes the server's directory.
func TestBenchOrchEmbedded(t *testing.T) {
	benchCLI(t)
	tmp := t.TempDir()
	out, errb, err := runStarter(t, []string{"TMPDIR=" + tmp}, "bench", "orchestration", "--points", "12", "--runs", "2", "--parallel", "4",
		"--history-limit", "60", "--sweep", benchSweepFile, "--json")
	require.NoError(t, err, errb.String())
	var rep bench.OrchestrationReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	require.Len(t, rep.Runs, 2)
	assert.Contains(t, rep.Server, "journal_mode=wal")
	if os.Getenv("SWEEPFLOW_DEVSERVER_BIN") != "" || prereq.CI() {
		assert.Contains(t, rep.Server, temporalx.DevServerBinary+" (no metrics endpoint", "sweepflow's build, not the CLI's dev server")
	}
	assert.Contains(t, rep.Server, "a fresh server for each run", "runs are independent samples unless --same-server")
	for _, r := range rep.Runs {
		assert.Equal(t, 12, r.Completed)
		assert.Positive(t, r.PointsPerMin)
		// 7 stages, teardown and the ledger record; eval points with
		// synthetic acceptance bring the server up twice.
		assert.GreaterOrEqual(t, r.Activities, 12*9)
		assert.LessOrEqual(t, r.Activities, 12*10)
		assert.Equal(t, r.Activities-12, r.Transitions, "one transition between consecutive activities of a point")
		assert.Positive(t, r.TransitionP50ms)
		assert.GreaterOrEqual(t, r.TransitionP99ms, r.TransitionP50ms)
		assert.GreaterOrEqual(t, r.ContinuedAsNew, 1, "history limit 60 continues the parent as new")
		assert.Positive(t, r.CANInputBytesMax)
		assert.Positive(t, r.RowBytesP50, "the matrix row travels in the inputs")
		assert.Greater(t, r.InputBytesMax, r.RowBytesP50)
		assert.Contains(t, r.InputBytesByType, "Perf")
		assert.Equal(t, 0, r.NoopAllocationsHeld, "every allocation torn down")
		// Started as running, no GetVersion upsert (PointInput.Rev), noop
		// stages under 2 s: the final status is the one upsert.
		assert.Equal(t, 1, r.PointUpsertsMax, "search-attribute upserts in a noop point's history")
	}
	assert.Equal(t, rep.Median.PointsPerMin, rep.PointsPerMin)
	left, _ := filepath.Glob(filepath.Join(tmp, "sweepflow-bench-orch-*"))
	assert.Empty(t, left, "the embedded server's directory is removed")
}

// TestBenchOrchAddress runs against a server it did not start, with the
// production layout of two task queues (no eager activities), and prints
// the table.
func TestBenchOrchAddress(t *testing.T) {
	bin := benchCLI(t)
	var extra []string
	for name, typ := range temporalx.SearchAttributeTypes() {
		extra = append(extra, "--search-attribute", name+"="+typ)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{ExistingPath: bin, LogLevel: "error", ExtraArgs: extra,
		ClientOptions: &client.Options{Logger: temporalx.SDKLogger(zap.NewNop())}, Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	out, errb, err := runStarter(t, nil, "bench", "orchestration", "--points", "6", "--runs", "1", "--address", srv.FrontendHostPort(),
		"--eager=false", "--sweep", benchSweepFile)
	require.NoError(t, err, errb.String())
	s := out.String()
	for _, want := range []string{"points/min", "transition p50 ms", "sweep parent events", "activity input bytes max", "of which row JSON", "two task queues", "max input bytes by activity"} {
		assert.Contains(t, s, want)
	}
}
