package sim

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// LatencyModel holds the coefficients of the simulated engine's latency.
// Zero fields take the value from DefaultLatencyModel. The defaults describe
// a DeepSeek-class FP4 MoE model on GB200 NVL72 (see the package comment for
// the formulas); they are a plausible shape, not a measurement.
type LatencyModel struct {
	// PrefillTokensPerGPUSecond is the prompt tokens one GPU prefills per
	// second at full efficiency.
	PrefillTokensPerGPUSecond float64
	// PrefillTPEfficiency scales a worker without DP-attention: it prefills
	// one request at a time at tp×rate×efficiency.
	PrefillTPEfficiency float64
	// PrefillOverhead is the fixed cost of every prefill (scheduling, the
	// first forward pass, sampling the first token).
	PrefillOverhead time.Duration
	// AttentionQuadraticTokens makes prefill superlinear: a token at position
	// p costs 1+p/AttentionQuadraticTokens units.
	AttentionQuadraticTokens float64

	// KVBytesPerToken and KVTransferBytesPerSecond set the time to move a
	// prompt's KV cache from a prefill to a decode worker (disaggregated).
	KVBytesPerToken          float64
	KVTransferBytesPerSecond float64
	KVTransferOverhead       time.Duration

	// DecodeStepBase is one decode step at batch 1 (weights and launches).
	DecodeStepBase time.Duration
	// DecodeStepPerRequest is the added step time per running request on one
	// attention rank; DecodeStepPerKContext per 1000 context tokens on it.
	DecodeStepPerRequest  time.Duration
	DecodeStepPerKContext time.Duration
	// DecodeTPEfficiency: without DP-attention the batch is not split across
	// ranks; each extra TP rank counts as this fraction of a rank.
	DecodeTPEfficiency float64
	// CommPerDoubling grows the base step per doubling of GPUs per worker
	// (all-to-all / all-reduce cost).
	CommPerDoubling float64
	// SpecStepOverhead: with speculative decoding at acceptance length AL a
	// step costs (1+SpecStepOverhead×(AL−1)) times as much and yields ~AL tokens.
	SpecStepOverhead float64
	// ChunkedPrefillTokens: in an aggregated worker a decode step that runs
	// while the worker is prefilling also carries one prefill chunk this big.
	ChunkedPrefillTokens int
	// StepJitter is the half-width of the uniform, seeded jitter on each step.
	StepJitter float64

	// CacheBlockTokens is the prefix-cache page; only whole pages hit.
	CacheBlockTokens int
	// CacheTokensPerGPU is the prefix-cache capacity per prefill GPU (device
	// KV plus a host-memory tier such as HiCache).
	CacheTokensPerGPU int
}

// DefaultLatencyModel returns the documented default coefficients.
func DefaultLatencyModel() LatencyModel {
	return LatencyModel{
		PrefillTokensPerGPUSecond: 25000, // published GB200 NVL72 DeepSeek prefill: ~26k tok/s/GPU
		PrefillTPEfficiency:       0.8,
		PrefillOverhead:           15 * time.Millisecond,
		AttentionQuadraticTokens:  65536,
		KVBytesPerToken:           61 * 576, // 61 layers × 576-wide MLA latent, FP8
		KVTransferBytesPerSecond:  50e9,
		KVTransferOverhead:        3 * time.Millisecond,
		DecodeStepBase:            7 * time.Millisecond,
		DecodeStepPerRequest:      400 * time.Microsecond,
		DecodeStepPerKContext:     5 * time.Microsecond,
		DecodeTPEfficiency:        0.3,
		CommPerDoubling:           0.04,
		SpecStepOverhead:          0.12,
		ChunkedPrefillTokens:      8192,
		StepJitter:                0.05,
		CacheBlockTokens:          64,
		CacheTokensPerGPU:         1_000_000,
	}
}

// withDefaults fills zero fields.
func (m LatencyModel) withDefaults() LatencyModel {
	d := DefaultLatencyModel()
	setF := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setI := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setF(&m.PrefillTokensPerGPUSecond, d.PrefillTokensPerGPUSecond)
	setF(&m.PrefillTPEfficiency, d.PrefillTPEfficiency)
	setD(&m.PrefillOverhead, d.PrefillOverhead)
	setF(&m.AttentionQuadraticTokens, d.AttentionQuadraticTokens)
	setF(&m.KVBytesPerToken, d.KVBytesPerToken)
	setF(&m.KVTransferBytesPerSecond, d.KVTransferBytesPerSecond)
	setD(&m.KVTransferOverhead, d.KVTransferOverhead)
	setD(&m.DecodeStepBase, d.DecodeStepBase)
	setD(&m.DecodeStepPerRequest, d.DecodeStepPerRequest)
	setD(&m.DecodeStepPerKContext, d.DecodeStepPerKContext)
	setF(&m.DecodeTPEfficiency, d.DecodeTPEfficiency)
	setF(&m.CommPerDoubling, d.CommPerDoubling)
	setF(&m.SpecStepOverhead, d.SpecStepOverhead)
	setI(&m.ChunkedPrefillTokens, d.ChunkedPrefillTokens)
	setF(&m.StepJitter, d.StepJitter)
	setI(&m.CacheBlockTokens, d.CacheBlockTokens)
	setI(&m.CacheTokensPerGPU, d.CacheTokensPerGPU)
	return m
}

// prefillServer is one queue that prefills requests one after another: a
// DP-attention rank, or a whole worker without DP-attention.
type prefillServer struct {
	rate   float64      // prompt tokens per model second
	freeAt atomic.Int64 // wall unix ns when the queue drains; written under engine.mu
	worker *decodeWorker
}

// decodeWorker is one continuous-batching decode engine (the aggregated
// worker itself when prefill and decode share GPUs).
type decodeWorker struct {
	batch     atomic.Int64 // running decode requests
	ctxTokens atomic.Int64 // sum of their context lengths
	ranks     float64      // attention ranks the batch is spread over
	dpa       bool
	base      float64 // base step, model seconds, communication included
	chunk     float64 // aggregated: one prefill chunk, model seconds
	prefill   []*prefillServer
}

// engine is the latency model bound to a deployment. All times it hands out
// are wall-clock: model durations are multiplied by factor (TimeScale ×
// Slowdown) first.
type engine struct {
	m      LatencyModel
	d      Deployment
	al     float64
	factor float64
	seed   uint64

	mu      sync.Mutex // serialises prefill admission
	prefill []*prefillServer
	decode  []*decodeWorker
}

func newEngine(m LatencyModel, d Deployment, al, factor float64, seed uint64) *engine {
	e := &engine{m: m, d: d, al: al, factor: factor, seed: seed}
	newWorker := func(tp int, dpa bool) *decodeWorker {
		w := &decodeWorker{dpa: dpa, ranks: 1 + float64(tp-1)*m.DecodeTPEfficiency}
		if dpa {
			w.ranks = float64(tp)
		}
		w.base = m.DecodeStepBase.Seconds() * (1 + m.CommPerDoubling*math.Log2(float64(tp)))
		return w
	}
	addPrefill := func(tp int, dpa bool, w *decodeWorker) {
		servers, rate := 1, m.PrefillTokensPerGPUSecond*float64(tp)*m.PrefillTPEfficiency
		if tp == 1 {
			rate = m.PrefillTokensPerGPUSecond
		}
		if dpa {
			servers, rate = tp, m.PrefillTokensPerGPUSecond
		}
		for range servers {
			ps := &prefillServer{rate: rate, worker: w}
			e.prefill = append(e.prefill, ps)
			if w != nil {
				w.prefill = append(w.prefill, ps)
				w.chunk = float64(m.ChunkedPrefillTokens) / rate
			}
		}
	}
	if d.Disagg {
		for range d.PrefillWorkers {
			addPrefill(d.PrefillTP, d.PrefillDPA, nil)
		}
		for range d.DecodeWorkers {
			e.decode = append(e.decode, newWorker(d.DecodeTP, d.DecodeDPA))
		}
	} else {
		for range d.PrefillWorkers {
			w := newWorker(d.PrefillTP, d.PrefillDPA)
			e.decode = append(e.decode, w)
			addPrefill(d.PrefillTP, d.PrefillDPA, w)
		}
	}
	return e
}

// wallAt converts model seconds at a request's own clock factor (the
// server's, or the compressed one of a warmup request).
func (e *engine) wallAt(modelSeconds, factor float64) time.Duration {
	return time.Duration(modelSeconds * factor * float64(time.Second))
}

// prefillSeconds is the model time to prefill isl tokens of which cached are
// already in the prefix cache: tokens at positions cached..isl cost
// 1+p/Q units each, i.e. on average 1+(cached+isl)/(2Q).
func (e *engine) prefillSeconds(isl, cached int, rate float64) float64 {
	uncached := float64(isl - cached)
	quad := 1 + float64(cached+isl)/(2*e.m.AttentionQuadraticTokens)
	return e.m.PrefillOverhead.Seconds() + uncached*quad/rate
}

// transferSeconds is the disaggregated KV hand-off of isl tokens.
func (e *engine) transferSeconds(isl int) float64 {
	if !e.d.Disagg {
		return 0
	}
	return e.m.KVTransferOverhead.Seconds() + float64(isl)*e.m.KVBytesPerToken/e.m.KVTransferBytesPerSecond
}

// prefillPlan is when a request's prefill starts and when its first token
// is ready, both wall clock.
type prefillPlan struct {
	start, firstToken time.Time
	server            *prefillServer
}

// admit queues a prefill on the server that frees up first (FIFO per server,
// like a router that sends work to the least-loaded queue). factor is the
// request's clock (wall seconds per model second).
func (e *engine) admit(now time.Time, isl, cached int, factor float64) prefillPlan {
	e.mu.Lock()
	best := e.prefill[0]
	for _, p := range e.prefill[1:] {
		if p.freeAt.Load() < best.freeAt.Load() {
			best = p
		}
	}
	start := now
	if f := best.freeAt.Load(); f > now.UnixNano() {
		start = time.Unix(0, f)
	}
	done := start.Add(e.wallAt(e.prefillSeconds(isl, cached, best.rate), factor))
	best.freeAt.Store(done.UnixNano())
	e.mu.Unlock()
	return prefillPlan{start: start, firstToken: done.Add(e.wallAt(e.transferSeconds(isl), factor)), server: best}
}

// joinDecode places a request on a decode worker: its own worker when
// aggregated, else the one with the smallest batch.
func (e *engine) joinDecode(p prefillPlan, ctx int) *decodeWorker {
	w := p.server.worker
	if w == nil {
		w = e.decode[0]
		for _, d := range e.decode[1:] {
			if d.batch.Load() < w.batch.Load() {
				w = d
			}
		}
	}
	w.batch.Add(1)
	w.ctxTokens.Add(int64(ctx))
	return w
}

func (w *decodeWorker) leave(ctx int) {
	w.batch.Add(-1)
	w.ctxTokens.Add(-int64(ctx))
}

// stepSeconds is the model time of the next decode step on w:
//
//	step = base×(1+comm×log2(tp)) + perReq×batch/ranks + perKCtx×ctx/ranks/1000
//	step ×= 1 + spec×(AL−1);  step ×= 1 ± jitter
//	aggregated and prefilling: step += min(prefill backlog, one chunk)
func (e *engine) stepSeconds(w *decodeWorker, now time.Time, jitterHash uint64) float64 {
	return e.stepSecondsAt(w, now, jitterHash, e.factor)
}

// stepSecondsAt is stepSeconds for a request on its own clock factor (a
// warmup request's is compressed): the prefill backlog is wall time and is
// read on that clock.
func (e *engine) stepSecondsAt(w *decodeWorker, now time.Time, jitterHash uint64, factor float64) float64 {
	batch := float64(w.batch.Load())
	perRank := batch / w.ranks
	if w.dpa {
		perRank = math.Ceil(perRank) // ranks step in lockstep; the fullest one sets the pace
	}
	ctxPerRank := float64(w.ctxTokens.Load()) / w.ranks
	s := w.base + e.m.DecodeStepPerRequest.Seconds()*perRank + e.m.DecodeStepPerKContext.Seconds()*ctxPerRank/1000
	s *= 1 + e.m.SpecStepOverhead*(e.al-1)
	s *= 1 + e.m.StepJitter*(2*unit(jitterHash)-1)
	if len(w.prefill) > 0 {
		var backlog float64
		for _, p := range w.prefill {
			if f := p.freeAt.Load() - now.UnixNano(); f > 0 {
				backlog = math.Max(backlog, float64(f)/float64(time.Second)/factor)
			}
		}
		s += math.Min(backlog, w.chunk)
	}
	return s
}

// tokensPerStep samples how many tokens a step yields: floor(AL) or
// floor(AL)+1 with the probability that makes the mean AL.
func tokensPerStep(al float64, h uint64) int {
	fl := math.Floor(al)
	n := int(fl)
	if unit(h) < al-fl {
		n++
	}
	return max(n, 1)
}
