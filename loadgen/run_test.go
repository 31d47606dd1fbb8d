package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
)

func TestRunClosedLoop(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 5 * time.Millisecond, itl: time.Millisecond})
	res, err := Run(context.Background(), Options{
		BaseURL: srv.URL(), Concurrency: 4, NumPrompts: 20, NumWarmups: 3,
		ISL: 40, OSL: 8, RandomRangeRatio: 0.5, IgnoreEOS: true, Seed: 7, TotalGPUs: 8,
		Extra: map[string]any{"temperature": 0},
	})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	require.Len(t, res.Requests, 20)
	require.Len(t, res.Warmups, 3)
	a := res.Aggregate
	assert.Equal(t, "fake-model", a.Model, "model discovered from /v1/models")
	assert.True(t, a.Simulated)
	assert.Equal(t, 20, a.Completed)
	assert.Equal(t, 20, a.NumPrompts)
	assert.Equal(t, 3, a.NumWarmups)
	assert.LessOrEqual(t, srv.maxIn.Load(), int64(4), "never more than concurrency in flight")
	assert.LessOrEqual(t, srv.connCount(), 4, "connections are reused and capped at concurrency")
	assert.Len(t, srv.requestBodies(), 23)

	for i, r := range res.Requests {
		assert.Equal(t, i, r.Index)
		assert.True(t, r.Success, r.Error)
		assert.Equal(t, r.RequestedPromptTokens, r.PromptTokens, "one word = one token for the fake server")
		assert.GreaterOrEqual(t, r.RequestedPromptTokens, 20)
		assert.LessOrEqual(t, r.RequestedPromptTokens, 40)
		assert.Equal(t, r.MaxTokens, r.CompletionTokens)
		assert.Len(t, r.ChunkNs, r.MaxTokens)
		assert.GreaterOrEqual(t, r.TTFT, 0.005)
		assert.True(t, strings.HasPrefix(r.ResponseID, "chatcmpl-test-"))
		assert.LessOrEqual(t, r.DispatchNs, r.SendNs)
		assert.Less(t, r.SendNs, r.FirstTokenNs)
		assert.LessOrEqual(t, r.LastTokenNs, r.EndNs)
	}
	// The server sleeps 1 ms between chunks, so no TPOT is below 1 ms: 0
	// (chunks stamped alike) fails. A sleep overshoots by about 0.3 ms alone
	// and up to 7 ms on a 2-core host shared with other test runs; 20 ms
	// still fails a figure in the wrong unit (milliseconds read as seconds:
	// 1000x).
	assert.GreaterOrEqual(t, a.MedianTPOT, 0.001)
	assert.Less(t, a.MedianTPOT, 0.020)
	assert.Greater(t, a.MeanIntvty, 0.0)
	assert.InDelta(t, 1000/(a.MeanTPOT*1000), a.MeanIntvty, 1e-3)
	assert.InDelta(t, a.TotalTokenThroughput/8, a.TputPerGPU, 1e-9)

	for _, b := range srv.requestBodies() {
		assert.Equal(t, true, b["stream"])
		assert.Equal(t, map[string]any{"include_usage": true}, b["stream_options"])
		assert.Equal(t, true, b["ignore_eos"])
		assert.Equal(t, 0.0, b["temperature"])
		assert.Equal(t, "fake-model", b["model"])
	}
}

func ptr[T any](v T) *T { return &v }

// TestClientLagUnseenGaps: a stream held back and delivered at once (a
// buffering proxy, a starved client) arrives in one read, so every chunk
// but the first is unseen: client_lag 1, TPOT and ITL 0, and the validity
// gate refuses the run. The same server streaming normally is accepted
// (issue 24, found 1).
func TestClientLagUnseenGaps(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: time.Millisecond, itl: time.Millisecond,
		fault: func(int, map[string]any) string { return "buffered" }})
	o := Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 6, ISL: 16, OSL: 8, IgnoreEOS: true}
	res, err := Run(context.Background(), o)
	require.NoError(t, err)
	require.NoError(t, res.Gate(), "the error-rate gate alone lets it through")
	a := res.Aggregate
	for _, r := range res.Requests {
		require.Len(t, r.ChunkNs, 8)
		assert.Equal(t, 7, r.UnseenGaps)
		assert.Equal(t, r.ChunkNs[0], r.ChunkNs[7], "one read stamps them all")
	}
	assert.Equal(t, 6*7, a.ChunkGaps)
	assert.Equal(t, 6*7, a.UnseenGaps)
	assert.Equal(t, 1.0, a.ClientLag)
	assert.Zero(t, a.MedianTPOT)
	assert.Greater(t, a.MedianIntvty, 1e10, "the 1e11 interactivity of issue 24")
	err = point.ValidatePerf(point.PerfSummary{TPOTMedianMs: a.MedianTPOT * 1000, Evidence: ptr(a.Evidence())}, o.Plan())
	var ir *point.InvalidResult
	require.ErrorAs(t, err, &ir)
	assert.Equal(t, "tpot", ir.Figure)
}

// TestClientLagLessServerCatchUp: chunks a server wrote two at a time come
// in one read, so half the gaps are unseen (4 of 8 per stream). From a
// server that does not explain them that is the client's lag and the gate
// refuses it; the simulator says which gaps it wrote back to back because
// it was behind (catch_up_gaps), and those are its lag, not the client's:
// client_lag 0, server_lag 0.5, and the gate passes with a note. This is
// the loaded 2-core host of CI's failed run (c1024: 33 % unseen, most of it
// the simulator's catch-up).
func TestClientLagLessServerCatchUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode      string
		serverLag float64
		refused   bool
	}{
		{"pairs", 0, true},
		{"pairs_reported", 0.5, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			// 20 ms between pairs: a client would have to stall that long
			// to miss one of those gaps as well.
			srv := newFakeServer(t, &fakeServer{ttft: time.Millisecond, itl: 20 * time.Millisecond,
				fault: func(int, map[string]any) string { return tc.mode }})
			o := Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 6, ISL: 16, OSL: 9, IgnoreEOS: true}
			res, err := Run(context.Background(), o)
			require.NoError(t, err)
			a := res.Aggregate
			for _, r := range res.Requests {
				require.Len(t, r.ChunkNs, 9)
				assert.GreaterOrEqual(t, r.UnseenGaps, 4, "chunks 2, 4, 6 and 8 came in the read of the chunk before them")
			}
			require.Equal(t, 6*8, a.ChunkGaps)
			assert.InDelta(t, tc.serverLag, a.ServerLag, 1e-9, "the server's own count")
			s := a.Summary()
			err = point.ValidatePerf(s, o.Plan())
			if tc.refused {
				assert.GreaterOrEqual(t, a.ClientLag, 0.5, "unexplained, the pairs are the client's lag")
				var ir *point.InvalidResult
				require.ErrorAs(t, err, &ir)
				assert.Equal(t, "client_lag", ir.Figure)
				return
			}
			assert.Less(t, a.ClientLag, point.MaxClientLag, "explained, they are not")
			assert.InDelta(t, float64(a.UnseenGaps-a.CatchUpGaps)/float64(a.ChunkGaps), a.ClientLag, 1e-9)
			require.NoError(t, err)
			assert.Contains(t, s.Evidence.Waived, "client_lag: 50.0% of the chunk gaps the server wrote back to back, behind its own schedule, are not counted against the client")
			assert.Contains(t, s.Evidence.Line(), ", server catch-up 50.0%")
		})
	}
}

func TestRunIsDeterministicPerSeed(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{})
	run := func(seed int64) []RequestRecord {
		res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 3, NumPrompts: 9, ISL: 50, OSL: 5, RandomRangeRatio: 0.2, Seed: seed})
		require.NoError(t, err)
		return res.Requests
	}
	a, b, c := run(1), run(1), run(2)
	for i := range a {
		assert.Equal(t, a[i].RequestedPromptTokens, b[i].RequestedPromptTokens)
		assert.Equal(t, a[i].MaxTokens, b[i].MaxTokens)
	}
	differ := false
	for i := range a {
		differ = differ || a[i].RequestedPromptTokens != c[i].RequestedPromptTokens
	}
	assert.True(t, differ, "another seed draws other lengths")
}

func TestRunFailuresAreCountedAndExcluded(t *testing.T) {
	t.Parallel()
	modes := map[int]string{2: "http500", 4: "stream_error", 6: "empty", 8: "no_usage", 10: "comments"}
	srv := newFakeServer(t, &fakeServer{fault: func(n int, _ map[string]any) string { return modes[n] }})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, NumPrompts: 12, ISL: 10, OSL: 4})
	require.NoError(t, err)
	a := res.Aggregate
	assert.Equal(t, 8, a.Completed, "the comment-only variation still succeeds")
	assert.Equal(t, 4, a.Failed)
	assert.Equal(t, map[string]int{ErrKindHTTP: 1, ErrKindStreamError: 1, ErrKindEmptyStream: 1, ErrKindMissingUsage: 1}, a.ErrorCategories)
	assert.Equal(t, 503, res.Requests[1].Status)
	assert.Contains(t, res.Requests[1].Error, "HTTP 503")
	assert.Contains(t, res.Requests[3].Error, "engine died")
	assert.Equal(t, int64(8*4), a.TotalOutputTokens, "failed requests add no tokens")
	err = res.Gate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "33.3%")
}

func TestRunTransportErrors(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Options{BaseURL: "http://127.0.0.1:1", Model: "m", Concurrency: 2, NumPrompts: 3, ISL: 4, OSL: 2})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Aggregate.Failed)
	assert.Equal(t, map[string]int{ErrKindTransport: 3}, res.Aggregate.ErrorCategories)
	assert.ErrorContains(t, res.Gate(), "no request succeeded")
}

func TestRunRequestTimeout(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 300 * time.Millisecond})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 2, ISL: 4, OSL: 2, RequestTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{ErrKindTimeout: 2}, res.Aggregate.ErrorCategories)
}

func TestRunOpenLoopAbsoluteSchedule(t *testing.T) {
	t.Parallel()
	// One slot and a 20 ms server against 200 req/s: requests queue in the
	// client, but their scheduled dispatch times stay on the absolute
	// schedule and the wait shows up as client queue time, not TTFT.
	srv := newFakeServer(t, &fakeServer{ttft: 20 * time.Millisecond})
	const rate, n, seed = 200.0, 12, 3
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, NumPrompts: n, ISL: 4, OSL: 1, RequestRate: rate, Seed: seed})
	require.NoError(t, err)
	require.Len(t, res.Requests, n)
	rng := rand.New(rand.NewPCG(seed, 0xa771fa1))
	var offset float64
	for i, r := range res.Requests {
		if i > 0 {
			offset += rng.ExpFloat64() / rate
		}
		assert.InDelta(t, offset*1e9, float64(r.DispatchNs), 1, "request %d dispatch", i)
	}
	last := res.Requests[n-1]
	assert.Greater(t, last.ClientQueue, 0.1, "12 x 20 ms of service against ~60 ms of schedule")
	assert.Less(t, last.TTFT, 0.1, "queueing is not counted in TTFT")
	assert.Greater(t, res.Aggregate.P99ClientQueue, 0.1)
}

func TestGammaSampleMoments(t *testing.T) {
	t.Parallel()
	for _, shape := range []float64{0.5, 1, 3} {
		rng := rand.New(rand.NewPCG(9, uint64(shape*10)))
		const n = 200_000
		scale := 1 / (10 * shape) // rate 10/s
		var sum, sq float64
		for i := 0; i < n; i++ {
			x := gammaSample(rng, shape, scale)
			sum += x
			sq += x * x
		}
		mean := sum / n
		variance := sq/n - mean*mean
		assert.InDelta(t, 0.1, mean, 0.002, "shape %g mean keeps the rate", shape)
		assert.InDelta(t, shape*scale*scale, variance, 0.05*shape*scale*scale+1e-4, "shape %g variance", shape)
	}
}

func TestRunDurationStopsDispatch(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 20 * time.Millisecond})
	start := time.Now()
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, ISL: 4, OSL: 2, Duration: 150 * time.Millisecond})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	require.NotEmpty(t, res.Requests)
	assert.Less(t, len(res.Requests), 40)
	for _, r := range res.Requests {
		assert.Less(t, r.DispatchNs, (150 * time.Millisecond).Nanoseconds())
		assert.True(t, r.Success, "in-flight requests finish after the deadline")
	}
	assert.InDelta(t, 0.15, res.Aggregate.DurationLimit, 1e-9)
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 5 * time.Millisecond, itl: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 100, ISL: 4, OSL: 100})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	assert.Less(t, time.Since(start), 2*time.Second, "cancellation stops promptly")
	require.NotNil(t, res)
	assert.Equal(t, res.Aggregate.Failed, res.Aggregate.ErrorCategories[ErrKindCanceled])
	assert.Positive(t, res.Aggregate.Failed)
}

func TestRunCompletionsEndpointAndMultiTokenChunks(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{completions: true, tokensPerChunk: 3, itl: 3 * time.Millisecond})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Endpoint: "/v1/completions", Model: "m", Concurrency: 2, NumPrompts: 4, ISL: 10, OSL: 9})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	for _, r := range res.Requests {
		assert.Equal(t, []int32{3, 3, 3}, r.ChunkTokens)
		assert.Equal(t, "text", r.TokenCountSource)
	}
	for _, b := range srv.requestBodies() {
		assert.IsType(t, "", b["prompt"])
		assert.NotContains(t, b, "messages")
	}
	a := res.Aggregate
	// Each 3 ms chunk gap carried 3 tokens: per-token ITL is a third of it.
	assert.InDelta(t, a.MedianITL/3, a.MedianITLPerToken, 1e-12)
	assert.Greater(t, a.MedianITL, 0.0025)
}

func TestRunContinuousUsageCounts(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{continuousUsage: true, tokensPerChunk: 2})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, NumPrompts: 2, ISL: 10, OSL: 5})
	require.NoError(t, err)
	for _, r := range res.Requests {
		assert.Equal(t, "usage", r.TokenCountSource)
		assert.Equal(t, []int32{2, 2, 1}, r.ChunkTokens)
	}
}

func TestRunValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no url", Options{Concurrency: 1, ISL: 1, OSL: 1}, "base URL is required"},
		{"bad scheme", Options{BaseURL: "localhost:8000", Concurrency: 1, ISL: 1, OSL: 1}, "must start with http://"},
		{"no concurrency", Options{BaseURL: "http://x", ISL: 1, OSL: 1}, "concurrency must be >= 1"},
		{"no lengths", Options{BaseURL: "http://x", Concurrency: 1}, "isl and osl must be > 0"},
		{"bad endpoint", Options{BaseURL: "http://x", Endpoint: "/generate", Concurrency: 1, ISL: 1, OSL: 1}, "endpoint"},
		{"bad ratio", Options{BaseURL: "http://x", Concurrency: 1, ISL: 1, OSL: 1, RandomRangeRatio: 2}, "random range ratio"},
		{"rate with trace", Options{BaseURL: "http://x", Concurrency: 1, RequestRate: 5, Trace: GenerateTrace(1, 1, TraceShape{})}, "request rate cannot be combined"},
		{"inconsistent GPU counts", Options{BaseURL: "http://x", Concurrency: 1, ISL: 1, OSL: 1, PrefillGPUs: 16, DecodeGPUs: 32, TotalGPUs: 64},
			"prefill GPUs 16 + decode GPUs 32 != total GPUs 64"},
		{"reserved extra", Options{BaseURL: "http://x", Model: "m", Concurrency: 1, ISL: 1, OSL: 1, Extra: map[string]any{"stream": false}}, `"stream" is not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteOutputs(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 4, NumWarmups: 1, ISL: 6, OSL: 3})
	require.NoError(t, err)
	dir := t.TempDir()
	aggPath := filepath.Join(dir, "out", "agg.json")
	reqPath := filepath.Join(dir, "out", "requests.jsonl")
	require.NoError(t, res.WriteAggregateJSON(aggPath))
	require.NoError(t, res.WriteRequestsJSONL(reqPath))

	var agg map[string]any
	require.NoError(t, json.Unmarshal(must(os.ReadFile(aggPath)), &agg))
	assert.Equal(t, true, agg["simulated"])
	assert.Equal(t, "inf", agg["request_rate"])
	assert.Equal(t, 4.0, agg["num_prompts"])
	assert.Equal(t, srv.URL(), agg["base_url"])
	assert.NotEmpty(t, agg["started_at"])

	lines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(reqPath)))), "\n")
	require.Len(t, lines, 5)
	var first, rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, true, first["warmup"])
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &rec))
	for _, k := range []string{"dispatch_ns", "send_ns", "first_token_ns", "end_ns", "chunk_ns", "chunk_tokens", "status", "prompt_tokens", "completion_tokens", "response_id"} {
		assert.Contains(t, rec, k)
	}
	assert.Len(t, rec["chunk_ns"], 3)
	info, err := os.Stat(aggPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())
	assert.False(t, math.IsNaN(res.Aggregate.MeanTTFT))
}

// TestRunCutStreams: a chaos run's cut (CutStreamsAfter) fails every stream
// that starts after it as a dropped connection would, and the gate fails
// the run; the streams before it are whole.
func TestRunCutStreams(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 5 * time.Millisecond, itl: 2 * time.Millisecond})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, NumPrompts: 40, ISL: 10, OSL: 8,
		IgnoreEOS: true, CutStreamsAfter: 60 * time.Millisecond})
	require.NoError(t, err)
	a := res.Aggregate
	assert.Greater(t, a.Completed, 0, "streams before the cut are whole")
	assert.Greater(t, a.Failed, 0, "streams after it are cut")
	assert.Equal(t, map[string]int{ErrKindTransport: a.Failed}, a.ErrorCategories)
	for _, r := range res.Requests {
		if !r.Success {
			assert.Contains(t, r.Error, "stream cut by a chaos run")
		}
	}
	assert.ErrorContains(t, res.Gate(), "exceeds 10%")
}
