package loadgen

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a run. Zero values take the defaults noted.
type Options struct {
	BaseURL  string // e.g. http://127.0.0.1:8000
	Endpoint string // /v1/chat/completions (default) or /v1/completions
	Model    string // default: the first id from GET /v1/models

	// Concurrency is the number of requests in flight (closed loop), the cap
	// on in-flight requests (open loop), or the number of live sessions
	// (agentic replay). Required.
	Concurrency int
	// NumPrompts is the number of measured requests (default 10 x
	// Concurrency, as InferenceX; unlimited when only Duration is set). In
	// agentic replay it counts plays of a trace, the lanes' first plays
	// included (default: as many as there are traces; unlimited with
	// Duration).
	NumPrompts int
	// NumWarmups requests run before the measured phase through the same
	// concurrency and are excluded from every metric. Taken literally (0 =
	// none); DefaultNumWarmups gives InferenceX's 2 x Concurrency. In agentic
	// replay it is the warmup calls per lane (InferenceX: 10, fast mode 1).
	NumWarmups int
	// RequestRate in requests/s; 0 or +Inf means closed loop.
	RequestRate float64
	// Burstiness is the gamma shape of inter-arrival times (default 1 =
	// Poisson); lower is burstier.
	Burstiness float64
	// Duration stops dispatching new requests after this long; in-flight
	// requests finish. 0 = no limit.
	Duration time.Duration

	ISL, OSL int // random workload lengths (tokens)
	// RandomRangeRatio r draws lengths uniformly from [max(floor(L*r),1), L]
	// (InferenceX/SGLang; InferenceX runs use 0.8). 0 means fixed lengths,
	// the same as 1, because [1, L] is rarely what anyone wants.
	RandomRangeRatio float64
	IgnoreEOS        bool

	// Trace switches to AgentX replay (replay.go): Concurrency lanes
	// replaying these traces.
	Trace []Trace
	// TrajectoryStartMin/Max bound where a lane's first play starts, as
	// fractions of the trace's duration (both 0: InferenceX's 0.25-0.75).
	TrajectoryStartMin, TrajectoryStartMax float64
	// StartAtBeginning starts every first play at its first call (no
	// warmup calls then).
	StartAtBeginning bool
	// IdleGapCap caps recorded idle gaps between calls (0: AgentX's 10 s;
	// negative: no cap).
	IdleGapCap time.Duration
	// TimeScale multiplies trace idle gaps (after the cap); default 1.
	TimeScale float64

	Seed           int64
	RequestTimeout time.Duration // per request; default 6 h (vLLM's)

	// GPU counts for per-GPU throughput: aggregated serving sets TotalGPUs
	// only; disaggregated sets PrefillGPUs and DecodeGPUs (total defaults to
	// their sum).
	PrefillGPUs, DecodeGPUs, TotalGPUs int

	// Progress, if set, is called from one goroutine about four times a
	// second and once at the end with measured requests done and the planned
	// total (0 when unbounded).
	Progress func(done, total int)
	// Extra fields merged into every request body (e.g. temperature);
	// may override max_tokens and ignore_eos.
	Extra map[string]any
	// ClockScale is the rate of the server's clock against real time: the
	// simulator's --time-scale (0.1 = ten times faster). Measured times are
	// divided by it so every figure reads in the engine's own time and a
	// compressed run reports the latencies and throughputs of the model it
	// simulates. 0 or 1: a real engine, nothing is converted.
	ClockScale float64
	// CutStreamsAfter > 0 is a fault (a chaos run): from this long after
	// the run starts, every response stream is cut after its first read,
	// as a dropped connection would cut it; those requests fail.
	CutStreamsAfter time.Duration
}

// DefaultNumWarmups is InferenceX's warmup count: 2 x concurrency.
func DefaultNumWarmups(concurrency int) int { return 2 * concurrency }

// DefaultRequestTimeout bounds one request when Options leaves it unset.
const DefaultRequestTimeout = 6 * time.Hour

// Result is what a run measured.
type Result struct {
	Aggregate Aggregate
	// Requests are the measured requests in dispatch order.
	Requests []RequestRecord
	// Warmups are the warmup requests (times relative to warmup start).
	Warmups []RequestRecord
	// StartedAt is the instant all Requests times are relative to.
	StartedAt time.Time
}

type runConfig struct {
	Options
	url     string
	chat    bool
	closed  bool
	limit   int // units to run; -1 = unbounded
	bodies  *bodyBuilder
	agentic bool
}

func (o Options) normalize() (*runConfig, error) {
	rc := &runConfig{Options: o}
	if o.BaseURL == "" {
		return nil, errors.New("loadgen: base URL is required")
	}
	if !strings.HasPrefix(o.BaseURL, "http://") && !strings.HasPrefix(o.BaseURL, "https://") {
		return nil, fmt.Errorf("loadgen: base URL %q must start with http:// or https://", o.BaseURL)
	}
	if rc.Endpoint == "" {
		rc.Endpoint = "/v1/chat/completions"
	}
	if !strings.HasPrefix(rc.Endpoint, "/") {
		rc.Endpoint = "/" + rc.Endpoint
	}
	switch {
	case strings.HasSuffix(rc.Endpoint, "/chat/completions"):
		rc.chat = true
	case strings.HasSuffix(rc.Endpoint, "/completions"):
	default:
		return nil, fmt.Errorf("loadgen: endpoint %q: want .../chat/completions or .../completions", rc.Endpoint)
	}
	rc.url = strings.TrimRight(o.BaseURL, "/") + rc.Endpoint
	if o.Concurrency < 1 {
		return nil, fmt.Errorf("loadgen: concurrency must be >= 1 (got %d)", o.Concurrency)
	}
	if o.NumPrompts < 0 || o.NumWarmups < 0 {
		return nil, fmt.Errorf("loadgen: num-prompts and num-warmups must be >= 0 (got %d, %d)", o.NumPrompts, o.NumWarmups)
	}
	if o.RequestRate < 0 || math.IsNaN(o.RequestRate) {
		return nil, fmt.Errorf("loadgen: request rate must be > 0 or inf (got %g)", o.RequestRate)
	}
	rc.closed = o.RequestRate == 0 || math.IsInf(o.RequestRate, 1)
	if rc.Burstiness == 0 {
		rc.Burstiness = 1
	}
	if rc.Burstiness < 0 || math.IsNaN(rc.Burstiness) {
		return nil, fmt.Errorf("loadgen: burstiness must be > 0 (got %g)", o.Burstiness)
	}
	if o.Duration < 0 {
		return nil, fmt.Errorf("loadgen: duration must be >= 0 (got %v)", o.Duration)
	}
	if rc.TimeScale == 0 {
		rc.TimeScale = 1
	}
	if rc.TimeScale < 0 {
		return nil, fmt.Errorf("loadgen: time scale must be > 0 (got %g)", o.TimeScale)
	}
	if rc.RequestTimeout == 0 {
		rc.RequestTimeout = DefaultRequestTimeout
	}
	if o.RandomRangeRatio < 0 || o.RandomRangeRatio > 1 {
		return nil, fmt.Errorf("loadgen: random range ratio must be in [0, 1] (got %g)", o.RandomRangeRatio)
	}
	if rc.RandomRangeRatio == 0 {
		rc.RandomRangeRatio = 1
	}
	if o.PrefillGPUs < 0 || o.DecodeGPUs < 0 || o.TotalGPUs < 0 {
		return nil, errors.New("loadgen: GPU counts must be >= 0")
	}
	if o.PrefillGPUs > 0 && o.DecodeGPUs > 0 && o.TotalGPUs > 0 && o.PrefillGPUs+o.DecodeGPUs != o.TotalGPUs {
		return nil, fmt.Errorf("loadgen: prefill GPUs %d + decode GPUs %d != total GPUs %d", o.PrefillGPUs, o.DecodeGPUs, o.TotalGPUs)
	}
	rc.agentic = len(o.Trace) > 0
	if rc.agentic {
		if !rc.closed {
			return nil, errors.New("loadgen: a request rate cannot be combined with trace replay (concurrency = live sessions)")
		}
		if rc.TrajectoryStartMin == 0 && rc.TrajectoryStartMax == 0 {
			rc.TrajectoryStartMin, rc.TrajectoryStartMax = DefaultTrajectoryStartMin, DefaultTrajectoryStartMax
		}
		if rc.TrajectoryStartMin < 0 || rc.TrajectoryStartMax > 1 || rc.TrajectoryStartMin > rc.TrajectoryStartMax {
			return nil, fmt.Errorf("loadgen: trajectory start window must satisfy 0 <= min <= max <= 1 (got %g, %g)", o.TrajectoryStartMin, o.TrajectoryStartMax)
		}
		if rc.IdleGapCap == 0 {
			rc.IdleGapCap = DefaultIdleGapCap
		}
		rc.limit = o.NumPrompts
		if rc.limit == 0 {
			rc.limit = len(o.Trace)
			if o.Duration > 0 {
				rc.limit = -1
			}
		}
	} else {
		if o.ISL <= 0 || o.OSL <= 0 {
			return nil, fmt.Errorf("loadgen: isl and osl must be > 0 for the random workload (got %d, %d)", o.ISL, o.OSL)
		}
		rc.limit = o.NumPrompts
		if rc.limit == 0 {
			rc.limit = 10 * o.Concurrency
			if o.Duration > 0 {
				rc.limit = -1
			}
		}
	}
	return rc, nil
}

// Run executes the warmup and measured phases and computes the aggregate.
// Cancelling ctx stops dispatching, aborts in-flight requests (recorded as
// "canceled") and returns what was measured together with the context error.
func Run(ctx context.Context, opts Options) (*Result, error) {
	rc, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	conns := rc.Concurrency
	if rc.agentic {
		conns *= 4 // subagents run beside their lane's main agent
	}
	tr := newTransport(conns)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	if opts.CutStreamsAfter > 0 {
		hc.Transport = &cutTransport{next: tr, from: time.Now().Add(opts.CutStreamsAfter)}
	}
	if rc.Model == "" {
		if rc.Model, err = discoverModel(ctx, hc, rc.BaseURL); err != nil {
			return nil, err
		}
	}
	if rc.bodies, err = newBodyBuilder(rc.Model, rc.chat, rc.Extra); err != nil {
		return nil, err
	}
	res := &Result{}
	var end time.Time // when the measured phase ended (zero: now)
	if rc.agentic {
		res.Warmups, res.Requests, res.StartedAt, end = runReplay(ctx, rc, hc)
	} else {
		if rc.NumWarmups > 0 {
			res.Warmups = newPhase(rc, hc, true).run(ctx, rc.NumWarmups)
		}
		if ctx.Err() == nil {
			ph := newPhase(rc, hc, false)
			ph.progress = rc.Progress
			res.Requests = ph.run(ctx, rc.limit)
			res.StartedAt = ph.c.epoch
		}
	}
	res.Aggregate = rc.metadata(res)
	if !res.StartedAt.IsZero() {
		if end.IsZero() {
			end = time.Now()
		}
		res.Aggregate.Window = end.Sub(res.StartedAt).Seconds()
	}
	scenario := ScenarioFixedSeqLen
	if rc.agentic {
		scenario = ScenarioAgentic
	}
	if s := opts.ClockScale; s > 0 && s != 1 {
		toEngineTime(res.Requests, s)
		toEngineTime(res.Warmups, s)
		res.Aggregate.ClockScale = s
		res.Aggregate.DurationLimit /= s
		res.Aggregate.Window /= s
	}
	computeAggregate(&res.Aggregate, res.Requests, scenario)
	for i := range res.Warmups {
		if !res.Warmups[i].Success {
			res.Aggregate.WarmupFailed++
		}
		if res.Warmups[i].Simulated {
			res.Aggregate.Simulated = true
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("loadgen: run interrupted: %w", err)
	}
	return res, nil
}

func (rc *runConfig) metadata(res *Result) Aggregate {
	rate := Rate(rc.RequestRate)
	if rc.closed {
		rate = Rate(math.Inf(1))
	}
	a := Aggregate{
		BaseURL:          rc.BaseURL,
		Endpoint:         rc.Endpoint,
		Model:            rc.Model,
		Conc:             rc.Concurrency,
		MaxConcurrency:   rc.Concurrency,
		NumPrompts:       len(res.Requests),
		NumWarmups:       len(res.Warmups),
		RequestRate:      rate,
		Burstiness:       rc.Burstiness,
		ISL:              rc.ISL,
		OSL:              rc.OSL,
		RandomRangeRatio: rc.RandomRangeRatio,
		IgnoreEOS:        rc.IgnoreEOS || rc.agentic,
		Seed:             rc.Seed,
		DurationLimit:    rc.Duration.Seconds(),
		NumPrefillGPU:    rc.PrefillGPUs,
		NumDecodeGPU:     rc.DecodeGPUs,
		NumGPU:           rc.TotalGPUs,
	}
	if !res.StartedAt.IsZero() {
		a.StartedAt = res.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	return a
}

// phase runs one set of random-workload requests with its own epoch.
type phase struct {
	rc       *runConfig
	c        *client
	warmup   bool
	deadline time.Time
	next     atomic.Int64 // next unit
	done     atomic.Int64 // finished requests
	progress func(done, total int)
}

func newPhase(rc *runConfig, hc *http.Client, warmup bool) *phase {
	return &phase{rc: rc, warmup: warmup, c: &client{hc: hc, url: rc.url, timeout: rc.RequestTimeout}}
}

// run executes up to limit units (-1 = until the deadline) and returns the
// records sorted by index.
func (ph *phase) run(ctx context.Context, limit int) []RequestRecord {
	rc := ph.rc
	ph.c.epoch = time.Now()
	if rc.Duration > 0 && !ph.warmup {
		ph.deadline = ph.c.epoch.Add(rc.Duration)
	}
	stopProgress := startProgress(ph.progress, &ph.done, max(limit, 0))
	defer stopProgress()

	workers := rc.Concurrency
	perWorker := make([][]RequestRecord, workers)
	var wg sync.WaitGroup
	if rc.closed || ph.warmup {
		for wi := 0; wi < workers; wi++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := ph.c.newConn()
				for ctx.Err() == nil && !ph.pastDeadline() {
					u := int(ph.next.Add(1) - 1)
					if limit >= 0 && u >= limit {
						return
					}
					perWorker[wi] = append(perWorker[wi], ph.runRandom(ctx, w, u, ph.c.now()))
				}
			}()
		}
	} else {
		type job struct {
			u   int
			due int64
		}
		jobs := make(chan job)
		for wi := 0; wi < workers; wi++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := ph.c.newConn()
				for j := range jobs {
					perWorker[wi] = append(perWorker[wi], ph.runRandom(ctx, w, j.u, j.due))
				}
			}()
		}
		// Arrivals on an absolute schedule: send time i = start + the sum of
		// the first i intervals, so a late send never shifts later ones.
		rng := rand.New(rand.NewPCG(uint64(rc.Seed), 0xa771fa1))
		theta := 1 / (rc.RequestRate * rc.Burstiness)
		var offset float64 // seconds
		for u := 0; limit < 0 || u < limit; u++ {
			if u > 0 {
				offset += gammaSample(rng, rc.Burstiness, theta)
			}
			dueAt := ph.c.epoch.Add(time.Duration(offset * 1e9))
			if !ph.deadline.IsZero() && !dueAt.Before(ph.deadline) {
				break
			}
			if !sleepUntil(ctx, dueAt) {
				break
			}
			select {
			case jobs <- job{u: u, due: int64(offset * 1e9)}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
		}
		close(jobs)
	}
	wg.Wait()
	return mergeByIndex(perWorker)
}

// mergeByIndex joins per-worker records and sorts them by index.
func mergeByIndex(per [][]RequestRecord) []RequestRecord {
	var out []RequestRecord
	for _, rs := range per {
		out = append(out, rs...)
	}
	slices.SortFunc(out, func(a, b RequestRecord) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

func (ph *phase) pastDeadline() bool {
	return !ph.deadline.IsZero() && !time.Now().Before(ph.deadline)
}

// startProgress calls progress(done, total) about four times a second and
// once when the returned stop is called; nil progress does nothing.
func startProgress(progress func(done, total int), done *atomic.Int64, total int) func() {
	if progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				progress(int(done.Load()), total)
				return
			case <-t.C:
				progress(int(done.Load()), total)
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// runRandom sends request u of the random workload. Its lengths and words
// depend only on (seed, u, phase), not on scheduling. Warmups draw from a
// separate stream so they do not pre-warm the measured prompts' cache.
func (ph *phase) runRandom(ctx context.Context, w *conn, u int, dueNs int64) RequestRecord {
	rc := ph.rc
	stream := uint64(u)
	if ph.warmup {
		stream |= 1 << 62
	}
	rng := rand.New(rand.NewPCG(uint64(rc.Seed), stream))
	isl := sampleLen(rng, rc.ISL, rc.RandomRangeRatio)
	osl := sampleLen(rng, rc.OSL, rc.RandomRangeRatio)
	w.text = appendWords(w.text[:0], rng, isl)
	msgs := [1]message{{role: "user", content: w.text}}
	w.body = rc.bodies.build(w.body, msgs[:], osl, rc.IgnoreEOS)
	rec := RequestRecord{
		Index: u, Warmup: ph.warmup, DispatchNs: dueNs,
		RequestedPromptTokens: isl, MaxTokens: osl,
		ChunkNs:     make([]int64, 0, osl+1),
		ChunkTokens: make([]int32, 0, osl+1),
	}
	ph.c.do(ctx, w, w.body, &rec, nil)
	ph.done.Add(1)
	return rec
}

// sleepUntil waits for t or ctx; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// gammaSample draws from Gamma(shape, scale) (Marsaglia-Tsang); shape 1 is
// the exponential distribution of a Poisson process.
func gammaSample(rng *rand.Rand, shape, scale float64) float64 {
	if shape == 1 {
		return rng.ExpFloat64() * scale
	}
	if shape < 1 {
		return gammaSample(rng, shape+1, scale) * math.Pow(rng.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * scale
		}
	}
}

// discoverModel returns the first model id the server lists.
func discoverModel(ctx context.Context, hc *http.Client, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := strings.TrimRight(base, "/") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("loadgen: no model given and GET %s failed: %v", url, err)
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("loadgen: no model given and GET %s returned HTTP %d", url, resp.StatusCode)
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil || len(body.Data) == 0 || body.Data[0].ID == "" {
		return "", fmt.Errorf("loadgen: no model given and GET %s listed no model", url)
	}
	return body.Data[0].ID, nil
}
