package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// AgentX replay, the way aiperf's inferencex-agentx-mvp scenario replays the
// corpus:
//
//   - Concurrency lanes each hold one live session ("play" of a trace); a
//     lane whose play ends recycles to the next trace of a seeded shuffle,
//     from its first call.
//   - A lane's first play starts at a point t* drawn uniformly between
//     TrajectoryStartMin and TrajectoryStartMax (InferenceX: 25% and 75%) of
//     the trace's (gap-capped) duration; the NumWarmups main calls just
//     before t* are sent first, with the same cache-bust marker, so the
//     server's cache holds the session's context when measurement starts.
//     All lanes finish warming up before the measured phase begins.
//   - Calls run one after another on their lane; the wait before a call is
//     the recorded idle gap from the previous call's end (t + api_time) to
//     its start, capped at IdleGapCap (AgentX: 10 s) and scaled by
//     TimeScale. A group of adjacent subagents runs in parallel inside its
//     lane (each subagent's calls in order) and the next main call waits for
//     the whole group, so in-flight requests can exceed Concurrency.
//   - Prompts are synthesised from hash_ids: block id i of a trace is always
//     the same block_size words (the last block of a prompt is a prefix of
//     its block), so equal ids are equal text across calls, lanes and plays,
//     and a prefix cache sees the recorded reuse. A per-play marker
//     "[rid:<12 hex>]" (one extra token) follows the declared system and
//     tool prefix (or opens the prompt when none is declared), so plays share
//     at most that prefix. A run generates each whole block once
//     (blockCache) and writes prompts straight into request bodies, which
//     go back to a pool once the transport has sent them.
//   - max_tokens = out with ignore_eos; recorded replies are not resent
//     (the next call's hash ids stand for them).
//   - After Duration no new call starts; calls in flight finish and count,
//     as aiperf's grace-period drain does.

// DefaultIdleGapCap is AgentX's cap on recorded idle gaps.
const DefaultIdleGapCap = 10 * time.Second

// Default trajectory start window: InferenceX's 25%-75%.
const (
	DefaultTrajectoryStartMin = 0.25
	DefaultTrajectoryStartMax = 0.75
)

// replayTrace is a trace prepared for replay; lanes share it read-only
// (its block cache is safe for concurrent use).
type replayTrace struct {
	t        *Trace
	scope    uint64      // hash namespace: the trace for "local", 0 for "global"
	blocks   *blockCache // text of scope's whole blocks
	markerAt int         // blocks before the cache-bust marker in main calls
	steps    []replayStep
	mains    []int // indices of main-call steps
}

// replayStep is a main call or a group of subagents.
type replayStep struct {
	call  *Request
	subs  [][]*Request // each subagent's calls, in order
	waits [][]float64  // per subagent: seconds before each call
	start float64      // recorded start, gap-capped timeline
	delay float64      // seconds from the previous step's end, capped
	turn  int          // 1-based main-call number; 0 for subagent groups
}

// prepareTraces prepares a run's traces; their block caches share one
// budget, and "global" scope traces share one cache.
func prepareTraces(traces []Trace, capS float64) []*replayTrace {
	budget := newBlockBudget()
	var global *blockCache
	out := make([]*replayTrace, len(traces))
	for i := range traces {
		rt := prepareTrace(&traces[i], capS)
		switch {
		case rt.scope != 0:
			rt.blocks = newBlockCache(rt.scope, budget)
		case global == nil:
			global = newBlockCache(0, budget)
			fallthrough
		default:
			rt.blocks = global
		}
		out[i] = rt
	}
	return out
}

// prepareTrace prepares one trace with a block cache of its own.
func prepareTrace(t *Trace, capS float64) *replayTrace {
	rt := &replayTrace{t: t}
	if t.HashIDScope != "global" {
		rt.scope = hashString64(t.ID) | 1
	}
	rt.blocks = newBlockCache(rt.scope, newBlockBudget())
	if decl := t.SystemTokens + t.ToolTokens; decl > 0 {
		rt.markerAt = decl / t.BlockSize
	}
	capGap := func(g float64) float64 {
		g = max(g, 0)
		if capS >= 0 {
			g = min(g, capS)
		}
		return g
	}
	var prevStart, prevEnd, clock float64
	for i := 0; i < len(t.Requests); i++ {
		r := &t.Requests[i]
		var st replayStep
		var start, end float64
		if r.IsCall() {
			st.call = r
			start, end = r.T, r.T+r.APITime
			st.turn = len(rt.mains) + 1
		} else {
			// Adjacent subagents form one parallel group.
			start, end = math.Inf(1), math.Inf(-1)
			j := i
			for ; j < len(t.Requests) && !t.Requests[j].IsCall(); j++ {
				var calls []*Request
				forEachCall(t.Requests[j].Requests, func(c *Request) { calls = append(calls, c) })
				if len(calls) == 0 {
					continue
				}
				st.subs = append(st.subs, calls)
				start = min(start, calls[0].T)
				for _, c := range calls {
					end = max(end, c.T+c.APITime)
				}
			}
			i = j - 1
			if len(st.subs) == 0 {
				continue
			}
			for _, calls := range st.subs {
				w := make([]float64, len(calls))
				w[0] = capGap(calls[0].T - start)
				for k := 1; k < len(calls); k++ {
					w[k] = capGap(calls[k].T - (calls[k-1].T + calls[k-1].APITime))
				}
				st.waits = append(st.waits, w)
			}
		}
		if len(rt.steps) > 0 {
			st.delay = capGap(start - prevEnd)
			clock += capGap(start - prevStart)
		}
		st.start = clock
		prevStart, prevEnd = start, max(end, start)
		if st.call != nil {
			rt.mains = append(rt.mains, len(rt.steps))
		}
		rt.steps = append(rt.steps, st)
	}
	return rt
}

// startStep picks a lane's first measured step: the first main call at or
// after t* = span x U(lo, hi), keeping at least one call before it for
// warmup and itself for measurement; it returns the step index and its
// position among the main calls.
func (rt *replayTrace) startStep(rng *rand.Rand, lo, hi float64) (step, pos int) {
	if len(rt.mains) < 2 || hi <= 0 {
		return 0, 0
	}
	span := rt.steps[len(rt.steps)-1].start
	at := span * (lo + rng.Float64()*(hi-lo))
	pos = len(rt.mains) - 1
	for p, si := range rt.mains {
		if rt.steps[si].start >= at {
			pos = p
			break
		}
	}
	pos = min(max(pos, 1), len(rt.mains)-1)
	return rt.mains[pos], pos
}

// play is one replay of a trace on a lane.
type play struct {
	rt     *replayTrace
	id     string
	marker string
	// mu serialises prompts: a group's subagents build theirs at once.
	mu     sync.Mutex
	seen   map[uint64]struct{} // chain keys this play has sent after its marker
	filler uint64              // state for text of calls without hash ids
}

// appendBody appends the request body of call r: the prompt goes straight
// into the body's JSON string, which its text needs no escaping for. It
// returns the body with the prompt's token count and cached prefix, as
// prompt does.
func (p *play) appendBody(dst []byte, bodies *bodyBuilder, r *Request, sub bool, shared *sync.Map) ([]byte, int, int) {
	dst = bodies.openUser(dst)
	dst, tokens, cached := p.prompt(dst, r, sub, shared)
	return bodies.closeUser(dst, r.Out, true), tokens, cached
}

// prompt appends r's synthesised prompt and returns it with its token
// count and the leading tokens an ideal prefix cache already holds
// (whole blocks the run sent before with the same preceding text). The
// text is words of the vocabulary and the marker, single-space separated:
// plain ASCII that is its own JSON escape (TestPromptTextIsJSONSafe).
func (p *play) prompt(dst []byte, r *Request, sub bool, shared *sync.Map) ([]byte, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := len(dst)
	bs := p.rt.t.BlockSize
	nb := (r.In + bs - 1) / bs
	markerAt := p.rt.markerAt
	if sub {
		markerAt = 0 // a subagent's own conversation opens with the marker
	}
	markerAt = min(markerAt, nb)
	var chain uint64 = p.rt.scope
	cached, hitting := 0, true
	tokens := 0
	for j := 0; j <= nb; j++ {
		if j == markerAt {
			if len(dst) > start {
				dst = append(dst, ' ')
			}
			dst = append(dst, p.marker...)
			tokens++
			chain = mix(chain, hashString64(p.marker))
		}
		if j == nb {
			break
		}
		n := min(bs, r.In-j*bs)
		full := n == bs
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		var key uint64
		if j < len(r.HashIDs) {
			id := uint64(r.HashIDs[j])
			dst = p.rt.blocks.appendBlock(dst, id, n, n == bs)
			chain = mix(chain, id+1)
			key = chain
		} else {
			p.filler++
			dst = appendBlock(dst, mix(p.rt.scope, hashString64(p.marker)), 1<<62+p.filler, n)
			chain = mix(chain, 1<<63+p.filler)
			full = false // unique text: never a hit
		}
		tokens += n
		if !full {
			hitting = false
			continue
		}
		var seen bool
		if j < markerAt {
			// Load first: most keys are there, and storing boxes the key.
			if _, seen = shared.Load(key); !seen {
				_, seen = shared.LoadOrStore(key, struct{}{})
			}
		} else {
			_, seen = p.seen[key]
			p.seen[key] = struct{}{}
		}
		if hitting && seen {
			cached += n
		} else {
			hitting = false
		}
	}
	return dst, tokens, cached
}

// appendBlock appends the first n words of block id in namespace scope,
// single-space separated. The words depend only on (scope, id), so a
// block's text is the same wherever the id appears; n < block size gives a
// prefix of it.
func appendBlock(dst []byte, scope, id uint64, n int) []byte {
	var src rand.PCG
	src.Seed(scope, id)
	for i := range n {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, words[src.Uint64()%uint64(len(words))]...)
	}
	return dst
}

// blockCacheBytes bounds the block text a run caches. The default
// workload's blocks take about 25 MB (TestBlockCacheDefaultTraceSize); a
// corpus larger than the budget caches the blocks it meets first and
// generates the rest on every call, as without a cache.
const blockCacheBytes = 256 << 20

// blockEntryOverhead is what a cache entry costs besides its text (map
// node, boxed key and string header), charged to the budget too.
const blockEntryOverhead = 64

func newBlockBudget() *atomic.Int64 {
	b := new(atomic.Int64)
	b.Store(blockCacheBytes)
	return b
}

// blockCache holds the text of the whole blocks of one hash-id namespace.
// A session resends most of its context on every call, so caching turns
// the word-by-word synthesis of a prompt into a copy per block.
type blockCache struct {
	scope  uint64
	m      sync.Map      // hash id (uint64) -> block text (string)
	budget *atomic.Int64 // bytes the run may still cache
}

func newBlockCache(scope uint64, budget *atomic.Int64) *blockCache {
	return &blockCache{scope: scope, budget: budget}
}

// appendBlock appends the first n words of block id, as appendBlock does;
// whole blocks come from (and go into) the cache.
func (bc *blockCache) appendBlock(dst []byte, id uint64, n int, whole bool) []byte {
	if !whole {
		return appendBlock(dst, bc.scope, id, n)
	}
	if v, ok := bc.m.Load(id); ok {
		return append(dst, v.(string)...)
	}
	start := len(dst)
	dst = appendBlock(dst, bc.scope, id, n)
	size := int64(len(dst)-start) + blockEntryOverhead
	if bc.budget.Load() >= size && bc.budget.Add(-size) >= 0 {
		if _, dup := bc.m.LoadOrStore(id, string(dst[start:])); dup {
			bc.budget.Add(size) // another lane cached it first
		}
	}
	return dst
}

func hashString64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func mix(a, b uint64) uint64 {
	x := a ^ (b + 0x9e3779b97f4a7c15 + a<<6 + a>>2)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// replayRun is one agentic run: warmup then measurement over shared lanes.
type replayRun struct {
	rc       *runConfig
	traces   []*replayTrace
	order    []int        // seeded shuffle of trace indices
	nextPlay atomic.Int64 // plays handed out
	warm     *client
	meas     *client
	warmIdx  atomic.Int64
	measIdx  atomic.Int64
	done     atomic.Int64
	deadline time.Time
	started  chan struct{} // closed when measurement starts
	// idleAtDeadline: some lane's next call fell past the deadline, so it
	// ended before the deadline came.
	idleAtDeadline atomic.Bool
	shared         sync.Map // chain keys of blocks before markers
	// bodyPool recycles request bodies (*[]byte): a body is held from
	// its prompt's synthesis until the transport has written it, not for
	// the whole run by every connection.
	bodyPool sync.Pool
}

// runReplay executes the agentic warmup and measured phases.
func runReplay(ctx context.Context, rc *runConfig, hc *http.Client) (warm, meas []RequestRecord, epoch, end time.Time) {
	capS := rc.IdleGapCap.Seconds()
	if rc.IdleGapCap < 0 {
		capS = -1
	}
	rr := &replayRun{
		rc: rc, traces: prepareTraces(rc.Trace, capS),
		warm:    &client{hc: hc, url: rc.url, timeout: rc.RequestTimeout},
		meas:    &client{hc: hc, url: rc.url, timeout: rc.RequestTimeout},
		started: make(chan struct{}),
	}
	rng := rand.New(rand.NewPCG(uint64(rc.Seed), 0x5a3b1e))
	rr.order = rng.Perm(len(rr.traces))

	lanes := rc.Concurrency
	warmRecs := make([][]RequestRecord, lanes)
	measRecs := make([][]RequestRecord, lanes)
	var warmWG, laneWG sync.WaitGroup
	warmWG.Add(lanes)
	laneWG.Add(lanes)
	rr.warm.epoch = time.Now()
	for li := range lanes {
		go func() {
			defer laneWG.Done()
			warmRecs[li], measRecs[li] = rr.lane(ctx, li, &warmWG)
		}()
	}
	warmWG.Wait()
	rr.meas.epoch = time.Now()
	if rc.Duration > 0 {
		rr.deadline = rr.meas.epoch.Add(rc.Duration)
	}
	stop := startProgress(rc.Progress, &rr.done, 0)
	close(rr.started)
	laneWG.Wait()
	stop()
	// Lanes idle at the deadline end without waiting for it; the window
	// they were measured over still ran to the deadline.
	end = time.Now()
	if rr.idleAtDeadline.Load() && end.Before(rr.deadline) {
		end = rr.deadline
	}
	for li, recs := range measRecs {
		for i := range recs {
			recs[i].Lane = li + 1
		}
	}
	return mergeByIndex(warmRecs), mergeByIndex(measRecs), rr.meas.epoch, end
}

// takePlay hands out the next play's trace, or false when the run's play
// limit is reached.
func (rr *replayRun) takePlay() (*replayTrace, int, bool) {
	n := int(rr.nextPlay.Add(1) - 1)
	if rr.rc.limit >= 0 && n >= rr.rc.limit {
		return nil, 0, false
	}
	return rr.traces[rr.order[n%len(rr.order)]], n, true
}

func (rr *replayRun) newPlay(rt *replayTrace, n int, rng *rand.Rand) *play {
	return &play{
		rt: rt, id: rt.t.ID + "#" + strconv.Itoa(n+1),
		marker: fmt.Sprintf("[rid:%012x]", rng.Uint64()&0xffffffffffff),
		seen:   map[uint64]struct{}{},
	}
}

// waitSend waits until at, when a lane or subagent sends its next call. It
// reports false at once when at is at or past the deadline, where the call
// would not be sent: a lane idle at the deadline does not sleep through its
// idle gap (up to IdleGapCap) before the run can end.
func (rr *replayRun) waitSend(ctx context.Context, at time.Time) bool {
	if !rr.deadline.IsZero() && !at.Before(rr.deadline) {
		rr.idleAtDeadline.Store(true)
		return false
	}
	return sleepUntil(ctx, at)
}

func (rr *replayRun) pastDeadline() bool {
	return !rr.deadline.IsZero() && !time.Now().Before(rr.deadline)
}

// lane runs lane li: its first play's warmup, the barrier, then plays until
// the deadline, the play limit or cancellation.
func (rr *replayRun) lane(ctx context.Context, li int, warmWG *sync.WaitGroup) (warm, meas []RequestRecord) {
	rc := rr.rc
	rng := rand.New(rand.NewPCG(uint64(rc.Seed), uint64(li)<<1|1))
	rt, n, ok := rr.takePlay()
	if !ok {
		warmWG.Done()
		return nil, nil
	}
	p := rr.newPlay(rt, n, rng)
	first, pos := 0, 0
	if !rc.StartAtBeginning {
		first, pos = rt.startStep(rng, rc.TrajectoryStartMin, rc.TrajectoryStartMax)
	}
	w := rr.warm.newConn()
	for _, si := range rt.mains[max(pos-rc.NumWarmups, 0):pos] {
		if ctx.Err() != nil {
			break
		}
		st := &rt.steps[si]
		warm = append(warm, rr.send(ctx, rr.warm, w, p, st.call, st.turn, false, rr.warm.now(), true, &rr.warmIdx))
	}
	w = rr.meas.newConn()
	// Build the first measured prompt now, so 1,000 lanes do not all build
	// theirs in the instant measurement starts (client lag, not server time).
	var ready *prepared
	if st := &rt.steps[first]; st.call != nil {
		pr := rr.prepare(p, st.call, st.turn, false)
		ready = &pr
	}
	warmWG.Done()
	select {
	case <-rr.started:
	case <-ctx.Done():
		return warm, nil
	}
	var spare []*conn
	for {
		for i := first; i < len(rt.steps); i++ {
			st := &rt.steps[i]
			due := rr.meas.now()
			// After warmup calls the first measured call keeps its recorded
			// gap too, which also spreads the lanes' first sends.
			if i > first || pos > 0 && rc.NumWarmups > 0 {
				at := time.Now().Add(time.Duration(st.delay * rc.TimeScale * 1e9))
				if !rr.waitSend(ctx, at) {
					return warm, meas
				}
				due = int64(at.Sub(rr.meas.epoch))
			}
			if ctx.Err() != nil || rr.pastDeadline() {
				return warm, meas
			}
			if st.call != nil {
				pr := ready
				if pr == nil {
					x := rr.prepare(p, st.call, st.turn, false)
					pr = &x
				}
				ready = nil
				rec := rr.do(ctx, rr.meas, w, pr, due, false, &rr.measIdx)
				meas = append(meas, rec)
				if !rec.Success {
					break // a failed call ends the play, as a broken session would
				}
				continue
			}
			for len(spare) < len(st.subs) {
				spare = append(spare, rr.meas.newConn())
			}
			meas = append(meas, rr.runGroup(ctx, p, st, due, spare)...)
		}
		if ctx.Err() != nil || rr.pastDeadline() {
			return warm, meas
		}
		if rt, n, ok = rr.takePlay(); !ok {
			return warm, meas
		}
		p, first, pos = rr.newPlay(rt, n, rng), 0, 0
	}
}

// runGroup runs a subagent group: each subagent's calls in order on its own
// connection, all subagents at once; it returns when all are done.
func (rr *replayRun) runGroup(ctx context.Context, p *play, st *replayStep, due int64, conns []*conn) []RequestRecord {
	recs := make([][]RequestRecord, len(st.subs))
	var wg sync.WaitGroup
	for k, calls := range st.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, c := range calls {
				at := rr.meas.epoch.Add(time.Duration(due))
				if j == 0 {
					at = at.Add(time.Duration(st.waits[k][0] * rr.rc.TimeScale * 1e9))
				} else {
					at = time.Now().Add(time.Duration(st.waits[k][j] * rr.rc.TimeScale * 1e9))
				}
				if !rr.waitSend(ctx, at) || rr.pastDeadline() {
					return
				}
				rec := rr.send(ctx, rr.meas, conns[k], p, c, 0, true, int64(at.Sub(rr.meas.epoch)), false, &rr.measIdx)
				recs[k] = append(recs[k], rec)
				if !rec.Success {
					return
				}
			}
		}()
	}
	wg.Wait()
	var out []RequestRecord
	for _, rs := range recs {
		out = append(out, rs...)
	}
	return out
}

// prepared is a call ready to send: its record and its body, which
// belongs to the run's body pool.
type prepared struct {
	rec  RequestRecord
	body *[]byte
}

// prepare builds call r of play p into a body from the pool. A buffer
// too small for the call is replaced by one sized for it: growing a
// fresh buffer to a third of a megabyte by append would copy it over and
// over and leave each step's copy as garbage.
func (rr *replayRun) prepare(p *play, r *Request, turn int, sub bool) prepared {
	body, _ := rr.bodyPool.Get().(*[]byte)
	if body == nil {
		body = new([]byte)
	}
	if need := rr.rc.bodies.userSize(r.In); cap(*body) < need {
		*body = make([]byte, 0, need)
	}
	var tokens, cached int
	*body, tokens, cached = p.appendBody((*body)[:0], rr.rc.bodies, r, sub, &rr.shared)
	return prepared{body: body, rec: RequestRecord{
		SessionID: p.id, Turn: turn, Subagent: sub, RequestedPromptTokens: tokens, MaxTokens: r.Out,
		ChunkNs:     make([]int64, 0, r.Out/2+2),
		ChunkTokens: make([]int32, 0, r.Out/2+2),
		cacheable:   cached,
	}}
}

// do sends prepared call pr on w and returns its record; pr's body goes
// back to the pool as soon as the transport is done with it.
func (rr *replayRun) do(ctx context.Context, c *client, w *conn, pr *prepared, due int64, warmup bool, idx *atomic.Int64) RequestRecord {
	rec := pr.rec
	rec.Index, rec.Warmup, rec.DispatchNs = int(idx.Add(1)-1), warmup, due
	body := pr.body
	pr.body = nil
	c.do(ctx, w, *body, &rec, func() { rr.bodyPool.Put(body) })
	if !warmup {
		rr.done.Add(1)
	}
	return rec
}

// send prepares and sends one call of play p.
func (rr *replayRun) send(ctx context.Context, c *client, w *conn, p *play, r *Request, turn int, sub bool, due int64, warmup bool, idx *atomic.Int64) RequestRecord {
	pr := rr.prepare(p, r, turn, sub)
	return rr.do(ctx, c, w, &pr, due, warmup, idx)
}
