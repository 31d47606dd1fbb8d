package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simrole"
)

// lineWriter hands the lines written to it to a channel (dropping any
// the reader is not waiting for).
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		select {
		case w.lines <- l:
		default:
		}
	}
	return len(p), nil
}

func waitForAddr(t *testing.T, lines <-chan string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			if rest, ok := strings.CutPrefix(l, "simulated engine listening on "); ok {
				return rest
			}
		case <-deadline:
			t.Fatal("no listening line")
		}
	}
}

func TestSimServeInProcess(t *testing.T) {
	t.Parallel()
	gsm := t.TempDir()
	require.NoError(t, gsm8kfixture.Write(gsm, 5, 1))
	question, _, gold := gsm8kfixture.Problem(3)
	ctx, cancel := context.WithCancel(context.Background())
	out := lineWriter{lines: make(chan string, 16)}
	errc := make(chan error, 1)
	go func() {
		errc <- simServe(ctx, []string{"--listen", "127.0.0.1:0", "--deployment", "1P1D DEP8/DEP16", "--time-scale", "0.01",
			"--gsm8k", filepath.Join(gsm, "test.jsonl"), "--accuracy", "1", "--log-level", "warn"}, out, io.Discard, func(string) string { return "" })
	}()
	url := waitForAddr(t, out.lines)
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("X-Sweepflow-Simulated"))
	req, err := json.Marshal(map[string]any{"temperature": 0,
		"messages": []map[string]string{{"role": "user", "content": "Question: " + question + "\nAnswer:"}}})
	require.NoError(t, err)
	body := string(req)
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(b), "#### "+gold)
	assert.Contains(t, string(b), `"simulated":true`)
	cancel()
	require.NoError(t, <-errc, "graceful stop on context cancel")
}

// TestSimServeChild is the body of the subprocess tests below; it only runs
// when re-executed with SWEEPFLOW_SIM_CHILD set.
func TestSimServeChild(t *testing.T) {
	args := os.Getenv("SWEEPFLOW_SIM_CHILD")
	if args == "" {
		t.Skip("helper process for TestSimServeProcess")
	}
	os.Exit(run(append([]string{"sim", "serve"}, strings.Fields(args)...)))
}

func startSimChild(t *testing.T, args string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSimServeChild$")
	cmd.Env = append(os.Environ(), "SWEEPFLOW_SIM_CHILD="+args)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, waitForAddr(t, lines)
}

func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(20 * time.Second):
		t.Fatal("child did not exit")
		return -1
	}
}

func TestSimServeProcess(t *testing.T) {
	t.Parallel()
	t.Run("SIGTERM stops it gracefully", func(t *testing.T) {
		t.Parallel()
		cmd, url := startSimChild(t, "--listen 127.0.0.1:0 --ttft-ms 1 --itl-ms 1")
		resp, err := http.Get(url + "/v1/models")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Contains(t, string(b), sim.DefaultModel)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, waitExit(t, cmd))
	})
	t.Run("die-after exits 1", func(t *testing.T) {
		t.Parallel()
		cmd, url := startSimChild(t, "--listen 127.0.0.1:0 --fast --die-after 1")
		req := `{"prompt":"x","max_tokens":2}`
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(req))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		_, err = http.Post(url+"/v1/completions", "application/json", strings.NewReader(req))
		assert.Error(t, err, "request 2 finds the engine crashed")
		assert.Equal(t, 1, waitExit(t, cmd))
	})
}

func TestSimRoleCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stderr     string
		headerArgv []string
	}{
		{"no dash", []string{"sim", "role", "infra"}, 2, "want: sim role ROLE -- ARGV...", nil},
		{"unknown role", []string{"sim", "role", "vllm", "--", "x"}, 2, `unknown role "vllm"`, nil},
		{"worker refuses what sglang refuses", []string{"sim", "role", "sglang-worker", "--", "python3", "-m", "dynamo.sglang",
			"--model-path", "/model", "--disaggregation-mode", "prefill", "--port", "6100"}, 1,
			"needs --disaggregation-bootstrap-port", []string{"python3", "-m", "dynamo.sglang", "--model-path", "/model", "--disaggregation-mode", "prefill", "--port", "6100"}},
		{"trtllm worker without its engine args file", []string{"sim", "role", "trtllm-worker", "--", "numactl", "-m", "0,1", "trtllm-llmapi-launch",
			"python3", "-m", "dynamo.trtllm", "--model-path", "/model", "--disaggregation-mode", "prefill", "--extra-engine-args", "/nonexistent-sweepflow/trtllm_config_prefill.yaml"}, 1,
			"python3 -m dynamo.trtllm: error: --extra-engine-args /nonexistent-sweepflow/trtllm_config_prefill.yaml: no such file", []string{"numactl", "-m", "0,1", "trtllm-llmapi-launch",
				"python3", "-m", "dynamo.trtllm", "--model-path", "/model", "--disaggregation-mode", "prefill", "--extra-engine-args", "/nonexistent-sweepflow/trtllm_config_prefill.yaml"}},
		{"vllm worker with a bad speculative config", []string{"sim", "role", "vllm-worker", "--", "python3", "-m", "dynamo.vllm", "--model", "/model", "--speculative-config", "{mtp"}, 1,
			`python3 -m dynamo.vllm: error: argument --speculative-config: want a JSON object, got "{mtp"`, []string{"python3", "-m", "dynamo.vllm", "--model", "/model", "--speculative-config", "{mtp"}},
		{"router without workers", []string{"sim", "role", "sglang-router", "--", "python", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", "8180"}, 1,
			"no workers given", []string{"python", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", "8180"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runIO(tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, stderr.String())
			assert.Contains(t, stderr.String(), tc.stderr)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr.String()), "\n")+1, "one-line error: %q", stderr.String())
			if tc.headerArgv != nil {
				argv, _, err := simrole.ParseLog(&stdout)
				require.NoError(t, err)
				assert.Equal(t, tc.headerArgv, argv)
			}
		})
	}
}
