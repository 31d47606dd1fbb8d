package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// outputPlan is the whole reply, decided before the first token is sent.
type outputPlan struct {
	pieces    []string // one token each, leading whitespace attached
	reasoning int      // the first `reasoning` pieces are reasoning_content
	finish    string   // "stop" or "length"
}

// sampleKey decides what varies between two identical requests: nothing
// under greedy decoding (temperature 0), the request seed if one is given,
// else the request number.
func sampleKey(req *completionRequest, n uint64) uint64 {
	switch {
	case req.Seed != nil:
		return mix(1, uint64(*req.Seed))
	case req.Temperature != nil && *req.Temperature == 0:
		return 0
	default:
		return mix(2, n)
	}
}

// planOutput decides the reply text and its length:
//   - a GSM8K question from the loaded split: a worked answer, correct with
//     probability Accuracy (fixed per question and seed under greedy decoding);
//   - a GSM8K-looking prompt with an unknown question: a non-answer;
//   - anything else: filler words. With ignore_eos exactly maxTokens of
//     them; otherwise the reply "ends" after a reproducible length in
//     (maxTokens/2, maxTokens] (at least min_tokens).
//
// With ignore_eos a GSM8K answer is padded with filler up to maxTokens.
// Stop strings cut the content at their first occurrence.
func (s *Server) planOutput(req *completionRequest, p promptInfo, chat bool, maxTokens int, stops []string, n uint64) outputPlan {
	key := sampleKey(req, n)
	seed := uint64(s.cfg.Seed)
	reasoning := s.cfg.Reasoning && chat
	var thinking, content string
	natural := false
	if s.gsm != nil && p.text != "" {
		if it, style, marker := s.gsm.find(p.text); it != nil {
			qh := mix(seed, hashString(normQuestion(it.question)), key)
			correct := unit(qh) < s.cfg.Accuracy
			thinking, content = gsmAnswer(it, style, correct, reasoning, splitmix64(qh))
			natural = true
		} else if marker {
			content = nonAnswer
			if reasoning {
				thinking = "I do not recognise this problem."
			}
			natural = true
		}
	}
	plan := outputPlan{finish: "stop"}
	if natural {
		plan.pieces = splitTokens(thinking)
		plan.reasoning = len(plan.pieces)
		plan.pieces = append(plan.pieces, splitTokens(content)...)
		if req.IgnoreEOS && len(plan.pieces) < maxTokens {
			pad := fillerText(nil, maxTokens-len(plan.pieces), mix(seed, p.hash, key, 3), false)
			plan.pieces = append(plan.pieces, splitTokens(string(pad))...)
		}
	} else {
		length := maxTokens
		if !req.IgnoreEOS {
			length = maxTokens - int(unit(mix(seed, p.hash, key, 4))*float64(maxTokens/2))
			length = max(length, min(req.MinTokens, maxTokens), 1)
		}
		text := fillerText(make([]byte, 0, length*8), length, mix(seed, p.hash, key, 5), true)
		plan.pieces = splitTokens(string(text))
		if reasoning {
			plan.reasoning = (len(plan.pieces) + 3) / 4
		}
	}
	// stop strings apply to the content (after the reasoning)
	if len(stops) > 0 && plan.reasoning < len(plan.pieces) {
		contentText := strings.Join(plan.pieces[plan.reasoning:], "")
		cut := -1
		for _, st := range stops {
			if i := strings.Index(contentText, st); i >= 0 && (cut < 0 || i < cut) {
				cut = i
			}
		}
		if cut >= 0 {
			plan.pieces = append(plan.pieces[:plan.reasoning], splitTokens(contentText[:cut])...)
			plan.finish = "stop"
			natural = true
		}
	}
	if len(plan.pieces) >= maxTokens {
		if len(plan.pieces) > maxTokens || !natural || req.IgnoreEOS {
			plan.finish = "length"
		}
		plan.pieces = plan.pieces[:maxTokens]
		plan.reasoning = min(plan.reasoning, maxTokens)
	}
	return plan
}

// pacer turns the latency model (or the fixed fast-mode latencies) into
// wall-clock waits for one request. It uses one timer for the whole stream
// and an absolute schedule, so timer lateness does not accumulate.
type pacer struct {
	s        *Server
	ctx      context.Context
	factor   float64 // wall seconds per model second for this request
	warmup   bool    // served on the warmup clock (WarmupHeader)
	timer    *time.Timer
	n        uint64
	arrival  time.Time
	isl      int
	cached   int
	next     time.Time
	step     uint64
	worker   *decodeWorker
	ctxTok   int
	running  bool
	steps    int64
	stepToks int64
	// catchUps counts decode steps that were already due when the stream
	// got to them, so their chunk went out right behind the one before:
	// the host was behind the model, and no client could see that gap.
	catchUps int
}

func (p *pacer) sleepUntil(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-p.s.dead:
			return ErrDied
		default:
			return nil
		}
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-p.ctx.Done():
		p.timer.Stop()
		return p.ctx.Err()
	case <-p.s.dead:
		p.timer.Stop()
		return ErrDied
	}
}

// scaled converts a model duration to wall time on this request's clock.
func (p *pacer) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * p.factor)
}

// isWarmup reports whether the client marked r as a warmup request.
func isWarmup(r *http.Request) bool { return headerSet(r, WarmupHeader) }

// isEval reports whether the client marked r as an accuracy-eval request.
func isEval(r *http.Request) bool { return headerSet(r, EvalHeader) }

func headerSet(r *http.Request, name string) bool {
	v := r.Header.Get(name)
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// first waits until the first token exists: FixedTTFT in fast mode;
// otherwise the prefill queue, the prefill itself and (disaggregated) the
// KV transfer.
func (p *pacer) first() error {
	s := p.s
	if s.fast {
		s.metrics.running.Add(1)
		p.running = true
		p.next = p.arrival.Add(p.scaled(s.cfg.FixedTTFT))
		s.metrics.prefilling.Add(1)
		defer s.metrics.prefilling.Add(-1)
		return p.sleepUntil(p.next)
	}
	now := time.Now()
	plan := s.eng.admit(now, p.isl, p.cached, p.factor)
	if plan.start.After(now) {
		s.metrics.queued.Add(1)
		err := p.sleepUntil(plan.start)
		s.metrics.queued.Add(-1)
		if err != nil {
			return err
		}
	}
	s.metrics.running.Add(1)
	p.running = true
	s.metrics.prefilling.Add(1)
	err := p.sleepUntil(plan.firstToken)
	s.metrics.prefilling.Add(-1)
	if err != nil {
		return err
	}
	p.ctxTok = p.isl + 1
	p.worker = s.eng.joinDecode(plan, p.ctxTok)
	p.next = plan.firstToken
	return nil
}

// nextStep waits for the next decode step and returns how many tokens it
// produced (before capping at the reply length).
func (p *pacer) nextStep() (int, error) {
	s := p.s
	p.step++
	h := mix(uint64(s.cfg.Seed), p.n, p.step)
	now := time.Now()
	var d time.Duration
	if s.fast {
		d = p.scaled(s.cfg.FixedITL)
	} else {
		d = s.eng.wallAt(s.eng.stepSecondsAt(p.worker, now, h, p.factor), p.factor)
	}
	p.next = p.next.Add(d)
	if lag := now.Sub(p.next); lag > maxCatchUp {
		// far behind (a starved host, a stopped process): restart the
		// schedule instead of bursting many chunks. Smaller lags (timer
		// granularity, GC, a busy moment) are caught up by sending the
		// overdue chunks at once, so mean ITL, E2E and throughput follow
		// the model even at tiny time scales.
		p.next = now
	}
	if !p.next.After(now) {
		p.catchUps++
	}
	if err := p.sleepUntil(p.next); err != nil {
		return 0, err
	}
	if s.cfg.AcceptanceLength == 1 {
		return 1, nil
	}
	return tokensPerStep(s.cfg.AcceptanceLength, splitmix64(h)), nil
}

// lateAfter is the schedule lag beyond which a chunk counts as late: more
// than timer granularity and a write, i.e. the host is not keeping up.
const lateAfter = 5 * time.Millisecond

// noteLag records how far behind the model's schedule a chunk went out and
// warns (at most every 10 s) when the host cannot keep up, because then the
// measured latencies exceed the model's.
func (s *Server) noteLag(lagNs int64) {
	m := s.metrics
	m.chunks.Add(1)
	for {
		cur := m.maxLagNs.Load()
		if lagNs <= cur || m.maxLagNs.CompareAndSwap(cur, lagNs) {
			break
		}
	}
	if lagNs <= int64(lateAfter) {
		return
	}
	m.lateChunks.Add(1)
	now := time.Now().UnixNano()
	last := m.lastLagWarn.Load()
	if now-last > int64(10*time.Second) && m.lastLagWarn.CompareAndSwap(last, now) {
		s.log.Warn("simulator is behind its latency schedule: the host cannot keep up, so latencies exceed the model (raise --time-scale or lower concurrency)",
			zap.Duration("lag", time.Duration(lagNs)), zap.Int64("late_chunks", m.lateChunks.Load()), zap.Int64("chunks", m.chunks.Load()))
	}
}

// maxCatchUp is how far behind its schedule a stream may fall and still
// catch up by sending the overdue chunks at once.
const maxCatchUp = 100 * time.Millisecond

// emitted accounts k tokens of a decode step.
func (p *pacer) emitted(k int) {
	p.steps++
	p.stepToks += int64(k)
	if p.worker != nil {
		p.worker.ctxTokens.Add(int64(k))
		p.ctxTok += k
	}
}

// stall pauses the stream (fault) and restarts the schedule after it.
func (p *pacer) stall(d time.Duration) error {
	until := time.Now().Add(d)
	if err := p.sleepUntil(until); err != nil {
		return err
	}
	p.next = until
	return nil
}

func (p *pacer) close() {
	if p.worker != nil {
		p.worker.leave(p.ctxTok)
	}
	if p.running {
		p.s.metrics.running.Add(-1)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.s.metrics.decodeSteps.Add(p.steps)
	p.s.metrics.decodeTok.Add(p.stepToks)
}

// fail answers with an OpenAI-style error and records it.
func (s *Server) fail(w http.ResponseWriter, rec *record, e *apiError) {
	rec.status, rec.errText = e.status, e.msg
	s.metrics.failed.Add(1)
	writeError(w, e.status, e.msg, e.kind)
}

// apiError is a request the engine refuses, in OpenAI's error shape.
type apiError struct {
	status    int
	msg, kind string
}

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, msg, "BadRequestError"}
}

// parsedRequest is a validated completion request.
type parsedRequest struct {
	req       completionRequest
	prompt    promptInfo
	maxTokens int
	stops     []string
}

// parseCompletion decodes and validates a request body.
func (s *Server) parseCompletion(r *http.Request, chat bool) (*parsedRequest, *apiError) {
	pr := &parsedRequest{}
	req := &pr.req
	in := getIntake()
	defer in.release()
	// Only the GSM8K lookup reads the prompt text; without a split it is not kept.
	prompt, promptErr, err := in.parse(r, req, chat, s.cfg.Latency.CacheBlockTokens, s.gsm != nil)
	if err != nil {
		return pr, badRequest("invalid JSON body: " + err.Error())
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		return pr, &apiError{http.StatusNotFound, "The model `" + req.Model + "` does not exist (this simulated engine serves `" + s.cfg.Model + "`).", "NotFoundError"}
	}
	if req.N != nil && *req.N != 1 {
		return pr, badRequest("n: only n=1 is supported by the simulated engine")
	}
	if pr.stops, err = stopStrings(req.Stop); err != nil {
		return pr, badRequest(err.Error())
	}
	if pr.prompt = prompt; promptErr != nil {
		return pr, badRequest(promptErr.Error())
	}
	isl, ctxLen := pr.prompt.tokens, s.cfg.ContextLength
	pr.maxTokens = -1
	if req.MaxCompletionTokens != nil {
		pr.maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		pr.maxTokens = *req.MaxTokens
	}
	switch {
	case pr.maxTokens == 0 || pr.maxTokens < -1:
		return pr, badRequest(fmt.Sprintf("max_tokens must be at least 1, got %d", pr.maxTokens))
	case isl >= ctxLen:
		return pr, badRequest(fmt.Sprintf("prompt has %d tokens; the context length is %d", isl, ctxLen))
	case pr.maxTokens < 0:
		pr.maxTokens = min(s.cfg.DefaultMaxTokens, ctxLen-isl)
	case isl+pr.maxTokens > ctxLen:
		return pr, badRequest(fmt.Sprintf("prompt (%d tokens) plus max_tokens (%d) exceeds the context length %d", isl, pr.maxTokens, ctxLen))
	}
	return pr, nil
}

// injectedError is the 429/503 fault for request n, if any.
func (s *Server) injectedError(w http.ResponseWriter, n uint64) *apiError {
	f := &s.cfg.Faults
	every := f.ErrorEvery > 0 && n%uint64(f.ErrorEvery) == 0
	burst := f.ErrorBurstLen > 0 && n >= uint64(f.ErrorBurstStart) && n < uint64(f.ErrorBurstStart+f.ErrorBurstLen)
	if !every && !burst {
		return nil
	}
	kind := "ServiceUnavailableError"
	if f.ErrorStatus == http.StatusTooManyRequests {
		kind = "RateLimitError"
		w.Header().Set("Retry-After", "1")
	}
	return &apiError{f.ErrorStatus, "simulated overload (fault injection)", kind}
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	n := s.seq.Add(1)
	s.metrics.requests.Add(1)
	rec := &record{n: n, arrival: arrival.UnixNano(), status: http.StatusOK, endpoint: r.URL.Path}
	if chat {
		rec.id = "chatcmpl-sim-" + strconv.FormatUint(n, 10)
	} else {
		rec.id = "cmpl-sim-" + strconv.FormatUint(n, 10)
	}
	s.timelines.begin(rec)
	defer func() {
		rec.doneNs = time.Now().UnixNano()
		s.timelines.end(rec)
	}()
	if f := s.cfg.Faults; f.DieAfter > 0 && n > uint64(f.DieAfter) {
		rec.status, rec.errText = 0, "engine died (fault injection)"
		s.die()
		resetConn(w)
		return
	}
	if !s.ready(arrival) {
		s.fail(w, rec, &apiError{http.StatusServiceUnavailable, "simulated engine is not ready yet (fault injection: health fail window)", "ServiceUnavailableError"})
		return
	}
	pr, apiErr := s.parseCompletion(r, chat)
	rec.stream, rec.prompt = pr.req.Stream, pr.prompt.tokens
	if apiErr == nil {
		apiErr = s.injectedError(w, n)
	}
	if apiErr != nil {
		s.fail(w, rec, apiErr)
		return
	}
	plan := s.planOutput(&pr.req, pr.prompt, chat, pr.maxTokens, pr.stops, n)
	if s.cache != nil {
		hits := s.cache.lookupInsert(pr.prompt.pages)
		rec.cached = min(hits*s.cfg.Latency.CacheBlockTokens, max(pr.prompt.tokens-1, 0))
	}
	s.metrics.promptTokens.Add(int64(pr.prompt.tokens))
	s.metrics.cachedTokens.Add(int64(rec.cached))
	s.respond(w, r, rec, pr, plan, chat, arrival)
}

// respond paces the reply through the latency model and writes it, as an
// SSE stream or one JSON body, recording the send times in rec.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, rec *record, pr *parsedRequest, plan outputPlan, chat bool, arrival time.Time) {
	f := &s.cfg.Faults
	n := rec.n
	pc := &pacer{s: s, ctx: r.Context(), n: n, arrival: arrival, isl: pr.prompt.tokens, cached: rec.cached, factor: s.factor}
	// Warmup and eval requests run on the warmup clock: nothing measures
	// their timing (pc.warmup keeps them out of the histograms and the lag).
	switch {
	case isWarmup(r):
		pc.warmup, pc.factor = true, s.factor*s.cfg.WarmupTimeScale
		s.metrics.warmups.Add(1)
	case isEval(r):
		pc.warmup, pc.factor = true, s.factor*s.cfg.WarmupTimeScale
		s.metrics.evals.Add(1)
	}
	defer pc.close()
	total := len(plan.pieces)
	// chunk after which a stall or mid-stream error happens: half-way
	estChunks := 1 + int(math.Ceil(float64(max(total-1, 0))/s.cfg.AcceptanceLength))
	faultAt := max(1, estChunks/2)
	stall := f.StallEvery > 0 && n%uint64(f.StallEvery) == 0
	midErr := f.MidStreamErrorEvery > 0 && n%uint64(f.MidStreamErrorEvery) == 0
	cut := f.CutStreamEvery > 0 && n%uint64(f.CutStreamEvery) == 0
	rec.chunkNs = make([]int64, 0, estChunks+1)
	rec.chunkTok = make([]int32, 0, estChunks+1)

	object, chunkObject := "text_completion", "text_completion"
	if chat {
		object, chunkObject = "chat.completion", "chat.completion.chunk"
	}
	created := arrival.Unix()
	opts := pr.req.StreamOptions
	var out *sseWriter
	if pr.req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		out = newSSEWriter(w, rec.id, chunkObject, created, s.cfg.Model, chat, pr.prompt.tokens, opts != nil && opts.ContinuousUsageStats)
		out.zeroCompletion = f.ZeroUsage
		out.flush() // headers go out now, as uvicorn does; the body starts at the first token
	}
	ended := func(err error) {
		if errors.Is(err, ErrDied) {
			rec.status, rec.errText = 0, "engine died (fault injection)"
			resetConn(w)
			return
		}
		rec.errText = "client went away: " + err.Error()
		s.log.Debug("request aborted", zap.String("id", rec.id), zap.Error(err))
	}
	if err := pc.first(); err != nil {
		ended(err)
		return
	}
	ttft := time.Since(arrival)
	if midErr && total <= 1 {
		s.midStreamError(w, out, rec)
		return
	}
	if cut && (out == nil || total <= 1) {
		s.cutStream(w, rec)
		return
	}
	i, k := 0, min(1, total)
	for chunk := 1; ; chunk++ {
		if out != nil {
			if err := out.tokens(plan, i, k, i+k == total); err != nil {
				ended(err)
				return
			}
			sentNs := time.Now().UnixNano()
			rec.chunkNs = append(rec.chunkNs, sentNs)
			rec.chunkTok = append(rec.chunkTok, int32(k))
			if !pc.warmup {
				// A compressed warmup may outrun the host; nothing measures it.
				s.noteLag(sentNs - pc.next.UnixNano())
			}
			if chunk == 1 {
				ttft = time.Since(arrival)
			}
		}
		i += k
		if chunk > 1 {
			pc.emitted(k)
		}
		if i >= total {
			break
		}
		if chunk == faultAt {
			if stall {
				if err := pc.stall(pc.scaled(f.StallFor)); err != nil {
					ended(err)
					return
				}
			}
			if midErr {
				s.midStreamError(w, out, rec)
				return
			}
			if cut {
				s.cutStream(w, rec)
				return
			}
		}
		step, err := pc.nextStep()
		if err != nil {
			ended(err)
			return
		}
		k = min(step, total-i)
	}
	rec.completion = total
	rec.finish = plan.finish
	s.metrics.genToks.Add(int64(total))
	counted := total
	if f.ZeroUsage {
		counted = 0
	}
	usage := usageJSON(pr.prompt.tokens, counted, rec.cached)
	if out != nil {
		if err := out.finish(usage, pc.catchUps, opts != nil && opts.IncludeUsage); err != nil {
			ended(err)
			return
		}
	} else {
		body := s.completionBody(rec.id, object, created, chat, plan, usage)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, err := w.Write(body)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		if err != nil {
			ended(err)
			return
		}
		rec.chunkNs = append(rec.chunkNs, time.Now().UnixNano())
		rec.chunkTok = append(rec.chunkTok, int32(total))
	}
	s.metrics.finished.Add(1)
	if !pc.warmup {
		// The latency histograms hold requests on the server's clock only.
		s.metrics.observeRequest(ttft, time.Since(arrival))
	}
}

// midStreamError ends a 200 stream with an error payload and [DONE], as
// vLLM does; a non-streaming request gets a plain 500.
func (s *Server) midStreamError(w http.ResponseWriter, out *sseWriter, rec *record) {
	const msg = "simulated engine failure mid-generation (fault injection)"
	if out == nil {
		s.fail(w, rec, &apiError{http.StatusInternalServerError, msg, "InternalServerError"})
		return
	}
	rec.errText = msg
	s.metrics.failed.Add(1)
	_ = out.raw(`data: {"error":{"message":"` + msg + `","type":"InternalServerError","param":null,"code":500},"simulated":true}` + "\n\n" + "data: [DONE]\n\n")
}

type usageBlock struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageJSON(prompt, completion, cached int) usageBlock {
	u := usageBlock{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

// completionBody renders a non-streaming response.
func (s *Server) completionBody(id, object string, created int64, chat bool, plan outputPlan, usage usageBlock) []byte {
	reasoning := strings.Join(plan.pieces[:plan.reasoning], "")
	content := strings.Join(plan.pieces[plan.reasoning:], "")
	var choice map[string]any
	if chat {
		msg := map[string]any{"role": "assistant", "content": content}
		if plan.reasoning > 0 {
			msg["reasoning_content"] = reasoning
		}
		choice = map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": plan.finish}
	} else {
		choice = map[string]any{"index": 0, "text": reasoning + content, "logprobs": nil, "finish_reason": plan.finish}
	}
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": object, "created": created, "model": s.cfg.Model,
		"system_fingerprint": Fingerprint, "simulated": true,
		"choices": []any{choice}, "usage": usage,
	})
	return append(b, '\n')
}

// cutStream resets the connection mid-response (the CutStreamEvery fault):
// the client sees the stream end with neither an error event nor [DONE].
func (s *Server) cutStream(w http.ResponseWriter, rec *record) {
	rec.status, rec.errText = 0, "stream cut (fault injection)"
	s.metrics.failed.Add(1)
	resetConn(w)
}
