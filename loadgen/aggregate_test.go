package loadgen

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = int64(1_000_000)

// handRecords is a run whose metrics were computed by hand (see the test).
func handRecords() []RequestRecord {
	recs := []RequestRecord{
		{ // A: multi-token middle chunk
			Index: 0, DispatchNs: 0, SendNs: 0, EndNs: 140 * ms,
			ChunkNs: []int64{100 * ms, 110 * ms, 130 * ms}, ChunkTokens: []int32{1, 2, 1},
			TokenCountSource: "text", PromptTokens: 10, RequestedPromptTokens: 10, CompletionTokens: 4, usageSeen: true,
		},
		{ // B: queued 10 ms in the client
			Index: 1, DispatchNs: 40 * ms, SendNs: 50 * ms, EndNs: 280 * ms,
			ChunkNs: []int64{250 * ms, 270 * ms}, ChunkTokens: []int32{1, 1},
			TokenCountSource: "text", PromptTokens: 20, RequestedPromptTokens: 18, CompletionTokens: 2, usageSeen: true,
		},
		{ // C: error payload mid-stream; the last to finish
			Index: 2, SendNs: 0, EndNs: 300 * ms, ErrorKind: ErrKindStreamError, Error: "engine died",
			ChunkNs: []int64{60 * ms}, ChunkTokens: []int32{1},
		},
		{ // D: a single output token: no TPOT
			Index: 3, SendNs: 0, EndNs: 90 * ms,
			ChunkNs: []int64{80 * ms}, ChunkTokens: []int32{1},
			TokenCountSource: "text", PromptTokens: 5, RequestedPromptTokens: 5, CompletionTokens: 1, usageSeen: true,
		},
	}
	for i := range recs {
		recs[i].FirstTokenNs = recs[i].ChunkNs[0]
		recs[i].LastTokenNs = recs[i].ChunkNs[len(recs[i].ChunkNs)-1]
		recs[i].finish()
	}
	return recs
}

func TestPerRequestMetrics(t *testing.T) {
	t.Parallel()
	recs := handRecords()
	a, b, c, d := recs[0], recs[1], recs[2], recs[3]
	assert.True(t, a.Success)
	assert.InDelta(t, 0.100, a.TTFT, 1e-12)
	assert.InDelta(t, 0.130, a.E2EL, 1e-12)
	assert.InDelta(t, 0.010, a.TPOT, 1e-12, "(E2E-TTFT)/(OSL-1) = 30ms/3")
	assert.InDelta(t, 0.200, b.TTFT, 1e-12, "TTFT starts at send, not dispatch")
	assert.InDelta(t, 0.010, b.ClientQueue, 1e-12)
	assert.InDelta(t, 0.020, b.TPOT, 1e-12)
	assert.False(t, c.Success)
	assert.Zero(t, c.TTFT)
	assert.True(t, d.Success)
	assert.Zero(t, d.TPOT, "OSL=1 has no TPOT")
}

func TestAggregateHandComputed(t *testing.T) {
	t.Parallel()
	agg := Aggregate{NumPrefillGPU: 2, NumDecodeGPU: 4}
	computeAggregate(&agg, handRecords(), ScenarioFixedSeqLen)
	const eps = 1e-9
	assert.Equal(t, 4, agg.NumRequestsTotal)
	assert.Equal(t, 3, agg.Completed)
	assert.Equal(t, 1, agg.Failed)
	assert.Equal(t, map[string]int{ErrKindStreamError: 1}, agg.ErrorCategories)
	assert.InDelta(t, 0.25, agg.ErrorRate, eps)

	// Duration is dispatch start to the last completion (C, a failure).
	assert.InDelta(t, 0.3, agg.Duration, eps)
	assert.Equal(t, int64(35), agg.TotalInputTokens)
	assert.Equal(t, int64(33), agg.TotalRequestedInputTokens)
	assert.Equal(t, int64(7), agg.TotalOutputTokens)
	assert.InDelta(t, 10, agg.RequestThroughput, eps)
	assert.InDelta(t, 35/0.3, agg.InputThroughput, eps)
	assert.InDelta(t, 7/0.3, agg.OutputThroughput, eps)
	assert.InDelta(t, 42/0.3, agg.TotalTokenThroughput, eps)
	assert.Equal(t, 6, agg.NumGPU)
	assert.InDelta(t, 140.0/6, agg.TputPerGPU, eps)
	assert.InDelta(t, (7/0.3)/4, agg.OutputTputPerGPU, eps)
	assert.InDelta(t, (35/0.3)/2, agg.InputTputPerGPU, eps)

	// TTFT over successes [0.08 0.10 0.20].
	assert.InDelta(t, 0.38/3, agg.MeanTTFT, eps)
	assert.InDelta(t, 0.10, agg.MedianTTFT, eps)
	assert.InDelta(t, 0.18, agg.P90TTFT, eps)
	assert.InDelta(t, 0.198, agg.P99TTFT, eps)
	// TPOT [0.01 0.02]; D (OSL 1) excluded.
	assert.InDelta(t, 0.015, agg.MeanTPOT, eps)
	assert.InDelta(t, 0.015, agg.MedianTPOT, eps)
	assert.InDelta(t, 0.0199, agg.P99TPOT, eps)
	assert.InDelta(t, 0.005, agg.StdTPOT, eps)
	// Interactivity = 1000 / TPOT_ms of the same statistic.
	assert.InDelta(t, 1000/15.0, agg.MeanIntvty, 1e-6)
	assert.InDelta(t, 1000/19.9, agg.P99Intvty, 1e-6)
	// Per-chunk ITL pool [0.01 0.02 0.02].
	assert.InDelta(t, 0.05/3, agg.MeanITL, eps)
	assert.InDelta(t, 0.02, agg.MedianITL, eps)
	// Per-token ITL: A's 10 ms gap carried 2 tokens -> [0.005 0.005 0.02 0.02].
	assert.InDelta(t, 0.0125, agg.MeanITLPerToken, eps)
	assert.InDelta(t, 0.0125, agg.MedianITLPerToken, eps)
	assert.InDelta(t, 0.0075, agg.StdITLPerToken, eps)
	// E2EL [0.08 0.13 0.22].
	assert.InDelta(t, 0.43/3, agg.MeanE2EL, eps)
	assert.InDelta(t, 0.13, agg.MedianE2EL, eps)
	// Client queue [0 0 0 0.01].
	assert.InDelta(t, 0.0025, agg.MeanClientQueue, eps)
	assert.InDelta(t, 0.01, agg.MaxClientQueue, eps)

	res := Result{Aggregate: agg}
	err := res.Gate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "error rate 25.0% exceeds 10%")
	assert.Contains(t, err.Error(), "stream_error=1")
}

func TestGate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		completed, fail int
		wantErr         string
	}{
		{"all good", 10, 0, ""},
		{"exactly 10 percent passes", 9, 1, ""},
		{"above 10 percent fails", 8, 2, "error rate 20.0%"},
		{"nothing succeeded", 0, 3, "no request succeeded"},
		{"nothing sent", 0, 0, "no request succeeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recs []RequestRecord
			for i := 0; i < tc.completed; i++ {
				recs = append(recs, RequestRecord{Success: true, CompletionTokens: 2, ChunkNs: []int64{1, 2}, ChunkTokens: []int32{1, 1}})
			}
			for i := 0; i < tc.fail; i++ {
				recs = append(recs, RequestRecord{ErrorKind: ErrKindHTTP})
			}
			res := Result{}
			computeAggregate(&res.Aggregate, recs, ScenarioFixedSeqLen)
			err := res.Gate()
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			}
		})
	}
}

func TestGPUCounts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                string
		p, d, t             int
		wantP, wantD, wantT int
	}{
		{"aggregated: all GPUs do both", 0, 0, 8, 8, 8, 8},
		{"disaggregated 2P1D DEP16/DEP32", 32, 32, 0, 32, 32, 64},
		{"explicit total", 16, 32, 48, 16, 32, 48}, // Run refuses counts that do not add up
		{"decode 0 falls back to all", 8, 0, 8, 8, 8, 8},
		{"unknown", 0, 0, 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, d, tot := gpuCounts(tc.p, tc.d, tc.t)
			assert.Equal(t, []int{tc.wantP, tc.wantD, tc.wantT}, []int{p, d, tot})
		})
	}
}

func TestReconcileTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		counted    []int32
		usage      int
		want       []int32
		wantSource string
	}{
		{"already consistent", []int32{1, 2, 1}, 4, []int32{1, 2, 1}, "text"},
		{"uniform scale-up", []int32{1, 1, 1}, 6, []int32{2, 2, 2}, "scaled"},
		{"largest remainder", []int32{1, 2}, 4, []int32{1, 3}, "scaled"},
		{"scale-down", []int32{2, 2, 2, 2}, 4, []int32{1, 1, 1, 1}, "scaled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := RequestRecord{ChunkTokens: append([]int32(nil), tc.counted...), CompletionTokens: tc.usage, TokenCountSource: "text"}
			r.reconcileTokens()
			assert.Equal(t, tc.want, r.ChunkTokens)
			assert.Equal(t, tc.wantSource, r.TokenCountSource)
			var sum int32
			for _, k := range r.ChunkTokens {
				sum += k
			}
			assert.Equal(t, int32(tc.usage), sum)
		})
	}
}

func TestFailureClassification(t *testing.T) {
	t.Parallel()
	empty := RequestRecord{usageSeen: true, CompletionTokens: 0}
	empty.finish()
	assert.Equal(t, ErrKindEmptyStream, empty.ErrorKind)
	noUsage := RequestRecord{ChunkNs: []int64{5}, ChunkTokens: []int32{1}}
	noUsage.finish()
	assert.Equal(t, ErrKindMissingUsage, noUsage.ErrorKind)
	assert.False(t, noUsage.Success)
	httpErr := RequestRecord{ErrorKind: ErrKindHTTP, ChunkNs: []int64{5}}
	httpErr.finish()
	assert.Equal(t, ErrKindHTTP, httpErr.ErrorKind, "earlier classification wins")
}

func TestAggregateJSONKeys(t *testing.T) {
	t.Parallel()
	agg := Aggregate{NumPrefillGPU: 2, NumDecodeGPU: 4}
	computeAggregate(&agg, handRecords(), ScenarioFixedSeqLen)
	b, err := json.Marshal(&agg)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	// InferenceX processed-result names (utils/process_result.py).
	for _, k := range []string{
		"conc", "model", "isl", "osl", "tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu",
		"num_prefill_gpu", "num_decode_gpu", "mean_ttft", "median_ttft", "std_ttft", "p90_ttft", "p99_ttft", "p99.9_ttft",
		"mean_tpot", "median_tpot", "p99_tpot", "mean_intvty", "median_intvty", "p99_intvty", "p99.9_intvty",
		"mean_itl", "median_itl", "p99_itl", "mean_e2el", "median_e2el", "p99.9_e2el", "simulated",
		"request_throughput", "output_throughput", "total_token_throughput", "scenario_type",
	} {
		assert.Contains(t, m, k)
	}
	// Seconds, not milliseconds.
	assert.InDelta(t, 0.10, m["median_ttft"], 1e-9)
	assert.Equal(t, `"inf"`, string(must(json.Marshal(Rate(math.Inf(1))))))
	assert.Equal(t, `2.5`, string(must(json.Marshal(Rate(2.5)))))
	assert.NotContains(t, m, "request_metrics", "fixed-seq runs have no agentic block")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
