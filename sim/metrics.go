package sim

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the engine counters, exported in Prometheus text format with
// SGLang's metric names so tools that require the sglang: prefix (aiperf's
// server-metrics check) accept the simulator.
type metrics struct {
	running, queued        atomic.Int64
	requests, finished     atomic.Int64
	failed                 atomic.Int64
	promptTokens, genToks  atomic.Int64
	cachedTokens           atomic.Int64
	decodeSteps, decodeTok atomic.Int64
	// schedule fidelity: chunks sent, chunks sent > lateAfter behind the
	// model's schedule, the worst lag, and when we last warned about it
	chunks, lateChunks    atomic.Int64
	maxLagNs, lastLagWarn atomic.Int64
	// warmup requests, served on the compressed warmup clock
	warmups atomic.Int64

	histMu sync.Mutex
	ttft   histogram
	e2e    histogram
}

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

func newMetrics() *metrics {
	return &metrics{
		ttft: newHistogram(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
		e2e:  newHistogram(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
	}
}

func (m *metrics) observeRequest(ttft, e2e time.Duration) {
	m.histMu.Lock()
	if ttft > 0 {
		m.ttft.observe(ttft.Seconds())
	}
	m.e2e.observe(e2e.Seconds())
	m.histMu.Unlock()
}

// handleMetrics writes the Prometheus text exposition format by hand.
func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	m := s.metrics
	lbl := `{model_name="` + promEscape(s.cfg.Model) + `"}`
	var b bytes.Buffer
	b.WriteString("# sweepflow simulated engine: these metrics are simulated, not measured on GPUs.\n")
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n", name, help, name, name, lbl, promFloat(v))
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s%s %s\n", name, help, name, name, lbl, promFloat(v))
	}
	fmt.Fprintf(&b, "# HELP sweepflow_simulated 1 when the engine is the sweepflow simulator.\n# TYPE sweepflow_simulated gauge\nsweepflow_simulated{model_name=\"%s\",deployment=\"%s\"} 1\n",
		promEscape(s.cfg.Model), promEscape(s.deploymentLabel()))
	gauge("sglang:num_running_reqs", "The number of running requests.", float64(m.running.Load()))
	gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", float64(m.queued.Load()))
	prompt, cached := m.promptTokens.Load(), m.cachedTokens.Load()
	hit := 0.0
	if prompt > 0 {
		hit = float64(cached) / float64(prompt)
	}
	gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", hit)
	usage := 0.0
	if s.cache != nil {
		usage = s.cache.usage()
	}
	gauge("sglang:token_usage", "The token usage of the prefix cache.", usage)
	al := 0.0
	if steps := m.decodeSteps.Load(); steps > 0 {
		al = float64(m.decodeTok.Load()) / float64(steps)
	}
	gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", al)
	counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", float64(prompt))
	counter("sglang:generation_tokens_total", "Number of generation tokens processed.", float64(m.genToks.Load()))
	fmt.Fprintf(&b, "# HELP sglang:cached_tokens_total Number of cached prompt tokens.\n# TYPE sglang:cached_tokens_total counter\nsglang:cached_tokens_total{model_name=\"%s\",cache_source=\"device\"} %d\n",
		promEscape(s.cfg.Model), cached)
	counter("sglang:num_requests_total", "Number of requests received.", float64(m.requests.Load()))
	counter("sglang:num_finished_requests_total", "Number of requests finished.", float64(m.finished.Load()))
	counter("sglang:num_failed_requests_total", "Number of requests answered with an error.", float64(m.failed.Load()))
	fmt.Fprintf(&b, "# HELP sweepflow_sim_chunks_total Token chunks the simulator streamed.\n# TYPE sweepflow_sim_chunks_total counter\nsweepflow_sim_chunks_total %d\n", m.chunks.Load())
	fmt.Fprintf(&b, "# HELP sweepflow_sim_late_chunks_total Chunks sent more than %s behind the latency model's schedule (host overloaded).\n# TYPE sweepflow_sim_late_chunks_total counter\nsweepflow_sim_late_chunks_total %d\n", lateAfter, m.lateChunks.Load())
	fmt.Fprintf(&b, "# HELP sweepflow_sim_max_schedule_lag_seconds Worst lag of a chunk behind the model's schedule.\n# TYPE sweepflow_sim_max_schedule_lag_seconds gauge\nsweepflow_sim_max_schedule_lag_seconds %s\n", promFloat(float64(m.maxLagNs.Load())/1e9))
	fmt.Fprintf(&b, "# HELP sweepflow_sim_warmup_requests_total Warmup requests (%s), served on the warmup clock (time scale x %g) and left out of the latency histograms and schedule lag.\n# TYPE sweepflow_sim_warmup_requests_total counter\nsweepflow_sim_warmup_requests_total %d\n", WarmupHeader, s.cfg.WarmupTimeScale, m.warmups.Load())
	m.histMu.Lock()
	writeHist(&b, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", lbl, &m.ttft)
	writeHist(&b, "sglang:e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.", lbl, &m.e2e)
	m.histMu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set(simulatedHeader, "true")
	_, _ = w.Write(b.Bytes())
}

func writeHist(b *bytes.Buffer, name, help, lbl string, h *histogram) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	inner := lbl[1 : len(lbl)-1]
	var cum uint64
	for i, ub := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", name, inner, promFloat(ub), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, inner, cum)
	fmt.Fprintf(b, "%s_sum%s %s\n%s_count%s %d\n", name, lbl, promFloat(h.sum), name, lbl, h.n)
}

func promFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// promEscape escapes a label value (backslash, quote, newline).
func promEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
