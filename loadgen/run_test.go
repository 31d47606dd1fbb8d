package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
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

// BenchmarkClientCapacity drives the simulator's fixed-latency fast mode over
// real TCP on 127.0.0.1 (simulator in-process) with one token per chunk and
// reports what the client sustained and how closely its timestamps follow the
// simulator's own send times:
//
//	go test ./loadgen -run '^$' -bench ClientCapacity -benchtime 1x
//
// chunks/s is token chunks received per second of run time. TTFT error is
// the client's TTFT minus the reference (client send to the simulator's
// flush of the first chunk), ITL error the client's chunk gap minus the
// simulator's; *_mean_err_% compares the means, *_p99_abs_ms is the 99th
// percentile of the absolute per-request (TTFT) or per-gap (ITL) error.
// This benchmark keeps the simulator in the test process, so the two share
// one Go runtime and the timing errors include the simulator's scheduling;
// "starter bench capacity" is the reference measurement: it runs the
// simulator as a separate process (pinned apart from the client for the
// accuracy point) and prints a table.
func BenchmarkClientCapacity(b *testing.B) {
	for _, tc := range []struct {
		conc, osl int
		itl       time.Duration
	}{
		{1280, 200, 10 * time.Millisecond},
		{256, 200, 20 * time.Millisecond},
	} {
		b.Run(fmt.Sprintf("c%d", tc.conc), func(b *testing.B) {
			old := debug.SetGCPercent(400)
			defer debug.SetGCPercent(old)
			s, err := sim.New(sim.Config{FixedTTFT: 50 * time.Millisecond, FixedITL: tc.itl, TimelineCapacity: 4 * tc.conc * 4})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := make(chan string, 1)
			go func() { _ = s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addr <- a }) }()
			url := "http://" + <-addr
			lookup := func(id string) (ServerTimeline, bool) {
				tl, ok := s.Timeline(id)
				return ServerTimeline{ArrivalNs: tl.ArrivalNs, ChunkNs: tl.ChunkNs, ChunkTokens: tl.ChunkTokens}, ok
			}
			var chunks int
			var secs float64
			var last TimestampComparison
			for b.Loop() {
				res, err := Run(ctx, Options{
					BaseURL: url, Concurrency: tc.conc, NumPrompts: 2 * tc.conc, NumWarmups: tc.conc,
					ISL: 128, OSL: tc.osl, RandomRangeRatio: 0.8, IgnoreEOS: true, Seed: 1,
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := res.Gate(); err != nil {
					b.Fatal(err)
				}
				for i := range res.Requests {
					chunks += len(res.Requests[i].ChunkNs)
				}
				secs += res.Aggregate.Duration
				last = CompareTimelines(res, lookup)
			}
			b.ReportMetric(float64(chunks)/secs, "chunks/s")
			b.ReportMetric(100*abs(last.ClientMeanTTFT-last.RefMeanTTFT)/last.RefMeanTTFT, "ttft_mean_err_%")
			b.ReportMetric(100*abs(last.ClientMeanITL-last.ServerMeanITL)/last.ServerMeanITL, "itl_mean_err_%")
			b.ReportMetric(last.TTFTAbsErr.P99*1e3, "ttft_p99_abs_ms")
			b.ReportMetric(last.ITLAbsErr.P99*1e3, "itl_p99_abs_ms")
			b.ReportMetric(last.ITLAbsErr.Median*1e3, "itl_p50_abs_ms")
			b.ReportMetric(last.ChunkLag.P99*1e3, "chunk_lag_p99_ms")
		})
	}
}

// fakeServer is a small OpenAI-compatible streaming server for tests that
// must not depend on the simulator: fixed TTFT/ITL, k tokens per chunk, and
// injectable faults.
type fakeServer struct {
	ttft, itl       time.Duration
	tokensPerChunk  int
	continuousUsage bool
	completions     bool // serve /v1/completions shape
	// fault, if set, picks a behaviour for the n-th request (1-based):
	// "" normal, "http500", "stream_error", "empty", "no_usage", "comments",
	// "buffered" (nothing flushed before the stream ends, as a buffering
	// proxy delivers it), "pairs" (token chunks written two at a time, the
	// second right behind the first: a server behind its schedule),
	// "pairs_reported" (the same, and the usage chunk says so in
	// catch_up_gaps, as the simulator does).
	fault func(n int, body map[string]any) string

	srv      *httptest.Server
	n        atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	warmups  atomic.Int64 // requests marked with WarmupHeader
	mu       sync.Mutex
	bodies   []map[string]any
	raw      [][]byte // request bodies as received, in arrival order
	conns    map[string]bool
}

func newFakeServer(t *testing.T, f *fakeServer) *fakeServer {
	t.Helper()
	if f.tokensPerChunk == 0 {
		f.tokensPerChunk = 1
	}
	f.conns = map[string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("/v1/chat/completions", f.handle)
	mux.HandleFunc("/v1/completions", f.handle)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns[c.RemoteAddr().String()] = true
			f.mu.Unlock()
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) URL() string { return f.srv.URL }

func (f *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := int(f.n.Add(1))
	if r.Header.Get(WarmupHeader) != "" {
		f.warmups.Add(1)
	}
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxIn.Load()
		if cur <= m || f.maxIn.CompareAndSwap(m, cur) {
			break
		}
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.raw = append(f.raw, raw)
	f.mu.Unlock()
	mode := ""
	if f.fault != nil {
		mode = f.fault(n, body)
	}
	if mode == "http500" {
		http.Error(w, `{"error":{"message":"overloaded"}}`, 503)
		return
	}
	prompt := 0
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			prompt += CountTokens([]byte(m.(map[string]any)["content"].(string)))
		}
	} else if p, ok := body["prompt"].(string); ok {
		prompt = CountTokens([]byte(p))
	}
	maxTokens := int(body["max_tokens"].(float64))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set(SimulatedHeader, "true")
	fl := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-test-%d", n)
	pairs := mode == "pairs" || mode == "pairs_reported"
	held, catchUps := false, 0 // pairs: a token chunk written and not flushed
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		if mode != "buffered" && !held {
			fl.Flush()
		}
	}
	if mode == "comments" {
		fmt.Fprint(w, ": ping\n\n")
	}
	if !f.completions {
		send(fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, id))
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if !sleep(f.ttft) {
		return
	}
	if mode == "empty" {
		send("[DONE]")
		return
	}
	done := 0
	for done < maxTokens {
		if done > 0 && held {
			catchUps++
		} else if done > 0 && !sleep(f.itl) {
			return
		}
		held = pairs && !held
		k := min(f.tokensPerChunk, maxTokens-done)
		text := strings.Repeat(" tok", k)
		done += k
		usage := "null"
		if f.continuousUsage {
			usage = fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d}`, prompt, done)
		}
		if f.completions {
			send(fmt.Sprintf(`{"id":%q,"object":"text_completion","choices":[{"index":0,"text":%q}],"usage":%s}`, id, text, usage))
		} else {
			send(fmt.Sprintf(`{"id":%q,"choices":[{"index":0,"delta":{"content":%q}}],"usage":%s}`, id, text, usage))
		}
		if mode == "stream_error" && done >= 2 {
			send(`{"error":{"message":"engine died","type":"InternalServerError","code":504}}`)
			send("[DONE]")
			return
		}
	}
	held = false
	send(fmt.Sprintf(`{"id":%q,"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, id))
	reported := ""
	if mode == "pairs_reported" {
		reported = fmt.Sprintf(`,"catch_up_gaps":%d`, catchUps)
	}
	if mode != "no_usage" {
		send(fmt.Sprintf(`{"id":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}%s}`, id, prompt, done, reported))
	}
	send("[DONE]")
}

func (f *fakeServer) requestBodies() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func (f *fakeServer) rawBodies() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.raw...)
}

func (f *fakeServer) connCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// startSim serves the simulator on a real 127.0.0.1 listener.
func startSim(t *testing.T, cfg sim.Config) (*sim.Server, string) {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func TestAgainstSimulatorFastMode(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, sim.Config{FixedTTFT: 20 * time.Millisecond, FixedITL: 2 * time.Millisecond, Seed: 1})
	res, err := Run(context.Background(), Options{BaseURL: url, Concurrency: 8, NumPrompts: 32, NumWarmups: 8, ISL: 64, OSL: 20, RandomRangeRatio: 0.8, IgnoreEOS: true, Seed: 3})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	a := res.Aggregate
	assert.True(t, a.Simulated, "the simulator marks its responses")
	assert.Equal(t, sim.DefaultModel, a.Model)
	assert.Equal(t, a.TotalRequestedInputTokens, a.TotalInputTokens, "requested == server-reported prompt tokens")
	// The simulator never sends early, and keeps its chunks on an absolute
	// schedule (a late chunk is caught up, not shifted): TTFT is the 20 ms
	// model plus scheduling delay (about 1 ms alone; 20 ms bounds it on a
	// 2-core host shared with other test runs), and a request's TPOT, first
	// to last chunk, is the 2 ms model within 25 % (2.00-2.03 ms measured
	// alone; a late first or last chunk moves it over 19 gaps). A TPOT of 0
	// or a figure in the wrong unit fails.
	assert.GreaterOrEqual(t, a.MedianTTFT, 0.020)
	assert.Less(t, a.MedianTTFT, 0.040)
	assert.InEpsilon(t, 0.002, a.MedianTPOT, 0.25)

	// Client timestamps against the simulator's own flush times.
	cmp := CompareTimelines(res, func(id string) (ServerTimeline, bool) {
		tl, ok := s.Timeline(id)
		return ServerTimeline{ArrivalNs: tl.ArrivalNs, ChunkNs: tl.ChunkNs, ChunkTokens: tl.ChunkTokens}, ok
	})
	assert.Equal(t, len(res.Requests), cmp.Matched)
	assert.Zero(t, cmp.ChunkCountMismatch, "the client saw every chunk the server sent")
	assert.Zero(t, cmp.TokenMismatch, "per-chunk token counts equal the server's")
	assert.Less(t, cmp.ChunkLag.Median, 10e-3, "client read time is close to the server's flush")
	assert.Greater(t, cmp.ChunkLag.Median, -1e-3, "the client cannot see a chunk long before it was sent")
}

func TestAgainstSimulatorSpeculativeChunks(t *testing.T) {
	t.Parallel()
	d, err := sim.ParseDeployment("2P1D DEP16/DEP32")
	require.NoError(t, err)
	s, url := startSim(t, sim.Config{Deployment: d, TimeScale: 0.01, AcceptanceLength: 3.77, Seed: 2})
	res, err := Run(context.Background(), Options{
		BaseURL: url, Concurrency: 16, NumPrompts: 32, ISL: 512, OSL: 64, IgnoreEOS: true,
		PrefillGPUs: d.PrefillGPUs(), DecodeGPUs: d.DecodeGPUs(),
	})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	a := res.Aggregate
	assert.Equal(t, 64, a.NumGPU)
	assert.Greater(t, a.MeanChunksPerRequest, 64/4.8)
	assert.Less(t, a.MeanChunksPerRequest, 64/3.0, "about AL tokens per chunk")
	// Chunks carry ~3.77 tokens, so per-chunk ITL is ~AL x per-token ITL.
	ratio := a.MeanITL / a.MeanITLPerToken
	assert.InDelta(t, 3.77, ratio, 0.8)
	for _, r := range res.Requests {
		tl, ok := s.Timeline(r.ResponseID)
		require.True(t, ok, r.ResponseID)
		got := make([]int, len(r.ChunkTokens))
		for i, k := range r.ChunkTokens {
			got[i] = int(k)
		}
		assert.Equal(t, tl.ChunkTokens, got, "tokens per chunk counted from text match the server")
		assert.Equal(t, "text", r.TokenCountSource)
	}
	assert.Zero(t, a.TokenCountsRescaled)
	assert.InDelta(t, a.OutputThroughput/32, a.OutputTputPerGPU, 1e-9)
	assert.InDelta(t, a.InputThroughput/32, a.InputTputPerGPU, 1e-9)
	assert.InDelta(t, a.TotalTokenThroughput/64, a.TputPerGPU, 1e-9)
}

func TestAgainstSimulatorAgenticCacheHits(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, sim.Config{TimeScale: 0.001, Seed: 3})
	trace := GenerateTrace(5, 3, TraceShape{MainCalls: 6, SystemTokens: 512, ToolTokens: 512, FirstUserTokens: 1024,
		ToolResultTokens: 256, MinOut: 16, MaxOut: 32, SubagentEvery: -1})
	res, err := Run(context.Background(), Options{BaseURL: url, Concurrency: 3, Trace: trace, TimeScale: 0.001, TotalGPUs: 64, NumWarmups: 1})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	a := res.Aggregate
	assert.Equal(t, a.TotalRequestedInputTokens, a.TotalInputTokens)
	for _, r := range res.Requests {
		assert.Greater(t, r.CachedTokens, 0, "the session's context, primed by warmup, hits the server's prefix cache (turn %d)", r.Turn)
	}
	rm := a.RequestMetrics
	require.NotNil(t, rm)
	assert.Greater(t, rm.Cache.ServerCacheHitRate, 0.2)
	assert.InDelta(t, rm.Cache.TheoreticalCacheHitRate, rm.Cache.ServerCacheHitRate, 0.15,
		"the server caches about what the workload makes reusable")
}

func TestAgainstSimulatorFaults(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, sim.Config{FixedTTFT: time.Millisecond, FixedITL: time.Millisecond,
		Faults: sim.Faults{MidStreamErrorEvery: 4, ErrorBurstStart: 2, ErrorBurstLen: 2, ErrorStatus: 429}})
	res, err := Run(context.Background(), Options{BaseURL: url, Concurrency: 1, NumPrompts: 12, ISL: 16, OSL: 8})
	require.NoError(t, err)
	a := res.Aggregate
	assert.Equal(t, 2, a.ErrorCategories[ErrKindHTTP], "the 429 burst")
	assert.Positive(t, a.ErrorCategories[ErrKindStreamError], "error payloads inside 200 streams are failures")
	assert.Equal(t, a.Failed, a.ErrorCategories[ErrKindHTTP]+a.ErrorCategories[ErrKindStreamError])
	for _, r := range res.Requests {
		if r.ErrorKind == ErrKindHTTP {
			assert.Equal(t, 429, r.Status)
		}
	}
	assert.ErrorContains(t, res.Gate(), "gate failed")
}

// TestClockScaleReportsEngineTime runs the simulator five times faster than
// real time: with ClockScale the client reports the model's own latencies,
// without it the compressed wall-clock ones.
func TestClockScaleReportsEngineTime(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, sim.Config{FixedTTFT: 100 * time.Millisecond, FixedITL: 20 * time.Millisecond, TimeScale: 0.2, Seed: 1})
	opts := Options{BaseURL: url, Concurrency: 4, NumPrompts: 12, ISL: 32, OSL: 10, RandomRangeRatio: 1, IgnoreEOS: true, Seed: 5}
	tests := []struct {
		name       string
		clockScale float64
		wantTTFT   float64 // seconds
		wantITL    float64
	}{
		{"wall clock", 0, 0.020, 0.004},
		{"engine time", 0.2, 0.100, 0.020},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			o.ClockScale = tc.clockScale
			res, err := Run(context.Background(), o)
			require.NoError(t, err)
			require.NoError(t, res.Gate())
			a := res.Aggregate
			// The simulator's first chunk never comes early; on a 2-core
			// host running the whole suite beside it, wall scheduling
			// delays it by 1 ms alone and past 20 ms at worst, and its 4 ms
			// (wall) gaps overshoot by up to 60 %. A first chunk sent late
			// shortens the gaps after it (the engine keeps its schedule): CI
			// saw a mean ITL of 3.67 ms for 4. A wrong conversion is off
			// by 5x and a chunk-stamping fault reads 0: both still fail
			// bounds of [want, 2.5 x want) and [want/2, 2.5 x want).
			assert.GreaterOrEqual(t, a.MedianTTFT, tc.wantTTFT)
			assert.Less(t, a.MedianTTFT, tc.wantTTFT*2.5)
			assert.GreaterOrEqual(t, a.MeanITL, tc.wantITL*0.5)
			assert.Less(t, a.MeanITL, tc.wantITL*2.5)
			assert.Equal(t, tc.clockScale, a.ClockScale)
		})
	}
}

// TestAgainstSimulatorBehindItsSchedule: a simulator whose 1 µs steps are
// shorter than a write is behind its schedule on every step and writes its
// chunks back to back, so the client reads many in one read. The stream
// reports those gaps (catch_up_gaps) and they are the server's lag: the
// raw unseen share would refuse the run, the client's own lag does not.
func TestAgainstSimulatorBehindItsSchedule(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, sim.Config{FastMode: true, FixedTTFT: 2 * time.Millisecond, FixedITL: time.Microsecond, Seed: 1})
	o := Options{BaseURL: url, Concurrency: 4, NumPrompts: 16, NumWarmups: 0, ISL: 64, OSL: 200, IgnoreEOS: true, Seed: 3}
	res, err := Run(context.Background(), o)
	require.NoError(t, err)
	a := res.Aggregate
	require.Equal(t, 16*199, a.ChunkGaps)
	assert.Greater(t, a.ServerLag, 0.9, "nearly every step was already due")
	assert.Greater(t, float64(a.UnseenGaps)/float64(a.ChunkGaps), point.MaxClientLag, "the client read the catch-up chunks together")
	assert.Less(t, a.ClientLag, 0.1, "those gaps are not the client's")
	ev := a.Evidence()
	assert.Equal(t, a.ServerLag, ev.ServerLag, "the evidence carries the server's lag")
}
