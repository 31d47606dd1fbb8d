package loadgen

import (
	"cmp"
	"slices"
)

// Error kinds recorded on failed requests. Failed requests are counted and
// kept out of every latency and token statistic.
const (
	ErrKindTransport    = "transport"     // connect/read/write failure
	ErrKindTimeout      = "timeout"       // the per-request deadline expired
	ErrKindCanceled     = "canceled"      // the run was cancelled mid-request
	ErrKindHTTP         = "http"          // non-200 status
	ErrKindStreamError  = "stream_error"  // {"error": ...} payload inside a 200 stream
	ErrKindBadChunk     = "bad_chunk"     // a data payload that is not valid JSON
	ErrKindEmptyStream  = "empty_stream"  // no chunk carried content or reasoning
	ErrKindMissingUsage = "missing_usage" // the stream never reported usage
)

// RequestRecord is everything measured for one request. Times are
// nanoseconds relative to the start of the phase (the main run or the
// warmup), taken from Go's monotonic clock.
type RequestRecord struct {
	Index     int    `json:"index"`
	Warmup    bool   `json:"warmup,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Turn      int    `json:"turn,omitempty"` // agentic replay: 1-based main-agent call of the trace
	Subagent  bool   `json:"subagent,omitempty"`
	Lane      int    `json:"lane,omitempty"` // agentic replay: 1-based lane of the call

	ResponseID string `json:"response_id,omitempty"`
	Status     int    `json:"status"`
	Success    bool   `json:"success"`
	ErrorKind  string `json:"error_kind,omitempty"`
	Error      string `json:"error,omitempty"`
	Simulated  bool   `json:"simulated,omitempty"`

	// DispatchNs is when the request was due: its slot in the arrival
	// schedule (open loop) or when a worker picked it up (closed loop).
	DispatchNs int64 `json:"dispatch_ns"`
	// SendNs is just before the HTTP request was issued; latencies start here.
	SendNs int64 `json:"send_ns"`
	// WrittenNs is when the request had been written to the connection.
	WrittenNs int64 `json:"written_ns"`
	// NewConnection is set when the request had to open a connection
	// instead of reusing a pooled one.
	NewConnection bool `json:"new_connection,omitempty"`
	// FirstTokenNs and LastTokenNs are the first and last chunks carrying
	// content or reasoning; -1 when there was none.
	FirstTokenNs int64 `json:"first_token_ns"`
	LastTokenNs  int64 `json:"last_token_ns"`
	// EndNs is when the response body had been read to the end.
	EndNs int64 `json:"end_ns"`
	// ChunkNs are the arrival times of the token-carrying chunks and
	// ChunkTokens how many tokens each carried (see chunkTokenCounts).
	ChunkNs     []int64 `json:"chunk_ns"`
	ChunkTokens []int32 `json:"chunk_tokens"`
	// UnseenGaps counts token chunks that were already in the client's
	// buffer behind the previous token chunk when the client read it (the
	// same socket Read delivered both). The client did not see such a chunk
	// arrive: its time is when the client got to it, and the gap before it
	// reads 0 (client lag: a starved client or a buffering proxy).
	UnseenGaps int `json:"unseen_gaps,omitempty"`
	// CatchUpGaps counts the gaps the server said it wrote back to back,
	// behind its own schedule (the simulator's catch_up_gaps; 0 from other
	// servers). Those are unseen whatever the client does, so they count as
	// the server's lag, not the client's.
	CatchUpGaps int `json:"catch_up_gaps,omitempty"`

	RequestedPromptTokens int `json:"requested_prompt_tokens"`
	PromptTokens          int `json:"prompt_tokens"`
	CompletionTokens      int `json:"completion_tokens"`
	CachedTokens          int `json:"cached_tokens,omitempty"`
	MaxTokens             int `json:"max_tokens"`
	// TokenCountSource says how ChunkTokens were obtained: "usage" (cumulative
	// usage on every chunk), "text" (counted in the chunk text) or "scaled"
	// (text counts rescaled to match usage.completion_tokens).
	TokenCountSource string `json:"token_count_source,omitempty"`

	// Derived per-request metrics in seconds (0 for failed requests).
	TTFT        float64 `json:"ttft"`
	E2EL        float64 `json:"e2el"`
	TPOT        float64 `json:"tpot,omitempty"` // only when completion_tokens > 1
	ClientQueue float64 `json:"client_queue"`

	usageSeen bool
	// cacheable is how many leading prompt tokens repeat an earlier request's
	// prompt (shared hash blocks): the theoretical prefix-cache hit.
	cacheable int
}

// finish classifies the request and fills the derived metrics. Classification
// order: transport/HTTP/stream errors set earlier win; then empty streams,
// then missing usage.
func (r *RequestRecord) finish() {
	if r.ErrorKind == "" {
		switch {
		case len(r.ChunkNs) == 0:
			r.ErrorKind, r.Error = ErrKindEmptyStream, "stream ended without any content or reasoning chunk"
		case !r.usageSeen:
			r.ErrorKind, r.Error = ErrKindMissingUsage, "stream ended without a usage block (stream_options.include_usage)"
		}
	}
	r.Success = r.ErrorKind == ""
	r.ClientQueue = float64(r.SendNs-r.DispatchNs) / 1e9
	if !r.Success {
		r.TTFT, r.E2EL, r.TPOT = 0, 0, 0
		return
	}
	r.reconcileTokens()
	r.TTFT = float64(r.FirstTokenNs-r.SendNs) / 1e9
	r.E2EL = float64(r.LastTokenNs-r.SendNs) / 1e9
	r.TPOT = 0
	if r.CompletionTokens > 1 {
		r.TPOT = (r.E2EL - r.TTFT) / float64(r.CompletionTokens-1)
	}
}

// reconcileTokens makes the per-chunk token counts sum to the server's
// usage.completion_tokens. Counts taken from cumulative usage deltas are
// exact. Counts taken from the chunk text (whitespace-separated words, the
// simulator's tokenizer rule) are kept when they already sum to the usage
// figure; otherwise they are rescaled proportionally with largest-remainder
// rounding, so a chunk that carried twice the text is credited twice the
// tokens and the total matches the server.
func (r *RequestRecord) reconcileTokens() {
	if r.TokenCountSource == "usage" || r.CompletionTokens <= 0 || len(r.ChunkTokens) == 0 {
		return
	}
	var sum int64
	for _, k := range r.ChunkTokens {
		sum += int64(k)
	}
	want := int64(r.CompletionTokens)
	if sum == want {
		return
	}
	r.TokenCountSource = "scaled"
	if sum == 0 {
		for i := range r.ChunkTokens {
			r.ChunkTokens[i] = 1
		}
		sum = int64(len(r.ChunkTokens))
	}
	type rem struct {
		i    int
		frac int64
	}
	rems := make([]rem, len(r.ChunkTokens))
	var assigned int64
	for i, k := range r.ChunkTokens {
		exact := int64(k) * want
		q := exact / sum
		rems[i] = rem{i, exact % sum}
		r.ChunkTokens[i] = int32(q)
		assigned += q
	}
	// Hand out the remaining tokens to the largest remainders, earliest first.
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.frac, a.frac) })
	for j := int64(0); j < want-assigned; j++ {
		r.ChunkTokens[rems[j].i]++
	}
}

// toEngineTime converts records measured against a server whose clock runs
// at scale times real time into that server's time, and recomputes the
// derived metrics.
func toEngineTime(recs []RequestRecord, scale float64) {
	conv := func(ns int64) int64 {
		if ns < 0 {
			return ns // "none" markers stay
		}
		return int64(float64(ns) / scale)
	}
	for i := range recs {
		r := &recs[i]
		r.DispatchNs, r.SendNs, r.WrittenNs = conv(r.DispatchNs), conv(r.SendNs), conv(r.WrittenNs)
		r.FirstTokenNs, r.LastTokenNs, r.EndNs = conv(r.FirstTokenNs), conv(r.LastTokenNs), conv(r.EndNs)
		for j, ns := range r.ChunkNs {
			r.ChunkNs[j] = conv(ns)
		}
		r.finish()
	}
}
