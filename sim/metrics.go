package sim

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// metrics are the engine counters, exported in Prometheus text format with
// SGLang's metric names so tools that require the sglang: prefix (aiperf's
// server-metrics check) accept the simulator. The hot path adds to the
// atomics; a scrape reads them through client_golang's func collectors.
type metrics struct {
	running, queued        atomic.Int64
	prefilling             atomic.Int64 // running requests before their first token
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
	evals   atomic.Int64

	ttft, e2e prometheus.Histogram

	// registry is built on the first scrape, from the server's effective
	// configuration (its model and deployment labels).
	once     sync.Once
	registry *prometheus.Registry
}

func newMetrics() *metrics {
	return &metrics{
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sglang:time_to_first_token_seconds", Help: "Histogram of time to first token in seconds.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sglang:e2e_request_latency_seconds", Help: "Histogram of end-to-end request latency in seconds.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}),
	}
}

func (m *metrics) observeRequest(ttft, e2e time.Duration) {
	if ttft > 0 {
		m.ttft.Observe(ttft.Seconds())
	}
	m.e2e.Observe(e2e.Seconds())
}

// newRegistry registers every metric of server s: the engine's under a
// model_name label, the simulator's own schedule figures without.
func (m *metrics) newRegistry(s *Server) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	engine := prometheus.WrapRegistererWith(prometheus.Labels{"model_name": s.cfg.Model}, reg)
	load := func(v *atomic.Int64) func() float64 { return func() float64 { return float64(v.Load()) } }
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	engine.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sweepflow_simulated", Help: "1 when the engine is the sweepflow simulator.",
			ConstLabels: prometheus.Labels{"deployment": s.deploymentLabel()}}, func() float64 { return 1 }),
		gauge("sglang:num_running_reqs", "The number of running requests.", load(&m.running)),
		gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", load(&m.queued)),
		gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", func() float64 {
			if prompt := m.promptTokens.Load(); prompt > 0 {
				return float64(m.cachedTokens.Load()) / float64(prompt)
			}
			return 0
		}),
		gauge("sglang:token_usage", "The token usage of the prefix cache.", func() float64 {
			if s.cache != nil {
				return s.cache.usage()
			}
			return 0
		}),
		gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", func() float64 {
			if steps := m.decodeSteps.Load(); steps > 0 {
				return float64(m.decodeTok.Load()) / float64(steps)
			}
			return 0
		}),
		counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", load(&m.promptTokens)),
		counter("sglang:generation_tokens_total", "Number of generation tokens processed.", load(&m.genToks)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sglang:cached_tokens_total", Help: "Number of cached prompt tokens.",
			ConstLabels: prometheus.Labels{"cache_source": "device"}}, load(&m.cachedTokens)),
		counter("sglang:num_requests_total", "Number of requests received.", load(&m.requests)),
		counter("sglang:num_finished_requests_total", "Number of requests finished.", load(&m.finished)),
		counter("sglang:num_failed_requests_total", "Number of requests answered with an error.", load(&m.failed)),
		m.ttft, m.e2e,
	)
	reg.MustRegister(
		counter("sweepflow_sim_chunks_total", "Token chunks the simulator streamed.", load(&m.chunks)),
		counter("sweepflow_sim_late_chunks_total", "Chunks sent more than "+lateAfter.String()+" behind the latency model's schedule (host overloaded).", load(&m.lateChunks)),
		gauge("sweepflow_sim_max_schedule_lag_seconds", "Worst lag of a chunk behind the model's schedule.", func() float64 { return float64(m.maxLagNs.Load()) / 1e9 }),
		counter("sweepflow_sim_warmup_requests_total", fmt.Sprintf("Warmup requests (%s), served on the warmup clock (time scale x %g) and left out of the latency histograms and schedule lag.", WarmupHeader, s.cfg.WarmupTimeScale), load(&m.warmups)),
		counter("sweepflow_sim_eval_requests_total", fmt.Sprintf("Accuracy-eval requests (%s), served on the warmup clock and left out of the latency histograms and schedule lag.", EvalHeader), load(&m.evals)),
	)
	return reg
}

// handleMetrics writes the Prometheus text exposition format, after a
// comment that says the figures are simulated.
func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	m := s.metrics
	m.once.Do(func() { m.registry = m.newRegistry(s) })
	families, err := m.registry.Gather()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	w.Header().Set(simulatedHeader, "true")
	_, _ = w.Write([]byte("# sweepflow simulated engine: these metrics are simulated, not measured on GPUs.\n"))
	enc := expfmt.NewEncoder(w, format)
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return
		}
	}
}
