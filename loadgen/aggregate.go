package loadgen

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
)

// Scenario types, as InferenceX names them.
const (
	ScenarioFixedSeqLen = "fixed-seq-len"
	ScenarioAgentic     = "agentic-coding"
)

// Rate is a request rate that marshals +Inf (closed loop) as "inf", the way
// vLLM and InferenceX write it.
type Rate float64

// MarshalJSON implements json.Marshaler.
func (r Rate) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(r), 1) || r == 0 {
		return []byte(`"inf"`), nil
	}
	return json.Marshal(float64(r))
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "inf" {
			*r = Rate(math.Inf(1))
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		*r = Rate(f)
		return err
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*r = Rate(f)
	return err
}

// Aggregate is the run-level result. Field names and units follow
// InferenceX's processed results (utils/process_result.py, agg_*.json):
// latencies are in SECONDS under the raw bench_serving names without the
// "_ms" suffix (mean_ttft, p99.9_e2el, ...); every TPOT statistic X also
// yields X_intvty = 1000 / (X_tpot in ms), so mean_intvty comes from the mean
// TPOT, median_intvty from the median and p99_intvty from the p99 TPOT (the
// slow-tail user), exactly as InferenceX computes them. Throughputs are in
// requests or tokens per second. Agentic runs add request_metrics (§5.2).
type Aggregate struct {
	ScenarioType     string  `json:"scenario_type"`
	Simulated        bool    `json:"simulated"`
	BaseURL          string  `json:"base_url"`
	Endpoint         string  `json:"endpoint"`
	Model            string  `json:"model"`
	Conc             int     `json:"conc"`
	MaxConcurrency   int     `json:"max_concurrency"`
	NumPrompts       int     `json:"num_prompts"`
	NumWarmups       int     `json:"num_warmups"`
	RequestRate      Rate    `json:"request_rate"`
	Burstiness       float64 `json:"burstiness"`
	ISL              int     `json:"isl"`
	OSL              int     `json:"osl"`
	RandomRangeRatio float64 `json:"random_range_ratio"`
	IgnoreEOS        bool    `json:"ignore_eos"`
	Seed             int64   `json:"seed"`
	DurationLimit    float64 `json:"duration_limit,omitempty"` // --duration, seconds
	// DrainedAfterLimit counts measured requests sent before DurationLimit
	// that finished after it: they count in every figure (aiperf's
	// grace-period drain), so a window shorter than E2EL still reports them.
	DrainedAfterLimit int `json:"drained_after_limit,omitempty"`
	// ClockScale is set when times were converted from a time-scaled
	// simulator's clock (Options.ClockScale).
	ClockScale float64 `json:"clock_scale,omitempty"`
	StartedAt  string  `json:"started_at"` // RFC 3339, UTC

	NumRequestsTotal      int            `json:"num_requests_total"`
	NumRequestsSuccessful int            `json:"num_requests_successful"`
	Completed             int            `json:"completed"`
	Failed                int            `json:"failed"`
	ErrorRate             float64        `json:"error_rate"` // failed / total
	ErrorCategories       map[string]int `json:"error_categories"`
	WarmupFailed          int            `json:"warmup_failed"`

	TotalInputTokens          int64   `json:"total_input_tokens"`           // server usage.prompt_tokens
	TotalRequestedInputTokens int64   `json:"total_requested_input_tokens"` // what the client built
	TotalOutputTokens         int64   `json:"total_output_tokens"`          // server usage.completion_tokens
	TotalCachedTokens         int64   `json:"total_cached_tokens"`
	MeanInputTokens           float64 `json:"mean_input_tokens"`
	MeanRequestedInputTokens  float64 `json:"mean_requested_input_tokens"`
	MeanOutputTokens          float64 `json:"mean_output_tokens"`
	TokenCountsRescaled       int     `json:"token_counts_rescaled"`

	Duration float64 `json:"duration"` // s, dispatch start to last completion
	// Window is how long the measured phase ran, start to the last request
	// or lane done (s); a run bounded by DurationLimit runs at least that.
	Window               float64 `json:"window"`
	RequestThroughput    float64 `json:"request_throughput"`
	InputThroughput      float64 `json:"input_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	NumPrefillGPU        int     `json:"num_prefill_gpu"`
	NumDecodeGPU         int     `json:"num_decode_gpu"`
	NumGPU               int     `json:"num_gpu"`
	TputPerGPU           float64 `json:"tput_per_gpu"`        // total / all GPUs
	OutputTputPerGPU     float64 `json:"output_tput_per_gpu"` // output / decode GPUs
	InputTputPerGPU      float64 `json:"input_tput_per_gpu"`  // input / prefill GPUs

	MeanTTFT   float64 `json:"mean_ttft"`
	MedianTTFT float64 `json:"median_ttft"`
	StdTTFT    float64 `json:"std_ttft"`
	P90TTFT    float64 `json:"p90_ttft"`
	P99TTFT    float64 `json:"p99_ttft"`
	P999TTFT   float64 `json:"p99.9_ttft"`

	MeanTPOT   float64 `json:"mean_tpot"`
	MedianTPOT float64 `json:"median_tpot"`
	StdTPOT    float64 `json:"std_tpot"`
	P90TPOT    float64 `json:"p90_tpot"`
	P99TPOT    float64 `json:"p99_tpot"`
	P999TPOT   float64 `json:"p99.9_tpot"`

	MeanIntvty   float64 `json:"mean_intvty"`
	MedianIntvty float64 `json:"median_intvty"`
	StdIntvty    float64 `json:"std_intvty"` // as InferenceX emits it; not meaningful
	P90Intvty    float64 `json:"p90_intvty"`
	P99Intvty    float64 `json:"p99_intvty"`
	P999Intvty   float64 `json:"p99.9_intvty"`

	// ITL: pooled gaps between consecutive token-carrying chunks.
	MeanITL   float64 `json:"mean_itl"`
	MedianITL float64 `json:"median_itl"`
	StdITL    float64 `json:"std_itl"`
	P90ITL    float64 `json:"p90_itl"`
	P99ITL    float64 `json:"p99_itl"`
	P999ITL   float64 `json:"p99.9_itl"`

	// Per-token ITL: each chunk gap split evenly over the tokens that chunk
	// carried (k samples of gap/k), pooled over all requests.
	MeanITLPerToken   float64 `json:"mean_itl_per_token"`
	MedianITLPerToken float64 `json:"median_itl_per_token"`
	StdITLPerToken    float64 `json:"std_itl_per_token"`
	P90ITLPerToken    float64 `json:"p90_itl_per_token"`
	P99ITLPerToken    float64 `json:"p99_itl_per_token"`
	P999ITLPerToken   float64 `json:"p99.9_itl_per_token"`

	MeanE2EL   float64 `json:"mean_e2el"`
	MedianE2EL float64 `json:"median_e2el"`
	StdE2EL    float64 `json:"std_e2el"`
	P90E2EL    float64 `json:"p90_e2el"`
	P99E2EL    float64 `json:"p99_e2el"`
	P999E2EL   float64 `json:"p99.9_e2el"`

	// Client queue time: from the scheduled dispatch to the actual send,
	// kept out of TTFT/E2EL as vLLM and InferenceX do, and reported here.
	MeanClientQueue   float64 `json:"mean_client_queue"`
	MedianClientQueue float64 `json:"median_client_queue"`
	P99ClientQueue    float64 `json:"p99_client_queue"`
	MaxClientQueue    float64 `json:"max_client_queue"`

	// Request write: from send to the request being written to the socket
	// (connection pool wait + write), a client-side overhead inside TTFT.
	MeanRequestWrite float64 `json:"mean_request_write"`
	P99RequestWrite  float64 `json:"p99_request_write"`
	// NewConnections counts measured requests that could not reuse a pooled
	// connection (0 when warmup opened them all).
	NewConnections int `json:"new_connections"`

	MeanChunksPerRequest float64 `json:"mean_chunks_per_request"`
	// ClientLag is the client's lag behind the streams: the fraction of the
	// gaps between token chunks that the client did not see, because the
	// later chunk was already buffered behind the earlier one when the
	// client read (RequestRecord.UnseenGaps over all gaps of successful
	// requests), less those the server wrote back to back itself
	// (CatchUpGaps, per request). Such a gap reads 0 in ITL and moves first
	// and last chunk times, so TTFT, TPOT and interactivity are only as good
	// as this is small. 0 when every chunk was seen arriving.
	ClientLag  float64 `json:"client_lag"`
	UnseenGaps int     `json:"unseen_gaps"`
	ChunkGaps  int     `json:"chunk_gaps"`
	// ServerLag is the fraction of chunk gaps the server (the simulator)
	// wrote back to back because it was behind its own schedule: a host too
	// slow for the model, which makes latencies exceed it.
	ServerLag   float64 `json:"server_lag,omitempty"`
	CatchUpGaps int     `json:"catch_up_gaps,omitempty"`
	// LanesFinished (agentic replay) counts lanes with at least one
	// successful measured call.
	LanesFinished int `json:"lanes_finished,omitempty"`

	RequestMetrics *RequestMetrics `json:"request_metrics,omitempty"`
	PerTurn        []TurnMetrics   `json:"per_turn,omitempty"`
}

// StatBlock is InferenceX's agentic statistic set (seconds for latencies).
type StatBlock struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P75  float64 `json:"p75"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	Std  float64 `json:"std"`
}

func statBlock(s Summary) StatBlock {
	return StatBlock{Mean: s.Mean, P50: s.P50, P75: s.P75, P90: s.P90, P95: s.P95, Std: s.Std}
}

// RequestMetrics mirrors InferenceX's agentic request_metrics block
// (utils/agentic/aggregation/request_metrics.py). As there, "itl" and "tpot"
// are both AIPerf's per-request (E2E-TTFT)/(OSL-1), and intvty is 1/ITL at
// each statistic (std_intvty is the spread of per-request 1/ITL).
type RequestMetrics struct {
	QPS        QPSStats          `json:"qps"`
	Latency    LatencyStats      `json:"latency"`
	Tokens     TokenStats        `json:"tokens"`
	Throughput AgenticThroughput `json:"throughput"`
	Cache      CacheStats        `json:"cache"`
}

// QPSStats are completions per 1-second window.
type QPSStats struct {
	WindowSeconds float64 `json:"window_seconds"`
	Samples       int     `json:"samples"`
	StatBlock
}

// LatencyStats groups per-request latency statistics in seconds.
type LatencyStats struct {
	TTFT          StatBlock `json:"ttft"`
	E2EL          StatBlock `json:"e2el"`
	ITL           StatBlock `json:"itl"`
	TPOT          StatBlock `json:"tpot"`
	Intvty        StatBlock `json:"intvty"`
	E2ENormIntvty StatBlock `json:"e2e_norm_intvty"` // per-request OSL/E2EL
}

// TokenStats are per-request token counts.
type TokenStats struct {
	Input          StatBlock `json:"input"`
	OutputActual   StatBlock `json:"output_actual"`
	OutputExpected StatBlock `json:"output_expected"`
}

// TokensPerSecond wraps one throughput figure.
type TokensPerSecond struct {
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// AgenticThroughput is measured over first send to last response (AIPerf).
type AgenticThroughput struct {
	Input           TokensPerSecond `json:"input"`
	Output          TokensPerSecond `json:"output"`
	Total           TokensPerSecond `json:"total"`
	DurationSeconds float64         `json:"duration_seconds"`
	PerGPU          PerGPU          `json:"per_gpu"`
}

// PerGPU divides every throughput by the deployment's total GPU count, as
// InferenceX's agentic aggregation does.
type PerGPU struct {
	TotalTputTPS  float64 `json:"total_tput_tps"`
	OutputTputTPS float64 `json:"output_tput_tps"`
	InputTputTPS  float64 `json:"input_tput_tps"`
}

// CacheStats compares the prefix reuse the workload makes possible with
// what the server reported in usage.prompt_tokens_details.cached_tokens.
type CacheStats struct {
	TheoreticalCacheHitRate float64 `json:"theoretical_cache_hit_rate"`
	ServerCacheHitRate      float64 `json:"server_cache_hit_rate"`
}

// TurnMetrics summarises one turn position across sessions.
type TurnMetrics struct {
	Turn             int     `json:"turn"`
	Requests         int     `json:"requests"`
	Successful       int     `json:"successful"`
	MeanTTFT         float64 `json:"mean_ttft"`
	P90TTFT          float64 `json:"p90_ttft"`
	MeanTPOT         float64 `json:"mean_tpot"`
	MeanE2EL         float64 `json:"mean_e2el"`
	MeanInputTokens  float64 `json:"mean_input_tokens"`
	MeanCachedTokens float64 `json:"mean_cached_tokens"`
}

// gpuCounts resolves the per-GPU denominators. Aggregated serving (only a
// total given, or prefill/decode unset) uses every GPU for input and output
// alike; disaggregated serving divides output by decode GPUs and input by
// prefill GPUs, and a decode count of 0 falls back to all GPUs (InferenceX).
func gpuCounts(prefill, decode, total int) (p, d, t int) {
	switch {
	case total > 0 && prefill == 0 && decode == 0:
		return total, total, total
	case total == 0:
		total = prefill + decode
	}
	if prefill == 0 {
		prefill = total
	}
	if decode == 0 {
		decode = total
	}
	return prefill, decode, total
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// intvty is InferenceX's 1000 / (tpot_ms + 1e-8), in tokens/s per user.
func intvty(tpotSeconds float64, haveTPOT bool) float64 {
	if !haveTPOT {
		return 0
	}
	return 1000.0 / (tpotSeconds*1000 + 1e-8)
}

// computeAggregate derives run-level metrics from the measured (non-warmup)
// records. Only successful requests enter latency and token statistics.
func computeAggregate(agg *Aggregate, recs []RequestRecord, scenario string) {
	agg.ScenarioType = scenario
	agg.ErrorCategories = map[string]int{}
	var ttft, tpot, e2el, itl, queue, write []float64
	var itlTok []weighted
	var chunks, clientUnseen int
	var maxEnd int64
	lanes := map[int]bool{}
	for i := range recs {
		r := &recs[i]
		agg.NumRequestsTotal++
		if r.EndNs > maxEnd {
			maxEnd = r.EndNs
		}
		if r.Simulated {
			agg.Simulated = true
		}
		queue = append(queue, r.ClientQueue)
		if r.NewConnection {
			agg.NewConnections++
		}
		if r.WrittenNs > 0 {
			write = append(write, float64(r.WrittenNs-r.SendNs)/1e9)
		}
		if !r.Success {
			agg.Failed++
			agg.ErrorCategories[r.ErrorKind]++
			continue
		}
		agg.Completed++
		agg.TotalInputTokens += int64(r.PromptTokens)
		agg.TotalRequestedInputTokens += int64(r.RequestedPromptTokens)
		agg.TotalOutputTokens += int64(r.CompletionTokens)
		agg.TotalCachedTokens += int64(r.CachedTokens)
		if r.TokenCountSource == "scaled" {
			agg.TokenCountsRescaled++
		}
		ttft = append(ttft, r.TTFT)
		e2el = append(e2el, r.E2EL)
		if r.CompletionTokens > 1 {
			tpot = append(tpot, r.TPOT)
		}
		chunks += len(r.ChunkNs)
		if n := len(r.ChunkNs); n > 1 {
			unseen, caught := min(r.UnseenGaps, n-1), min(r.CatchUpGaps, n-1)
			agg.ChunkGaps += n - 1
			agg.UnseenGaps += unseen
			agg.CatchUpGaps += caught
			clientUnseen += max(unseen-caught, 0)
		}
		if r.Lane > 0 {
			lanes[r.Lane] = true
		}
		for j := 1; j < len(r.ChunkNs); j++ {
			gap := float64(r.ChunkNs[j]-r.ChunkNs[j-1]) / 1e9
			itl = append(itl, gap)
			if k := int(r.ChunkTokens[j]); k > 0 {
				itlTok = append(itlTok, weighted{gap / float64(k), k})
			}
		}
	}
	agg.NumRequestsSuccessful = agg.Completed
	agg.ErrorRate = safeDiv(float64(agg.Failed), float64(agg.NumRequestsTotal))
	agg.MeanInputTokens = safeDiv(float64(agg.TotalInputTokens), float64(agg.Completed))
	agg.MeanRequestedInputTokens = safeDiv(float64(agg.TotalRequestedInputTokens), float64(agg.Completed))
	agg.MeanOutputTokens = safeDiv(float64(agg.TotalOutputTokens), float64(agg.Completed))
	agg.MeanChunksPerRequest = safeDiv(float64(chunks), float64(agg.Completed))
	agg.ClientLag = safeDiv(float64(clientUnseen), float64(agg.ChunkGaps))
	agg.ServerLag = safeDiv(float64(agg.CatchUpGaps), float64(agg.ChunkGaps))
	agg.LanesFinished = len(lanes)

	agg.Duration = float64(maxEnd) / 1e9
	if lim := int64(agg.DurationLimit * 1e9); lim > 0 {
		for i := range recs {
			if recs[i].SendNs < lim && recs[i].EndNs > lim {
				agg.DrainedAfterLimit++
			}
		}
	}
	agg.RequestThroughput = safeDiv(float64(agg.Completed), agg.Duration)
	agg.InputThroughput = safeDiv(float64(agg.TotalInputTokens), agg.Duration)
	agg.OutputThroughput = safeDiv(float64(agg.TotalOutputTokens), agg.Duration)
	agg.TotalTokenThroughput = agg.InputThroughput + agg.OutputThroughput
	p, d, t := agg.NumPrefillGPU, agg.NumDecodeGPU, agg.NumGPU
	agg.NumPrefillGPU, agg.NumDecodeGPU, agg.NumGPU = gpuCounts(p, d, t)
	agg.TputPerGPU = safeDiv(agg.TotalTokenThroughput, float64(agg.NumGPU))
	agg.OutputTputPerGPU = safeDiv(agg.OutputThroughput, float64(agg.NumDecodeGPU))
	agg.InputTputPerGPU = safeDiv(agg.TotalTokenThroughput-agg.OutputThroughput, float64(agg.NumPrefillGPU))

	s := Summarize(ttft)
	agg.MeanTTFT, agg.MedianTTFT, agg.StdTTFT, agg.P90TTFT, agg.P99TTFT, agg.P999TTFT = s.Mean, s.Median, s.Std, s.P90, s.P99, s.P999
	s = Summarize(tpot)
	agg.MeanTPOT, agg.MedianTPOT, agg.StdTPOT, agg.P90TPOT, agg.P99TPOT, agg.P999TPOT = s.Mean, s.Median, s.Std, s.P90, s.P99, s.P999
	have := s.Count > 0
	agg.MeanIntvty, agg.MedianIntvty, agg.StdIntvty = intvty(s.Mean, have), intvty(s.Median, have), intvty(s.Std, have)
	agg.P90Intvty, agg.P99Intvty, agg.P999Intvty = intvty(s.P90, have), intvty(s.P99, have), intvty(s.P999, have)
	s = Summarize(itl)
	agg.MeanITL, agg.MedianITL, agg.StdITL, agg.P90ITL, agg.P99ITL, agg.P999ITL = s.Mean, s.Median, s.Std, s.P90, s.P99, s.P999
	s = summarizeWeighted(itlTok)
	agg.MeanITLPerToken, agg.MedianITLPerToken, agg.StdITLPerToken = s.Mean, s.Median, s.Std
	agg.P90ITLPerToken, agg.P99ITLPerToken, agg.P999ITLPerToken = s.P90, s.P99, s.P999
	s = Summarize(e2el)
	agg.MeanE2EL, agg.MedianE2EL, agg.StdE2EL, agg.P90E2EL, agg.P99E2EL, agg.P999E2EL = s.Mean, s.Median, s.Std, s.P90, s.P99, s.P999
	s = Summarize(queue)
	agg.MeanClientQueue, agg.MedianClientQueue, agg.P99ClientQueue = s.Mean, s.Median, s.P99
	if len(queue) > 0 {
		agg.MaxClientQueue = queue[len(queue)-1] // sorted by Summarize
	}
	s = Summarize(write)
	agg.MeanRequestWrite, agg.P99RequestWrite = s.Mean, s.P99

	if scenario == ScenarioAgentic {
		agg.RequestMetrics = agenticMetrics(recs, agg)
		agg.PerTurn = perTurn(recs)
	}
}

// agenticMetrics builds InferenceX's request_metrics block.
func agenticMetrics(recs []RequestRecord, agg *Aggregate) *RequestMetrics {
	m := &RequestMetrics{}
	var ttft, e2el, itl, norm, in, out, exp, ends []float64
	var inv []float64
	minStart, maxEnd := int64(math.MaxInt64), int64(0)
	var totIn, totOut, totCacheable float64
	for i := range recs {
		r := &recs[i]
		if !r.Success {
			continue
		}
		minStart = min(minStart, r.SendNs)
		maxEnd = max(maxEnd, r.EndNs)
		ends = append(ends, float64(r.EndNs)/1e9)
		ttft = append(ttft, r.TTFT)
		e2el = append(e2el, r.E2EL)
		if r.CompletionTokens > 1 && r.TPOT > 0 {
			itl = append(itl, r.TPOT)
			inv = append(inv, 1/r.TPOT)
		}
		if r.E2EL > 0 {
			norm = append(norm, float64(r.CompletionTokens)/r.E2EL)
		}
		in = append(in, float64(r.PromptTokens))
		out = append(out, float64(r.CompletionTokens))
		exp = append(exp, float64(r.MaxTokens))
		totIn += float64(r.PromptTokens)
		totOut += float64(r.CompletionTokens)
		totCacheable += float64(min(r.cacheable, r.PromptTokens))
	}
	m.Latency.TTFT = statBlock(Summarize(ttft))
	m.Latency.E2EL = statBlock(Summarize(e2el))
	itlS := Summarize(itl)
	m.Latency.ITL = statBlock(itlS)
	m.Latency.TPOT = m.Latency.ITL
	inverse := func(v float64) float64 { return safeDiv(1, v) }
	m.Latency.Intvty = StatBlock{
		Mean: inverse(itlS.Mean), P50: inverse(itlS.P50), P75: inverse(itlS.P75),
		P90: inverse(itlS.P90), P95: inverse(itlS.P95), Std: Summarize(inv).Std,
	}
	m.Latency.E2ENormIntvty = statBlock(Summarize(norm))
	m.Tokens.Input = statBlock(Summarize(in))
	m.Tokens.OutputActual = statBlock(Summarize(out))
	m.Tokens.OutputExpected = statBlock(Summarize(exp))

	if maxEnd > minStart {
		dur := float64(maxEnd-minStart) / 1e9
		m.Throughput.DurationSeconds = dur
		m.Throughput.Input.TokensPerSecond = totIn / dur
		m.Throughput.Output.TokensPerSecond = totOut / dur
		m.Throughput.Total.TokensPerSecond = (totIn + totOut) / dur
		n := float64(agg.NumGPU)
		m.Throughput.PerGPU = PerGPU{
			TotalTputTPS:  safeDiv(m.Throughput.Total.TokensPerSecond, n),
			OutputTputTPS: safeDiv(m.Throughput.Output.TokensPerSecond, n),
			InputTputTPS:  safeDiv(m.Throughput.Input.TokensPerSecond, n),
		}
	}
	m.QPS = qpsStats(ends)
	m.Cache.TheoreticalCacheHitRate = safeDiv(totCacheable, totIn)
	m.Cache.ServerCacheHitRate = safeDiv(float64(agg.TotalCachedTokens), float64(agg.TotalInputTokens))
	return m
}

// qpsStats counts completions in consecutive 1-second windows starting at
// the first completion (InferenceX compute_qps_stats).
func qpsStats(ends []float64) QPSStats {
	q := QPSStats{WindowSeconds: 1}
	if len(ends) < 2 {
		return q
	}
	sort.Float64s(ends)
	first, last := ends[0], ends[len(ends)-1]
	if last <= first {
		return q
	}
	var vals []float64
	j := 0
	for cur := first; cur+1 <= last; cur++ {
		for j < len(ends) && ends[j] < cur {
			j++
		}
		k := j
		for k < len(ends) && ends[k] < cur+1 {
			k++
		}
		vals = append(vals, float64(k-j))
	}
	q.Samples = len(vals)
	if len(vals) == 0 {
		q.Mean = float64(len(ends)) / (last - first)
		return q
	}
	q.StatBlock = statBlock(Summarize(vals))
	return q
}

func perTurn(recs []RequestRecord) []TurnMetrics {
	by := map[int][]*RequestRecord{}
	maxTurn := 0
	for i := range recs {
		r := &recs[i]
		if r.Turn > 0 {
			by[r.Turn] = append(by[r.Turn], r)
			maxTurn = max(maxTurn, r.Turn)
		}
	}
	var out []TurnMetrics
	for t := 1; t <= maxTurn; t++ {
		rs := by[t]
		if len(rs) == 0 {
			continue
		}
		tm := TurnMetrics{Turn: t, Requests: len(rs)}
		var ttft []float64
		var tpotSum, e2elSum, inSum, cachedSum float64
		var tpotN int
		for _, r := range rs {
			if !r.Success {
				continue
			}
			tm.Successful++
			ttft = append(ttft, r.TTFT)
			e2elSum += r.E2EL
			inSum += float64(r.PromptTokens)
			cachedSum += float64(r.CachedTokens)
			if r.CompletionTokens > 1 {
				tpotSum += r.TPOT
				tpotN++
			}
		}
		s := Summarize(ttft)
		tm.MeanTTFT, tm.P90TTFT = s.Mean, s.P90
		tm.MeanTPOT = safeDiv(tpotSum, float64(tpotN))
		tm.MeanE2EL = safeDiv(e2elSum, float64(tm.Successful))
		tm.MeanInputTokens = safeDiv(inSum, float64(tm.Successful))
		tm.MeanCachedTokens = safeDiv(cachedSum, float64(tm.Successful))
		out = append(out, tm)
	}
	return out
}

// Version is the load generator's own version, part of every measurement
// profile it measures under: bump it when a figure's definition or the
// workload it sends changes, so older figures are not reused as equal.
// 2: per-point seeds, chunk lag (unseen gaps) measured and gated.
const Version = "2"
