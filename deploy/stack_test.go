package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// syncBuffer collects a child process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cleanEnv is the test's environment without sweepflow's and Temporal's
// settings, as a fresh container would have it, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SWEEPFLOW_") || strings.HasPrefix(kv, "TEMPORAL_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// TestStackOnDevServer runs what the compose stack runs, minus Docker: the
// namespace job's script against a Temporal server that does not know
// sweepflow's search attributes, then the worker through the image's
// entrypoint with the compose file's command and environment (data dir
// relocated), then the compose test's one-point sweep from the host side.
func TestStackOnDevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Temporal dev server")
	}
	root := repoRoot(t)
	cli, err := temporalx.CLIPath(root)
	if err != nil {
		prereq.Missingf(t, "no Temporal CLI (%v); scripts/install-temporal.sh installs it", err)
	}
	cf := stackCompose(t)

	// The stack's binaries on PATH, as /app/bin is in the image, and the
	// Temporal CLI as admin-tools has it.
	bin := t.TempDir()
	out, err := exec.Command("go", "build", "-o", bin+"/", "../starter", "../worker").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	require.NoError(t, os.Symlink(cli, filepath.Join(bin, "temporal")))
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: cli, LogLevel: "error",
		ClientOptions: &client.Options{Logger: temporalx.SDKLogger(zap.NewNop())},
		Stdout:        io.Discard, Stderr: io.Discard,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	addr := srv.FrontendHostPort()

	// The namespace job, twice: every `docker compose up` reruns it.
	nsJob := cf.Services["temporal-create-namespace"]
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("sh", "-euc", script(t, nsJob))
		cmd.Env = cleanEnv(path, "TEMPORAL_ADDRESS="+addr, "DEFAULT_NAMESPACE="+nsJob.Environment["DEFAULT_NAMESPACE"])
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "namespace job run %d:\n%s", run, out)
		t.Logf("namespace job run %d:\n%s", run, out)
		if run == 2 {
			assert.Contains(t, string(out), "search attribute SweepID exists", "second run must find what the first created")
		}
	}
	resp, err := srv.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	types := map[string]enums.IndexedValueType{"Keyword": enums.INDEXED_VALUE_TYPE_KEYWORD, "KeywordList": enums.INDEXED_VALUE_TYPE_KEYWORD_LIST, "Int": enums.INDEXED_VALUE_TYPE_INT, "Double": enums.INDEXED_VALUE_TYPE_DOUBLE}
	for name, typ := range temporalx.SearchAttributeTypes() {
		assert.Equal(t, types[typ], resp.GetCustomAttributes()[name], "search attribute %s", name)
	}

	// The worker through the entrypoint, with the compose file's command.
	w := cf.Services["worker"]
	data := t.TempDir()
	// The node service (the workers' login node) names the checkpoint; here
	// the entrypoint writes it, as it does for a worker started alone.
	ckpt := strings.Replace(cf.Services["node"].Environment["SWEEPFLOW_SIM_CHECKPOINT"], w.Environment["SWEEPFLOW_DATA_DIR"], data, 1)
	require.NotEmpty(t, ckpt)
	gsm := gsm8kfixture.Dir(t) // the real split with SWEEPFLOW_GSM8K_DIR, else ours
	args := append([]string{filepath.Join(root, "deploy", "worker-entrypoint.sh")}, w.Command...)
	args = append(args, "--sim-time-scale", "0.002", "--perf-duration", "2s")
	worker := exec.Command("sh", args...)
	worker.Dir = root // /app in the image: configs/ at the same relative path
	worker.Env = cleanEnv(path, "TEMPORAL_ADDRESS="+addr, "TEMPORAL_NAMESPACE="+w.Environment["TEMPORAL_NAMESPACE"],
		"SWEEPFLOW_DATA_DIR="+data, "SWEEPFLOW_HOME="+data, "SWEEPFLOW_SIM_CHECKPOINT="+ckpt,
		"SWEEPFLOW_GSM8K_MOUNT="+gsm, "XDG_CACHE_HOME="+filepath.Join(data, "cache"))
	logs := &syncBuffer{}
	worker.Stdout, worker.Stderr = logs, logs
	require.NoError(t, worker.Start())
	t.Cleanup(func() {
		_ = worker.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = worker.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = worker.Process.Kill()
			<-done
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "worker ready") }, 60*time.Second, 100*time.Millisecond,
		"worker did not start:\n%s", logs)

	// The entrypoint wrote the simulated checkpoint and handed the worker
	// the GSM8K directory (exec: the process is the worker itself).
	shards, err := filepath.Glob(filepath.Join(ckpt, "model-*-of-00008.safetensors"))
	require.NoError(t, err)
	assert.Len(t, shards, 8)
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(worker.Process.Pid) + "/cmdline"); err == nil {
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		assert.Equal(t, "worker", filepath.Base(argv[0]), "the entrypoint must exec the worker")
		if _, err := os.Stat(filepath.Join(gsm, "test.jsonl")); err == nil {
			assert.Equal(t, []string{"--gsm8k-dir", gsm}, argv[1:3])
		}
	}

	// The host side: the starter plans with the same data dir the worker
	// has, so the checkpoint paths in the plan are the worker's.
	starter := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "starter"), args...)
		cmd.Dir = root
		// Its own home: a ledger left by an earlier run must not meet this one.
		cmd.Env = cleanEnv(path, "TEMPORAL_ADDRESS="+addr, "TEMPORAL_NAMESPACE=default", "SWEEPFLOW_DATA_DIR="+data, "SWEEPFLOW_HOME="+data)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const id = "deploy-stack-test"
	out2, err := starter("sweep", "start", "--sweep", "deploy/composetest/testdata/one-point-sweep.yaml",
		"--id", id, "--fast-retries", "--wait")
	require.NoError(t, err, "sweep start:\n%s\nworker:\n%s", out2, logs)
	t.Logf("sweep start:\n%s", out2)
	out2, err = starter("status", id, "--json")
	require.NoError(t, err, out2)
	var st struct {
		Workflow string         `json:"workflow_status"`
		Counts   map[string]int `json:"counts"`
		Points   []struct {
			Status string `json:"status"`
			Perf   *struct {
				OutputTputPerGPU float64 `json:"output_tput_per_gpu"`
				Simulated        bool    `json:"simulated"`
			} `json:"perf"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out2), &st), out2)
	assert.Equal(t, "completed", st.Workflow)
	require.Len(t, st.Points, 1)
	assert.Equal(t, point.StatusCompleted, st.Points[0].Status)
	require.NotNil(t, st.Points[0].Perf, out2)
	assert.True(t, st.Points[0].Perf.Simulated)
	assert.Greater(t, st.Points[0].Perf.OutputTputPerGPU, 0.0)

	// Staging copied the entrypoint's checkpoint to both nodes' local disks:
	// the plan's paths were the worker's.
	var staged []string
	require.NoError(t, filepath.WalkDir(filepath.Join(data, "local-sim", "nvme"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "model-00001-of-00008.safetensors" {
			staged = append(staged, p)
		}
		return err
	}))
	assert.Len(t, staged, 2, "staged copies: %v", staged)
}
