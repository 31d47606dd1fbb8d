package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// DefaultModel is the model the simulator serves unless told otherwise: the
// seed sweep's DeepSeek-V4-Pro checkpoint.
const DefaultModel = "deepseek-ai/DeepSeek-V4-Pro-0813"

// DefaultDeployment is the seed sweep's largest point.
const DefaultDeployment = "2P1D DEP16/DEP32"

// Fingerprint is sent as system_fingerprint and in the /health, /v1/models
// and /metrics answers, so nothing the simulator says is taken for a measurement.
const Fingerprint = "sweepflow-simulated"

const simulatedHeader = "X-Sweepflow-Simulated"

// WarmupHeader marks a warmup request (any value but "", "0" and "false"):
// one a client excludes from every figure it reports, such as the per-lane
// AgentX warmup calls and the warmup phase of sweepflow's load generator.
// The simulator serves it on the warmup clock (Config.WarmupTimeScale).
const WarmupHeader = "X-Sweepflow-Warmup"

// EvalHeader marks an accuracy-eval request (sweepflow's GSM8K client sends
// it). Its answer does not depend on time and no latency figure is taken
// from it, so the simulator serves it on the warmup clock too: a GSM8K
// restart of a simulated point takes a second, not a minute. A real engine
// ignores the header.
const EvalHeader = "X-Sweepflow-Eval"

// DefaultWarmupTimeScale is the warmup clock unless Config says otherwise:
// a warmup request runs 50 times faster than the server's clock.
const DefaultWarmupTimeScale = 0.02

// ErrDied is returned by ListenAndServe when the DieAfter fault fired.
var ErrDied = errors.New("simulated engine died (fault injection: die after requests)")

// Faults injects the failures a benchmark client must survive. Request
// numbers are 1-based in arrival order over both completion endpoints.
type Faults struct {
	// HealthFailFor: /health and the completion endpoints answer 503 for
	// this long (wall clock, not scaled) after the server starts.
	HealthFailFor time.Duration
	// DieAfter: when request DieAfter+1 arrives the engine crashes: every
	// open stream and connection is reset and ListenAndServe returns ErrDied
	// (starter sim serve then exits 1).
	DieAfter int
	// ErrorStatus is the status of injected errors: 429 (with Retry-After)
	// or 503; default 503.
	ErrorStatus int
	// ErrorEvery fails every Nth request; ErrorBurstStart/Len fail requests
	// Start..Start+Len-1 (Start defaults to 1).
	ErrorEvery                     int
	ErrorBurstStart, ErrorBurstLen int
	// MidStreamErrorEvery: every Nth request answers 200, streams about half
	// of its chunks, then sends data: {"error":{...}} and [DONE] (vLLM's
	// shape). Non-streaming requests get a 500 instead.
	MidStreamErrorEvery int
	// CutStreamEvery: every Nth request answers 200, streams about half of
	// its chunks, then resets the connection with no error event and no
	// [DONE] (a proxy or engine crash mid-response). Non-streaming requests
	// are reset before the body.
	CutStreamEvery int
	// StallEvery: every Nth request pauses for StallFor (scaled by
	// TimeScale) about half-way through its output.
	StallEvery int
	StallFor   time.Duration
	// ZeroUsage: usage reports 0 completion tokens though the reply is
	// whole (broken token accounting): clients that take output tokens from
	// usage count none, and the validity gate refuses the figures.
	ZeroUsage bool
}

// Config configures a simulated engine.
type Config struct {
	// Deployment drives the latency model. Zero value: DefaultDeployment.
	Deployment Deployment
	// Model is the served model name. Default DefaultModel.
	Model string
	// TimeScale multiplies every simulated delay (0.01 makes a 60 s run take
	// 0.6 s). Default 1.
	TimeScale float64
	// WarmupTimeScale further multiplies the delays of warmup requests
	// (WarmupHeader) and accuracy-eval requests (EvalHeader): they run on a
	// compressed clock, their prefill queue time and decode steps computed
	// by the same model, then shortened. Nothing measures them (an eval
	// answer does not depend on time); what a warmup leaves behind (the prefix cache,
	// the request count) does not depend on time, so the requests measured
	// after it see the same engine state and the same latency model. A client
	// must not overlap warmup and measured requests (sweepflow's load
	// generator waits for every warmup call first). Default
	// DefaultWarmupTimeScale; 1 serves warmups on the server's clock.
	WarmupTimeScale float64
	// FixedTTFT/FixedITL switch to fixed-latency fast mode (no latency
	// model): first token after FixedTTFT, then one chunk every FixedITL.
	// Set FastMode to use fast mode with both at zero (as fast as possible).
	FixedTTFT, FixedITL time.Duration
	FastMode            bool
	// AcceptanceLength is the speculative-decoding acceptance length: each
	// decode step (chunk) yields floor(AL) or floor(AL)+1 tokens, mean AL.
	// Default 1 (no speculation).
	AcceptanceLength float64
	// GSM8KPath is a GSM8K JSONL split; prompts asking one of its questions
	// are answered correctly with probability Accuracy (0..1).
	GSM8KPath string
	Accuracy  float64
	// Reasoning streams a reasoning_content preamble before the content.
	Reasoning bool
	// Seed makes every pseudo-random choice reproducible.
	Seed int64
	// Slowdown multiplies every latency (1.2 = a 20% slower engine).
	// Default 1.
	Slowdown float64
	Faults   Faults
	// TimelineCapacity bounds the per-request timelines kept (default
	// 100000); TimelineMaxChunks bounds their total chunks (default 16M).
	TimelineCapacity  int
	TimelineMaxChunks int
	// Latency overrides coefficients of the latency model (zero = default).
	Latency LatencyModel
	// DefaultMaxTokens caps a request that sets neither max_tokens nor
	// max_completion_tokens. Default 1024.
	DefaultMaxTokens int
	// ContextLength rejects prompt+max_tokens beyond it. Default 1048576.
	ContextLength int
	// IdleTimeout closes idle keep-alive connections (ListenAndServe only).
	// Default 5 s, uvicorn's default, so clients must keep theirs shorter.
	IdleTimeout time.Duration
	Logger      *zap.Logger
}

// Server is a simulated OpenAI-compatible inference engine.
type Server struct {
	cfg       Config
	log       *zap.Logger
	fast      bool
	factor    float64 // wall seconds per model second
	eng       *engine
	cache     *prefixCache
	gsm       *gsm8kIndex
	metrics   *metrics
	timelines *timelineStore
	mux       *http.ServeMux

	seq     atomic.Uint64
	started atomic.Int64 // wall ns the server became reachable
	dead    chan struct{}
	dieOnce sync.Once
}

// New validates cfg, fills defaults and loads the GSM8K split if given.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if cfg.WarmupTimeScale == 0 {
		cfg.WarmupTimeScale = DefaultWarmupTimeScale
	}
	if cfg.Slowdown == 0 {
		cfg.Slowdown = 1
	}
	if cfg.AcceptanceLength == 0 {
		cfg.AcceptanceLength = 1
	}
	if cfg.TimelineCapacity == 0 {
		cfg.TimelineCapacity = 100_000
	}
	if cfg.TimelineMaxChunks == 0 {
		cfg.TimelineMaxChunks = 16 << 20
	}
	if cfg.DefaultMaxTokens == 0 {
		cfg.DefaultMaxTokens = 1024
	}
	if cfg.ContextLength == 0 {
		cfg.ContextLength = 1 << 20
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	if cfg.Faults.ErrorStatus == 0 {
		cfg.Faults.ErrorStatus = http.StatusServiceUnavailable
	}
	if cfg.Faults.ErrorBurstStart == 0 {
		cfg.Faults.ErrorBurstStart = 1
	}
	if cfg.Deployment == (Deployment{}) {
		cfg.Deployment, _ = ParseDeployment(DefaultDeployment)
	}
	if cfg.Deployment.GPUsPerNode == 0 {
		cfg.Deployment.GPUsPerNode = DefaultGPUsPerNode
	}
	switch {
	case cfg.TimeScale < 0:
		return nil, fmt.Errorf("sim: time scale must be > 0, got %g", cfg.TimeScale)
	case cfg.WarmupTimeScale < 0 || cfg.WarmupTimeScale > 1:
		return nil, fmt.Errorf("sim: warmup time scale must be in (0, 1], got %g", cfg.WarmupTimeScale)
	case cfg.Slowdown < 0:
		return nil, fmt.Errorf("sim: slowdown must be > 0, got %g", cfg.Slowdown)
	case cfg.AcceptanceLength < 1:
		return nil, fmt.Errorf("sim: acceptance length must be >= 1, got %g", cfg.AcceptanceLength)
	case cfg.Accuracy < 0 || cfg.Accuracy > 1:
		return nil, fmt.Errorf("sim: accuracy must be in [0,1], got %g", cfg.Accuracy)
	case cfg.FixedTTFT < 0 || cfg.FixedITL < 0:
		return nil, fmt.Errorf("sim: fixed TTFT/ITL must not be negative")
	case cfg.TimelineCapacity < 0 || cfg.TimelineMaxChunks < 0:
		return nil, fmt.Errorf("sim: timeline capacity must not be negative")
	case cfg.DefaultMaxTokens < 0 || cfg.ContextLength < 0:
		return nil, fmt.Errorf("sim: default max tokens and context length must not be negative")
	case cfg.Faults.ErrorStatus != 429 && cfg.Faults.ErrorStatus != 503 && (cfg.Faults.ErrorStatus < 400 || cfg.Faults.ErrorStatus > 599):
		return nil, fmt.Errorf("sim: fault error status must be 4xx or 5xx, got %d", cfg.Faults.ErrorStatus)
	case cfg.Faults.DieAfter < 0 || cfg.Faults.ErrorEvery < 0 || cfg.Faults.ErrorBurstLen < 0 || cfg.Faults.ErrorBurstStart < 0 ||
		cfg.Faults.MidStreamErrorEvery < 0 || cfg.Faults.CutStreamEvery < 0 || cfg.Faults.StallEvery < 0 || cfg.Faults.StallFor < 0 || cfg.Faults.HealthFailFor < 0:
		return nil, fmt.Errorf("sim: fault settings must not be negative")
	}
	if err := cfg.Deployment.Validate(); err != nil {
		return nil, fmt.Errorf("sim: deployment: %w", err)
	}
	cfg.Latency = cfg.Latency.withDefaults()
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		fast:      cfg.FastMode || cfg.FixedTTFT > 0 || cfg.FixedITL > 0,
		factor:    cfg.TimeScale * cfg.Slowdown,
		metrics:   newMetrics(),
		timelines: newTimelineStore(cfg.TimelineCapacity, cfg.TimelineMaxChunks),
		dead:      make(chan struct{}),
	}
	if !s.fast {
		s.eng = newEngine(cfg.Latency, cfg.Deployment, cfg.AcceptanceLength, s.factor, uint64(cfg.Seed))
		pages := cfg.Latency.CacheTokensPerGPU * max(cfg.Deployment.PrefillGPUs(), 1) / cfg.Latency.CacheBlockTokens
		s.cache = newPrefixCache(pages)
	}
	if cfg.GSM8KPath != "" {
		g, err := loadGSM8K(cfg.GSM8KPath)
		if err != nil {
			return nil, fmt.Errorf("sim: gsm8k: %w", err)
		}
		s.gsm = g
	}
	s.started.Store(time.Now().UnixNano())
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handleCompletion(w, r, true) })
	s.mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.handleCompletion(w, r, false) })
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /metrics", s.handleMetrics)
	s.mux.HandleFunc("GET /sim/timeline", s.handleTimeline)
	s.mux.HandleFunc("GET /sim/timelines", s.handleTimelines)
	s.mux.HandleFunc("GET /sim/info", s.handleInfo)
	s.mux.HandleFunc("POST /flush_cache", s.handleFlushCache)
	s.log.Info("simulated engine configured",
		zap.String("model", cfg.Model), zap.String("deployment", s.deploymentLabel()),
		zap.Bool("fast_mode", s.fast), zap.Float64("time_scale", cfg.TimeScale),
		zap.Float64("warmup_time_scale", cfg.WarmupTimeScale),
		zap.Float64("acceptance_length", cfg.AcceptanceLength), zap.Float64("slowdown", cfg.Slowdown),
		zap.Bool("gsm8k", s.gsm != nil))
	return s, nil
}

func (s *Server) deploymentLabel() string {
	if s.fast {
		return fmt.Sprintf("fast ttft=%s itl=%s", s.cfg.FixedTTFT, s.cfg.FixedITL)
	}
	return s.cfg.Deployment.String()
}

// Config returns the effective configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// Dead is closed when the DieAfter fault fires.
func (s *Server) Dead() <-chan struct{} { return s.dead }

// Load is how many requests the engine is serving now: in prefill (before
// their first token) and decoding. The simulated DCGM exporter's power
// model follows it.
func (s *Server) Load() (prefilling, decoding int64) {
	p := s.metrics.prefilling.Load()
	return p, max(s.metrics.running.Load()-p, 0)
}

func (s *Server) die() {
	s.dieOnce.Do(func() {
		s.log.Warn("simulated engine crashing (fault injection)", zap.Int("die_after", s.cfg.Faults.DieAfter))
		close(s.dead)
	})
}

func (s *Server) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

// Handler serves the OpenAI-compatible API, /health, /v1/models, /metrics,
// SGLang's POST /flush_cache and the simulator's own /sim/timeline,
// /sim/timelines and /sim/info.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.isDead() {
			resetConn(w)
			return
		}
		w.Header().Set(simulatedHeader, "true")
		s.mux.ServeHTTP(w, r)
	})
}

// handleFlushCache empties the prefix cache, as SGLang's POST /flush_cache
// does, so one point's prompts cannot be cached for the next.
func (s *Server) handleFlushCache(w http.ResponseWriter, _ *http.Request) {
	if s.cache != nil {
		s.cache.flush()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("Cache flushed.\n"))
}

// resetConn drops the client's connection with a TCP reset, as a crashed
// process would.
func resetConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// ListenAndServe listens on addr (":0" picks a port), calls ready with the
// bound address, and serves until ctx ends (graceful shutdown, 10 s grace
// for open streams) or the DieAfter fault fires (returns ErrDied).
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.started.Store(time.Now().UnixNano())
	fresh := &freshConns{m: map[net.Conn]struct{}{}}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
		ConnState:         fresh.track,
	}
	s.log.Info("simulated engine listening", zap.String("addr", ln.Addr().String()))
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Shutdown counts a connection that has not sent a request yet as
		// busy for its first 5 s (net/http issue 22682); a client's spare
		// connection would hold every teardown that long.
		fresh.close()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		s.log.Info("simulated engine stopped")
		return nil
	case <-s.dead:
		_ = srv.Close()
		return ErrDied
	case err := <-errc:
		return err
	}
}

// ready reports whether the health fault window is over.
func (s *Server) ready(now time.Time) bool {
	return now.UnixNano()-s.started.Load() >= int64(s.cfg.Faults.HealthFailFor)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if !s.ready(time.Now()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"starting","simulated":true}` + "\n"))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok","simulated":true}` + "\n"))
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.Model, "object": "model", "created": s.started.Load() / 1e9,
			"owned_by": Fingerprint, "max_model_len": s.cfg.ContextLength,
			"simulated": true, "deployment": s.deploymentLabel(),
		}},
		"simulated": true,
	})
}

// handleInfo describes the simulation: deployment, latency coefficients and
// faults, so a result can always be traced to the model that produced it.
func (s *Server) handleInfo(w http.ResponseWriter, _ *http.Request) {
	d := s.cfg.Deployment
	writeJSON(w, http.StatusOK, map[string]any{
		"simulated":         true,
		"model":             s.cfg.Model,
		"deployment":        s.deploymentLabel(),
		"disagg":            d.Disagg,
		"num_prefill_gpu":   d.PrefillGPUs(),
		"num_decode_gpu":    d.DecodeGPUs(),
		"nodes":             d.Nodes(),
		"fast_mode":         s.fast,
		"fixed_ttft_ms":     float64(s.cfg.FixedTTFT) / 1e6,
		"fixed_itl_ms":      float64(s.cfg.FixedITL) / 1e6,
		"time_scale":        s.cfg.TimeScale,
		"warmup_time_scale": s.cfg.WarmupTimeScale,
		"slowdown":          s.cfg.Slowdown,
		"acceptance_length": s.cfg.AcceptanceLength,
		"gsm8k":             s.gsm != nil,
		"accuracy":          s.cfg.Accuracy,
		"reasoning":         s.cfg.Reasoning,
		"seed":              s.cfg.Seed,
		"latency_model":     s.cfg.Latency,
		"faults":            s.cfg.Faults,
	})
}

// Timeline returns what the server recorded for a finished request.
func (s *Server) Timeline(id string) (Timeline, bool) { return s.timelines.get(id) }

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, http.StatusBadRequest, "missing query parameter id", "BadRequestError")
		return
	}
	t, ok := s.Timeline(id)
	if !ok {
		writeError(w, http.StatusNotFound, "no timeline for "+id+" (unknown, still running, or evicted)", "NotFoundError")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// handleTimelines streams every stored timeline as JSON lines, oldest first.
func (s *Server) handleTimelines(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, r := range s.timelines.all() {
		if err := enc.Encode(r.timeline()); err != nil {
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers in the OpenAI error shape.
func writeError(w http.ResponseWriter, status int, msg, typ string) {
	writeJSON(w, status, map[string]any{
		"error":     map[string]any{"message": msg, "type": typ, "param": nil, "code": status},
		"simulated": true,
	})
}

// freshConns tracks connections that have not started a request yet.
type freshConns struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		f.m[c] = struct{}{}
	} else {
		delete(f.m, c)
	}
}

// close closes every connection still waiting for its first request.
func (f *freshConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.m {
		_ = c.Close()
	}
}
