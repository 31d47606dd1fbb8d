// Package sim is a simulated OpenAI-compatible inference engine: the
// stand-in for a GPU deployment in demos, tests and dry runs. It serves
// /v1/chat/completions and /v1/completions (SSE streaming and plain JSON),
// /health, /v1/models and Prometheus /metrics with SGLang's metric names.
// Everything it returns says it is simulated: system_fingerprint
// "sweepflow-simulated", the X-Sweepflow-Simulated header, "simulated": true
// in JSON bodies and a sweepflow_simulated metric.
//
// # Tokens
//
// A token is a whitespace-separated word (CountTokens). Prompt tokens are
// the words of all messages (no chat-template overhead) or of the prompt;
// a token-id prompt counts one token per id. Replies are generated as
// words, so re-counting a reply gives usage.completion_tokens.
//
// # Latency model
//
// All durations below are model time; the wall-clock wait is model time ×
// TimeScale × Slowdown. Coefficients are LatencyModel fields (defaults in
// DefaultLatencyModel).
//
// Prefill. Each DP-attention rank of a prefill worker is one FIFO queue
// prefilling at PrefillTokensPerGPUSecond; a worker without DP-attention is
// one queue at tp × rate × PrefillTPEfficiency. A request goes to the queue
// that frees up first and waits behind the work already queued there
// (sglang:num_queue_reqs). Its prefill takes
//
//	PrefillOverhead + (ISL − cached) × (1 + (cached+ISL)/(2·AttentionQuadraticTokens)) / rate
//
// so TTFT grows with ISL (super-linearly for long prompts) and with load.
// Disaggregated deployments add the KV hand-off
// KVTransferOverhead + ISL × KVBytesPerToken / KVTransferBytesPerSecond.
// TTFT = queueing + prefill (+ transfer); the first chunk carries 1 token.
//
// Prefix cache. Prompts are hashed in CacheBlockTokens-token pages, each
// page's hash chaining all text before it (message roles included), and
// kept in one LRU of CacheTokensPerGPU × prefill GPUs tokens. The leading
// pages already cached are not prefilled (at most ISL−1 tokens hit) and are
// reported as usage.prompt_tokens_details.cached_tokens. A resent chat
// history therefore hits; a per-session marker at the start of the first
// message keeps sessions apart.
//
// Decode. A request joins the decode worker with the smallest batch (its
// own worker when aggregated). Each decode step takes
//
//	base    = DecodeStepBase × (1 + CommPerDoubling × log2(tp))
//	perRank = batch / ranks   (ranks = tp with DP-attention, rounded up;
//	                           else 1 + (tp−1) × DecodeTPEfficiency)
//	step    = base + DecodeStepPerRequest × perRank + DecodeStepPerKContext × context/ranks/1000
//	step   ×= 1 + SpecStepOverhead × (AL − 1)
//	step   ×= 1 ± StepJitter (uniform, seeded)
//
// where batch and context are the worker's running requests and their
// total context tokens at that moment. In an aggregated worker a step taken
// while its prefill queue is busy also absorbs one prefill chunk
// (min(backlog, ChunkedPrefillTokens/rate)), so prefill disturbs ITL there.
// With speculative decoding each step (SSE chunk) carries floor(AL) or
// floor(AL)+1 tokens, chosen with the seed so the mean is AL. Expert
// parallelism only labels the deployment; it does not change the latency.
// Each request runs its own steps against the current batch rather than in
// lockstep with the others, and decode admission limits are not modelled.
//
// Each stream follows an absolute wall-clock schedule on one timer. Chunks
// that fall due while the stream is less than 100 ms behind (timer
// granularity, a busy host) are sent at once, so mean ITL, E2E and
// throughput follow the model even at tiny time scales; further behind,
// the schedule restarts from now.
//
// Fast mode (FixedTTFT/FixedITL/FastMode) bypasses the model: the first
// token after FixedTTFT, then one chunk (AL tokens with speculation) every
// FixedITL, for measuring the client rather than the engine.
//
// # Replies
//
// Without ignore_eos a filler reply stops after a reproducible length in
// (max_tokens/2, max_tokens]; with it, exactly max_tokens. GSM8K questions
// from Config.GSM8KPath (the last "Question:"/"Q:" block of the prompt or
// last user message) are answered with the worked solution and "#### N"
// (or "The answer is N." for Q:/A: prompts), correct with probability
// Accuracy: hash(seed, question) < Accuracy under greedy decoding; with
// temperature > 0 the request seed (or request number) joins the hash.
// Wrong answers are gold ± a few percent, never gold.
//
// # Timelines
//
// For every request the server records arrival and the wall time after
// each chunk's Flush returned (Timeline, GET /sim/timeline?id=, GET
// /sim/timelines), so a load generator can check its own clock.
//
// A stream's usage chunk carries catch_up_gaps: how many of its chunks were
// already due when the stream got to them (a host behind the model) and so
// went out right behind the chunk before. No client can see those gaps
// arrive; the load generator does not count them as its own lag.
package sim
