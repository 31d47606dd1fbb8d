package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postWarmup sends a non-streaming request marked as a warmup and returns
// the decoded body and how long it took.
func postWarmup(t *testing.T, url string, body any) (map[string]any, time.Duration) {
	return postMarked(t, url, WarmupHeader, body)
}

// postMarked sends a non-streaming request with header set to "1".
func postMarked(t *testing.T, url, header string, body any) (map[string]any, time.Duration) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, "1")
	t0 := time.Now()
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	took := time.Since(t0)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m, took
}

func usageOf(t *testing.T, m map[string]any) (completion, cached float64) {
	t.Helper()
	u := m["usage"].(map[string]any)
	return u["completion_tokens"].(float64), u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
}

// A warmup request (WarmupHeader) runs the same model on the compressed
// warmup clock: the same reply, a fraction of the time, and it leaves the
// prefix cache as a request on the server's clock would, so the measured
// request after it hits. It stays out of the latency histograms.
func TestWarmupRequestsRunOnTheWarmupClock(t *testing.T) {
	s, url := startServer(t, Config{Deployment: mustDeployment(t, "TP8 agg"), Seed: 7})
	assert.Equal(t, DefaultWarmupTimeScale, s.Config().WarmupTimeScale)
	prompt := words(40_000, "w")
	// Model time: prefill 40k tokens at 8 GPUs x 25k x 0.8 (~0.3 s with the
	// quadratic term) plus 300 decode steps of ~8 ms: ~2.7 s.
	body := chatBody(prompt, 300, false)

	warm, took := postWarmup(t, url+"/v1/chat/completions", body)
	n, cached := usageOf(t, warm)
	assert.Equal(t, 300.0, n, "a warmup gets its whole reply")
	assert.Zero(t, cached)
	assert.Less(t, took, time.Second, "a warmup runs on the compressed clock (model ~2.7 s)")

	t0 := time.Now()
	status, meas, _ := postJSON(t, url+"/v1/chat/completions", body)
	measured := time.Since(t0)
	require.Equal(t, http.StatusOK, status)
	n, cached = usageOf(t, meas)
	assert.Equal(t, 300.0, n)
	assert.Greater(t, cached, 39_000.0, "the warmup left its prompt in the prefix cache")
	assert.Greater(t, measured, 2*time.Second, "a measured request stays on the server's clock")

	res, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	text, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(text), "sweepflow_sim_warmup_requests_total 1\n")
	assert.True(t, strings.Contains(string(text), `sglang:e2e_request_latency_seconds_count{model_name="`+DefaultModel+`"} 1`),
		"only the measured request is in the histogram:\n%s", text)
}

func TestWarmupTimeScaleIsChecked(t *testing.T) {
	_, err := New(Config{WarmupTimeScale: 2})
	require.Error(t, err)
	s, err := New(Config{WarmupTimeScale: 1})
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Config().WarmupTimeScale)
}

// An accuracy-eval request (EvalHeader, which the GSM8K client sends) gets
// the same reply on the warmup clock and stays out of the histograms.
func TestEvalRequestsRunOnTheWarmupClock(t *testing.T) {
	_, url := startServer(t, Config{Deployment: mustDeployment(t, "TP8 agg"), Seed: 7})
	body := chatBody(words(40_000, "w"), 300, false)
	ev, took := postMarked(t, url+"/v1/chat/completions", EvalHeader, body)
	n, _ := usageOf(t, ev)
	assert.Equal(t, 300.0, n, "an eval request gets its whole reply")
	assert.Less(t, took, time.Second, "an eval request runs on the compressed clock (model ~2.7 s)")

	res, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	text, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(text), "sweepflow_sim_eval_requests_total 1\n")
	assert.Contains(t, string(text), `sglang:e2e_request_latency_seconds_count{model_name="`+DefaultModel+`"} 0`,
		"the eval request is not in the latency histogram")
}
