package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
)

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad rate", []string{"--request-rate", "fast"}, "--request-rate"},
		{"bad concurrency", []string{"--concurrency", "0"}, "--concurrency must be >= 1"},
		{"bad deployment", []string{"--deployment", "banana"}, "--deployment"},
		{"deployment and counts", []string{"--deployment", "TP8 agg", "--total-gpus", "8"}, "exclusive"},
		{"bad ratio", []string{"--random-range-ratio", "1.5"}, "--random-range-ratio"},
		{"zero osl", []string{"--osl", "0"}, "--isl and --osl must be >= 1"},
		{"missing trace", []string{"--trace", "/nonexistent/trace.jsonl"}, "no such file"},
		{"bad extra body", []string{"--extra-body", "[1]"}, "--extra-body"},
		{"unknown flag", []string{"--nope"}, "unknown flag: --nope"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := benchEndpoint(context.Background(), tc.args, &stdout, &stderr)
			var ee *exitError
			require.True(t, errors.As(err, &ee), "%v", err)
			assert.Equal(t, 2, ee.code)
			assert.Contains(t, ee.msg, tc.want)
		})
	}
}

// startBenchSim runs the simulator in-process on a real 127.0.0.1 port.
func startBenchSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addr <- a }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-done:
		t.Fatalf("simulator: %v", err)
	}
	return ""
}

// TestBenchAgainstSimulated2P1DAtC768 runs 768 streams against a simulated
// 2P1D deployment whose clock runs 4x slower than real time (20x under the
// race detector), so a 2-core host keeps up with every stream; bench
// converts the figures back to the engine's clock. Every figure must be
// positive and consistent, and the validity gate must accept the run: a
// client that fell behind, stamping chunks alike, makes bench fail instead
// of passing a TPOT of 0 (issue 24, found 1).
func TestBenchAgainstSimulated2P1DAtC768(t *testing.T) {
	t.Parallel()
	d, err := sim.ParseDeployment("2P1D DEP16/DEP32")
	require.NoError(t, err)
	scale := 4.0
	if raceOn {
		scale = 20
	}
	url := startBenchSim(t, sim.Config{Deployment: d, TimeScale: scale, AcceptanceLength: 3.77, Seed: 1})
	dir := t.TempDir()
	aggPath := filepath.Join(dir, "agg.json")
	reqPath := filepath.Join(dir, "requests.jsonl")
	var stdout, stderr bytes.Buffer
	err = benchEndpoint(context.Background(), []string{
		"--base-url", url, "--concurrency", "768", "--num-prompts", "1536", "--num-warmups", "768",
		"--isl", "256", "--osl", "32", "--random-range-ratio", "0.8", "--ignore-eos",
		"--deployment", "2P1D DEP16/DEP32", "--gpus-per-node", "4",
		"--output-json", aggPath, "--save-requests", reqPath, "--seed", "7",
	}, &stdout, &stderr)
	require.NoError(t, err, "the validity gate refused the run: %s", stderr.String())

	out := stdout.String()
	for _, want := range []string{
		"SIMULATED", "TTFT", "TPOT", "ITL (per chunk)", "ITL (per token)", "E2EL", "Interactivity",
		"mean", "median", "p90", "p99", "p99.9",
		"Per GPU (64 GPUs: 32 prefill, 32 decode)", "Errors: none", "concurrency 768", "Chunk gaps unseen: client lag ",
	} {
		assert.Contains(t, out, want)
	}

	var agg map[string]any
	require.NoError(t, json.Unmarshal(must(os.ReadFile(aggPath)), &agg))
	assert.Equal(t, true, agg["simulated"])
	assert.Equal(t, scale, agg["clock_scale"], "figures in the engine's time")
	assert.Equal(t, 768.0, agg["conc"])
	assert.Equal(t, 1536.0, agg["num_prompts"])
	assert.Equal(t, 1536.0, agg["completed"])
	assert.Equal(t, 32.0, agg["num_prefill_gpu"])
	assert.Equal(t, 32.0, agg["num_decode_gpu"])
	assert.Equal(t, 256.0, agg["isl"])
	assert.Equal(t, url, agg["base_url"])
	assert.Equal(t, sim.DefaultModel, agg["model"])
	for _, k := range []string{"mean_ttft", "median_ttft", "p99_ttft", "p99.9_ttft", "mean_tpot", "median_tpot", "p90_tpot",
		"mean_itl", "median_itl", "mean_itl_per_token", "median_e2el",
		"mean_intvty", "median_intvty", "p99_intvty", "tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu"} {
		v, ok := agg[k].(float64)
		require.True(t, ok, k)
		assert.Greater(t, v, 0.0, k)
	}
	// A TPOT that is a measured time between tokens, not a clock artefact:
	// above a millisecond of engine time (the model's decode steps at c768
	// take tens), so interactivity stays below 1000 tok/s/user.
	assert.Greater(t, agg["median_tpot"].(float64), 1e-3)
	assert.Less(t, agg["median_intvty"].(float64), 1000.0)
	assert.LessOrEqual(t, agg["client_lag"].(float64), point.MaxClientLag, "the client saw the chunks arrive")
	assert.InDelta(t, agg["total_token_throughput"].(float64)/64, agg["tput_per_gpu"], 1e-6)
	assert.InDelta(t, agg["output_throughput"].(float64)/32, agg["output_tput_per_gpu"], 1e-6)
	assert.InDelta(t, 1000/(agg["median_tpot"].(float64)*1000+1e-8), agg["median_intvty"], 1e-3)
	// AL 3.77: chunks carry several tokens, so per-chunk ITL is a few times
	// the per-token ITL.
	assert.Greater(t, agg["mean_itl"].(float64), 2*agg["mean_itl_per_token"].(float64))
	lines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(reqPath)))), "\n")
	require.Len(t, lines, 1536+768, "one record per request, warmups included")
	var last loadgen.RequestRecord
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.False(t, last.Warmup)
	assert.True(t, last.Success)
	assert.True(t, strings.HasPrefix(last.ResponseID, "chatcmpl-sim-"))
	assert.NotEmpty(t, last.ChunkNs)
	assert.Len(t, last.ChunkTokens, len(last.ChunkNs))
	assert.Equal(t, last.RequestedPromptTokens, last.PromptTokens)
}

func TestBenchJSONAndTraceReplay(t *testing.T) {
	t.Parallel()
	// 0.05: the model's decode steps stay above a millisecond of wall time,
	// so a request's chunks arrive apart and its TPOT is measured (at 0.001
	// the simulator writes a request's chunks together: TPOT 0, refused).
	url := startBenchSim(t, sim.Config{TimeScale: 0.05, Seed: 2})
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	var gen bytes.Buffer
	require.Equal(t, 0, runIO([]string{"bench", "trace-gen", "--traces", "3", "--calls", "4", "--system-tokens", "256", "--tool-tokens", "256",
		"--min-out", "8", "--max-out", "16", "--max-context", "4000", "--subagent-every", "0", "--out", trace}, io.Discard, &gen), gen.String())
	traces, err := loadgen.LoadTrace(trace)
	require.NoError(t, err)
	require.Len(t, traces, 3)

	var stdout, stderr bytes.Buffer
	err = benchEndpoint(context.Background(), []string{
		"--base-url", url, "--concurrency", "3", "--trace", trace, "--time-scale", "0.001",
		"--trajectory-start-min", "0", "--trajectory-start-max", "0",
		"--total-gpus", "8", "--json", "--output-dir", filepath.Join(dir, "out"),
	}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var agg loadgen.Aggregate
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &agg), "--json prints the aggregate")
	assert.Equal(t, loadgen.ScenarioAgentic, agg.ScenarioType)
	assert.Equal(t, 12, agg.Completed, "three lanes play their trace from the beginning")
	assert.Zero(t, agg.NumWarmups, "no warmup from the beginning")
	require.NotNil(t, agg.RequestMetrics)
	assert.Greater(t, agg.RequestMetrics.Cache.ServerCacheHitRate, 0.0)
	assert.Len(t, agg.PerTurn, 4)
	assert.FileExists(t, filepath.Join(dir, "out", "aggregate.json"))
	assert.FileExists(t, filepath.Join(dir, "out", "requests.jsonl"))
}

func TestBenchTraceFixture(t *testing.T) {
	t.Parallel()
	url := startBenchSim(t, sim.Config{TimeScale: 0.001, Seed: 4})
	var stdout, stderr bytes.Buffer
	err := benchEndpoint(context.Background(), []string{
		"--base-url", url, "--concurrency", "2", "--trace", "../loadgen/testdata/agentx-small.jsonl",
		"--time-scale", "0.001", "--total-gpus", "8", "--json",
	}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var agg loadgen.Aggregate
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &agg))
	assert.Equal(t, 2, agg.NumWarmups, "one warmup call per lane by default")
	assert.Positive(t, agg.Completed)
	assert.Zero(t, agg.Failed)
	assert.Positive(t, agg.TotalCachedTokens, "warmup primed each lane's context")

	err = benchEndpoint(context.Background(), []string{"--base-url", url, "--trace", "../loadgen/testdata/nope.jsonl"}, &stdout, &stderr)
	require.Error(t, err)
}

func TestBenchGateFailureExitsOne(t *testing.T) {
	t.Parallel()
	url := startBenchSim(t, sim.Config{FixedTTFT: 1, FixedITL: 1, Faults: sim.Faults{ErrorEvery: 2, ErrorStatus: 503}})
	var stdout, stderr bytes.Buffer
	err := benchEndpoint(context.Background(), []string{"--base-url", url, "--concurrency", "2", "--num-prompts", "10", "--num-warmups", "0", "--isl", "8", "--osl", "4"}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gate failed")
	assert.Contains(t, stdout.String(), "Errors: 5 (http=5)")
}

// TestBenchRefusesHeldBackStream: a server (or a proxy) that delivers each
// stream in one piece gives every chunk the same time. bench prints the
// figures but exits 1 with the validity gate's reason, the one the perf
// stage and `starter status` show (issue 24, found 1).
func TestBenchRefusesHeldBackStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			MaxTokens int `json:"max_tokens"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		var b strings.Builder
		for range req.MaxTokens {
			b.WriteString(`data: {"id":"x","choices":[{"index":0,"delta":{"content":" tok"}}]}` + "\n\n")
		}
		fmt.Fprintf(&b, `data: {"id":"x","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
			len(strings.Fields(req.Messages[0].Content)), req.MaxTokens)
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	var stdout, stderr bytes.Buffer
	err := benchEndpoint(context.Background(), []string{"--base-url", srv.URL, "--model", "m", "--clock-scale", "1", "--concurrency", "2",
		"--num-prompts", "6", "--num-warmups", "0", "--isl", "16", "--osl", "8"}, &stdout, &stderr)
	require.Error(t, err)
	msg := err.Error()
	assert.Equal(t, "invalid perf result: tpot: median 0 ms is at or below the clock resolution (0.001 ms); evidence: client loadgen, "+
		"6 completed, 48 output tokens, ", msg[:strings.Index(msg, "window")])
	assert.Contains(t, msg, "client lag 100.0%")
	assert.Contains(t, stdout.String(), "TPOT", "the figures are still printed")
	assert.Contains(t, stdout.String(), "Chunk gaps unseen: client lag 100.0% (bound 25%)\n", "a server that does not say it caught up")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
