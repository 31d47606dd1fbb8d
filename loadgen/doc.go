// Package loadgen is a streaming load generator for OpenAI-compatible
// inference servers whose numbers follow the definitions vLLM, SGLang and
// InferenceX publish, measured by a client that
// stays out of the way: one shared HTTP/1.1 transport sized to the
// concurrency, a zero-allocation SSE path, and monotonic timestamps taken
// when each socket read returns, before any parsing.
//
// # Workloads and load
//
// Random prompts: lengths uniform in [max(floor(L*r),1), L] (InferenceX's
// random-range-ratio), built from a word list so that one word is one token
// for the simulator (CountTokens); requested and server-reported prompt
// tokens are both reported. max_tokens = OSL, optional ignore_eos, and
// stream_options.include_usage is always sent.
//
// AgentX replay (Options.Trace): traces in the public AgentX corpus format
// (cc-traces-weka: per session id, models, block_size, hash_id_scope and
// requests of {t, type, model, in, out, hash_ids, api_time}, subagents
// nested), replayed as InferenceX's aiperf scenario does (replay.go):
// Concurrency lanes of one live session each, first sessions starting
// between 25% and 75% of their trace after NumWarmups warmup calls per lane,
// idle gaps capped at 10 s and multiplied by TimeScale, prompts synthesised
// so equal hash ids are equal word blocks, and a per-session "[rid:<12
// hex>]" marker after the declared system/tool prefix. After Duration no
// call starts; calls in flight finish and count (DrainedAfterLimit).
// GenerateTrace writes corpus-shaped traces (DefaultTrace is the workload of
// agentic sweep points).
//
// Closed loop (RequestRate 0 or +Inf): Concurrency workers pull requests in
// order. Open loop: arrivals from Gamma(burstiness, 1/(rate*burstiness))
// intervals on an absolute schedule (send i is due at start + the sum of the
// first i intervals, so lateness never shifts later sends), capped at
// Concurrency in flight. The wait between the scheduled dispatch and the
// actual send is the client queue time, reported apart from TTFT.
//
// # Metrics (successful requests only)
//
//   - TTFT: send to the first chunk carrying non-empty content or reasoning
//     (delta.content, delta.reasoning_content, delta.reasoning, or text).
//   - E2EL: send to the last such chunk (vLLM); the usage chunk and [DONE]
//     are not tokens. The record's end_ns is when the body was fully read.
//   - TPOT per request: (E2EL - TTFT) / (OSL - 1) with OSL =
//     usage.completion_tokens, only when OSL > 1; aggregated per request.
//   - ITL: every gap between consecutive token-carrying chunks, pooled over
//     all requests (chunk-weighted, as vLLM/SGLang/InferenceX).
//   - Per-token ITL: each chunk gap g split evenly over the k tokens that
//     chunk carried, i.e. k samples of g/k, pooled. k is the delta of
//     cumulative usage.completion_tokens when the server sends usage on every
//     chunk (vLLM continuous_usage_stats); otherwise the number of
//     whitespace-separated words in the chunk's text, rescaled with
//     largest-remainder rounding when those counts do not add up to
//     usage.completion_tokens (record field token_count_source says which).
//   - Throughput: completed requests, input (usage.prompt_tokens), output
//     and total tokens divided by the time from the start of dispatch to the
//     last completion.
//   - Interactivity: InferenceX's 1000 / TPOT_ms applied to each TPOT
//     statistic: mean_intvty from the mean TPOT, median_intvty from the
//     median, p99_intvty from the p99 TPOT (the slow-tail user).
//   - Per GPU: total / all GPUs, output / decode GPUs, input / prefill GPUs;
//     aggregated serving uses all GPUs for each.
//   - Statistics: mean, median, population std, p90, p99, p99.9 with numpy's
//     linear-interpolated percentiles.
//
// Failures (transport errors, timeouts, non-200 status, {"error":...}
// payloads inside a 200 stream, malformed chunks, streams without any token
// chunk, streams without usage) are counted by kind and excluded from every
// latency and token statistic. Result.Gate fails a run when more than 10% of
// the measured requests failed or none succeeded; Result.Validate runs the
// validity gate every stored perf result passes (point.ValidatePerf).
//
// A chunk's time is when the socket read that delivered it returned. A chunk
// that came in the same read as the one before it was already waiting when
// the client read: the client never saw it arrive, and the gap before it
// reads 0. Each record counts these (unseen_gaps) and the aggregate reports
// their share of all chunk gaps as client_lag, the client's lag behind the
// streams, which the validity gate bounds.
//
// Output names follow InferenceX's processed results (agg_*.json: seconds,
// mean_ttft, p99.9_e2el, tput_per_gpu, ...) plus request_metrics for agentic
// runs, and "simulated": true when the server said so (X-Sweepflow-Simulated
// header or system_fingerprint "sweepflow-simulated").
package loadgen
