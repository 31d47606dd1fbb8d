package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/jsonesc"
)

func loadFixture(t *testing.T) []Trace {
	t.Helper()
	tr, err := LoadTrace(fixture)
	require.NoError(t, err)
	return tr
}

// markerOf returns the "[rid:...]" word of a prompt.
func markerOf(t *testing.T, prompt string) string {
	t.Helper()
	i := strings.Index(prompt, "[rid:")
	require.GreaterOrEqual(t, i, 0, "every prompt carries its play's marker")
	return prompt[i : i+18]
}

func promptOf(b map[string]any) string {
	return b["messages"].([]any)[0].(map[string]any)["content"].(string)
}

func TestReplayIdleGapsAreCapped(t *testing.T) {
	t.Parallel()
	tr := loadFixture(t)
	cases := []struct {
		name  string
		capS  float64
		delay []float64 // per step: wait after the previous step's end
		start []float64 // per step: gap-capped start
	}{
		// fx-0001: calls at 0, 8, subagents 16.5-19.9, 20.5, 155.5 (a 120.5 s
		// idle), 176.
		{"AgentX 10 s cap", 10, []float64{0, 2.8, 0.6, 0.6, 10, 0.5}, []float64{0, 8, 16.5, 20.5, 30.5, 40.5}},
		{"no cap", -1, []float64{0, 2.8, 0.6, 0.6, 120, 0.5}, []float64{0, 8, 16.5, 20.5, 155.5, 176}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := prepareTrace(&tr[0], tc.capS)
			require.Len(t, rt.steps, 6)
			for i, st := range rt.steps {
				assert.InDelta(t, tc.delay[i], st.delay, 1e-9, "step %d delay", i)
				assert.InDelta(t, tc.start[i], st.start, 1e-9, "step %d start", i)
			}
			assert.Equal(t, []int{0, 1, 3, 4, 5}, rt.mains)
			sub := rt.steps[2]
			assert.Nil(t, sub.call)
			require.Len(t, sub.subs, 1)
			assert.InDelta(t, 0, sub.waits[0][0], 1e-9)
			assert.InDelta(t, 0.3, sub.waits[0][1], 1e-9, "18.0 - (16.5 + 1.2)")
			assert.Equal(t, []int{1, 2, 0, 3, 4, 5}, []int{rt.steps[0].turn, rt.steps[1].turn, sub.turn, rt.steps[3].turn, rt.steps[4].turn, rt.steps[5].turn})
		})
	}
}

func TestReplayTrajectoryStartWindow(t *testing.T) {
	t.Parallel()
	// 101 main calls one second apart: t* in [25%, 75%] of 100 s picks calls
	// 25..75, and never the first or last.
	tr := Trace{ID: "even", BlockSize: 64}
	for i := range 101 {
		tr.Requests = append(tr.Requests, Request{T: float64(i), Type: "n", In: 10, Out: 1, APITime: 0.5})
	}
	rt := prepareTrace(&tr, 10)
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 2000 {
		step, pos := rt.startStep(rng, DefaultTrajectoryStartMin, DefaultTrajectoryStartMax)
		assert.Equal(t, rt.mains[pos], step)
		assert.GreaterOrEqual(t, pos, 25)
		assert.LessOrEqual(t, pos, 75)
		seen[pos] = true
	}
	assert.Greater(t, len(seen), 40, "starts spread over the window")

	// Degenerate windows still leave one warmup call and one measured call.
	short := Trace{ID: "s", BlockSize: 64, Requests: tr.Requests[:2]}
	rt = prepareTrace(&short, 10)
	for _, w := range [][2]float64{{0, 0.01}, {0.99, 1}} {
		_, pos := rt.startStep(rng, w[0], w[1])
		assert.Equal(t, 1, pos)
	}
}

func TestReplaySynthesisEqualHashIDsAreEqualBlocks(t *testing.T) {
	t.Parallel()
	tr := loadFixture(t)
	rt := prepareTrace(&tr[0], 10)
	require.Equal(t, 46, rt.markerAt, "3000 declared tokens: 46 whole blocks before the marker")
	var shared sync.Map
	p1 := &play{rt: rt, marker: "[rid:aaaaaaaaaaaa]", seen: map[uint64]struct{}{}}
	p2 := &play{rt: rt, marker: "[rid:bbbbbbbbbbbb]", seen: map[uint64]struct{}{}}
	blocksOf := func(prompt []byte, marker string) []string {
		ws := strings.Fields(strings.Replace(string(prompt), marker, "", 1))
		var out []string
		for i := 0; i < len(ws); i += 64 {
			out = append(out, strings.Join(ws[i:min(i+64, len(ws))], " "))
		}
		return out
	}
	r0, r1 := &tr[0].Requests[0], &tr[0].Requests[1]
	a0, n0, c0 := p1.prompt(nil, r0, false, &shared)
	assert.Equal(t, r0.In+1, n0, "in tokens plus the marker")
	assert.Equal(t, n0, CountTokens(a0))
	assert.Zero(t, c0, "nothing sent before")
	assert.Equal(t, 46*64, wordIndex(string(a0), p1.marker), "the marker follows the declared prefix")
	a1, n1, c1 := p1.prompt(nil, r1, false, &shared)
	assert.Equal(t, r1.In+1, n1)
	assert.Equal(t, 50*64, c1, "the previous prompt's 50 whole blocks are a cache hit")
	b0, b1 := blocksOf(a0, p1.marker), blocksOf(a1, p1.marker)
	assert.Equal(t, b0, b1[:50], "equal ids, equal blocks across a session's calls")
	assert.NotEqual(t, b1[50], b1[51])

	// Another play of the trace: same block text everywhere, but only the
	// blocks before its marker are shared with the first play.
	x0, _, xc := p2.prompt(nil, r0, false, &shared)
	assert.Equal(t, b0, blocksOf(x0, p2.marker), "equal ids, equal blocks across plays")
	assert.Equal(t, 46*64, xc, "the declared system and tool prefix is shared; the rest follows the marker")
	assert.NotEqual(t, string(a0), string(x0))

	// A later call's partial last block is a prefix of the full block.
	r2 := &tr[0].Requests[3] // in 4300: 67 whole blocks and 12 tokens
	a2, _, _ := p1.prompt(nil, r2, false, &shared)
	last := blocksOf(a2, p1.marker)[67]
	assert.Len(t, strings.Fields(last), 4300-67*64)

	// Scope: "local" ids name different text in different traces;
	// "global" ids the same.
	other := tr[1]
	loc := prepareTrace(&other, 10)
	pl := &play{rt: loc, marker: "[rid:cccccccccccc]", seen: map[uint64]struct{}{}}
	o0, _, _ := pl.prompt(nil, &other.Requests[0], false, &shared)
	assert.NotEqual(t, b0[0], blocksOf(o0, pl.marker)[0], "hash id 0 of another local-scope trace is other text")
	g1, g2 := tr[0], tr[1]
	g1.HashIDScope, g2.HashIDScope = "global", "global"
	pg1 := &play{rt: prepareTrace(&g1, 10), marker: "[rid:dddddddddddd]", seen: map[uint64]struct{}{}}
	pg2 := &play{rt: prepareTrace(&g2, 10), marker: "[rid:eeeeeeeeeeee]", seen: map[uint64]struct{}{}}
	h1, _, _ := pg1.prompt(nil, &g1.Requests[0], false, &shared)
	h2, _, _ := pg2.prompt(nil, &g2.Requests[0], false, &shared)
	assert.Equal(t, blocksOf(h1, pg1.marker)[:9], blocksOf(h2, pg2.marker)[:9], "global scope: equal ids, equal blocks across traces")
}

func wordIndex(s, w string) int {
	for i, f := range strings.Fields(s) {
		if f == w {
			return i
		}
	}
	return -1
}

func TestReplayLanesWarmupAndBodies(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{itl: 50 * time.Microsecond, tokensPerChunk: 50})
	tr := GenerateTrace(7, 3, TraceShape{MainCalls: 12, SystemTokens: 640, ToolTokens: 640, FirstUserTokens: 400,
		ToolResultTokens: 300, MinOut: 20, MaxOut: 60, MaxContext: 6000, SubagentEvery: 2})
	res, err := Run(context.Background(), Options{
		BaseURL: srv.URL(), Model: "m", Concurrency: 3, Trace: tr, TimeScale: 1e-4, Seed: 9, NumWarmups: 2, TotalGPUs: 4,
	})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	a := res.Aggregate
	assert.Equal(t, ScenarioAgentic, a.ScenarioType)
	assert.True(t, a.IgnoreEOS)

	// Three lanes, one play each (3 traces, no duration): three sessions,
	// each starting in the middle of its trace after two warmup calls.
	bySession := map[string][]RequestRecord{}
	for _, r := range res.Requests {
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	require.Len(t, bySession, 3, "one session per lane")
	warmBy := map[string][]RequestRecord{}
	for _, r := range res.Warmups {
		assert.True(t, r.Warmup)
		warmBy[r.SessionID] = append(warmBy[r.SessionID], r)
	}
	require.Len(t, warmBy, 3)
	subs := 0
	for id, recs := range bySession {
		w := warmBy[id]
		require.Len(t, w, 2, "two warmup calls per lane")
		var firstMain int
		for _, r := range recs {
			if !r.Subagent {
				firstMain = r.Turn
				break
			}
		}
		assert.Equal(t, []int{firstMain - 2, firstMain - 1}, []int{w[0].Turn, w[1].Turn}, "warmup sends the calls just before the start")
		assert.Greater(t, firstMain, 2)
		assert.Less(t, firstMain, 12)
		prev := 0
		for _, r := range recs {
			if r.Subagent {
				subs++
				continue
			}
			assert.Greater(t, r.Turn, prev, "a lane's calls run in trace order")
			prev = r.Turn
		}
		assert.Equal(t, 12, prev, "the play runs to the end of the trace")
	}
	assert.Positive(t, subs, "subagent calls are replayed")

	// Server side: warmups first, then every body carries its session's
	// marker, max_tokens = out and ignore_eos; warmup and measured calls of a
	// lane share the marker.
	bodies := srv.requestBodies()
	require.Len(t, bodies, len(res.Warmups)+len(res.Requests))
	markerSessions := map[string]bool{}
	for _, b := range bodies {
		assert.Equal(t, true, b["ignore_eos"])
		markerSessions[markerOf(t, promptOf(b))] = true
	}
	assert.Len(t, markerSessions, 3, "one marker per play, shared by its warmup")
	assert.Equal(t, int64(len(res.Warmups)), srv.warmups.Load(), "warmup calls, and only they, carry "+WarmupHeader)
	for _, r := range res.Requests {
		assert.Equal(t, r.RequestedPromptTokens, r.PromptTokens, "the prompt has in+1 tokens")
		assert.Equal(t, r.MaxTokens, r.CompletionTokens)
	}
	rm := a.RequestMetrics
	require.NotNil(t, rm)
	assert.Greater(t, rm.Cache.TheoreticalCacheHitRate, 0.5, "calls resend their session's context; warmup primed it")
}

func TestReplayDurationRecyclesLanes(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: time.Millisecond})
	tr := loadFixture(t)
	// 2 s: a loaded CI host once got through only one of the fixture's
	// plays in 300 ms, where a quiet one plays them all and starts again.
	window := 2 * time.Second
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, Trace: tr,
		TimeScale: 1e-4, Duration: window, StartAtBeginning: true})
	require.NoError(t, err)
	assert.Empty(t, res.Warmups, "no warmup from the beginning")
	sessions := map[string]bool{}
	for _, r := range res.Requests {
		sessions[r.SessionID] = true
		assert.Less(t, r.DispatchNs, window.Nanoseconds(), "nothing starts after the window")
	}
	assert.Greater(t, len(sessions), len(tr), "the lane recycles to new plays, each a new session")
}

// A lane idle at the deadline (its next call is 30 s away) ends the run
// when the window does: it does not sleep through the gap to send nothing.
func TestReplayEndsAtTheWindowNotAfterTheIdleGap(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: time.Millisecond})
	tr := []Trace{{ID: "gap", BlockSize: 64, Requests: []Request{
		{T: 0, Type: ReqNormal, In: 64, Out: 4, HashIDs: []int64{1}},
		{T: 30, Type: ReqNormal, In: 128, Out: 4, HashIDs: []int64{1, 2}},
	}}}
	t0 := time.Now()
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, Trace: tr,
		Duration: 500 * time.Millisecond, IdleGapCap: time.Minute, StartAtBeginning: true})
	require.NoError(t, err)
	took := time.Since(t0)
	require.Len(t, res.Requests, 1, "the call 30 s in is past the window")
	assert.Less(t, took, 15*time.Second, "the run ends with its window, not 30 s later")
	assert.GreaterOrEqual(t, res.Aggregate.Window, 0.5, "the window the lane was measured over still ran to the deadline")
	assert.Less(t, res.Aggregate.Window, 15.0)
}

func TestReplayPlayLimitAndFailedCall(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{fault: func(n int, _ map[string]any) string {
		if n == 2 {
			return "http500"
		}
		return ""
	}})
	tr := loadFixture(t)[1:] // three calls
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, Trace: tr, StartAtBeginning: true, NumPrompts: 1})
	require.NoError(t, err)
	require.Len(t, res.Requests, 2, "a failed call ends the play; the limit allows no other")
	assert.False(t, res.Requests[1].Success)
	assert.Equal(t, 1, res.Aggregate.Failed)
}

// Calls longer than the window still count: the window stops new calls,
// the ones in flight drain and are reported as such.
func TestReplayWindowShorterThanCalls(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 300 * time.Millisecond})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, Trace: loadFixture(t),
		TimeScale: 1e-4, Duration: 50 * time.Millisecond, StartAtBeginning: true})
	require.NoError(t, err)
	a := res.Aggregate
	assert.Equal(t, 2, a.Completed, "one call per lane, each finishing after the window")
	assert.Equal(t, 2, a.DrainedAfterLimit)
	assert.Greater(t, a.MedianE2EL, a.DurationLimit)
}

// Prompts go into request bodies unescaped: every word of the vocabulary
// and the marker must be its own JSON escape and one token.
func TestPromptTextIsJSONSafe(t *testing.T) {
	t.Parallel()
	for _, w := range append(words[:], "[rid:0123456789ab]") {
		assert.Equal(t, w, string(jsonesc.Append(nil, w)), "%q needs escaping", w)
		assert.Equal(t, 1, CountTokens([]byte(w)), "%q is one token", w)
	}
}

// The block cache changes no text, with or without budget left, and keeps
// to its budget.
func TestBlockCacheSameTextAndBudget(t *testing.T) {
	t.Parallel()
	tr := loadFixture(t)
	r := &tr[0].Requests[3] // 4300 tokens: 67 whole blocks and a partial one
	build := func(budget int64) (string, *replayTrace) {
		rt := prepareTrace(&tr[0], 10)
		rt.blocks.budget.Store(budget)
		p := &play{rt: rt, marker: "[rid:aaaaaaaaaaaa]", seen: map[uint64]struct{}{}}
		var shared sync.Map
		out, _, _ := p.prompt([]byte("x"), r, false, &shared)
		again, _, _ := p.prompt([]byte("x"), r, false, &shared)
		require.Equal(t, string(out), string(again), "a cached block is the block")
		return string(out), rt
	}
	uncached, rt0 := build(0)
	cached, rt := build(blockCacheBytes)
	assert.Equal(t, uncached, cached)
	assert.NotEqual(t, byte(' '), cached[1], "the prompt opens with a word, whatever precedes it in the buffer")
	assert.Equal(t, int64(0), rt0.blocks.budget.Load(), "no budget, nothing cached")
	used := blockCacheBytes - rt.blocks.budget.Load()
	perBlock := int64(len(appendBlock(nil, rt.scope, 0, 64))) + blockEntryOverhead
	assert.Greater(t, used, 60*perBlock/2, "67 whole blocks cached")
	assert.Less(t, used, 67*perBlock*2)

	// A budget for about three blocks caches three.
	_, small := build(3*perBlock + 10)
	n := 0
	small.blocks.m.Range(func(_, _ any) bool { n++; return true })
	assert.Equal(t, 3, n)
	assert.GreaterOrEqual(t, small.blocks.budget.Load(), int64(0))
}

// TestBlockCacheDefaultTraceSize measures what caching every whole block
// of the default workload takes (the figure blockCacheBytes's comment
// quotes) and checks it fits the budget. CPU-heavy: not beside the
// parallel, timing-sensitive tests.
func TestBlockCacheDefaultTraceSize(t *testing.T) {
	rts := prepareTraces(DefaultTrace(1), 10)
	for _, rt := range rts {
		for _, st := range rt.steps {
			calls := [][]*Request{{st.call}}
			if st.call == nil {
				calls = st.subs
			}
			for _, cs := range calls {
				for _, c := range cs {
					for j, id := range c.HashIDs {
						if (j+1)*rt.t.BlockSize <= c.In {
							rt.blocks.appendBlock(nil, uint64(id), rt.t.BlockSize, true)
						}
					}
				}
			}
		}
	}
	used := blockCacheBytes - rts[0].blocks.budget.Load()
	t.Logf("default workload: %.1f MB of cached blocks", float64(used)/1e6)
	assert.Greater(t, used, int64(15e6))
	assert.Less(t, used, int64(30e6))
}

// A group's subagents run at once and build their prompts from one play.
func TestReplayParallelSubagents(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{tokensPerChunk: 100})
	x := loadFixture(t)[0]
	sub := x.Requests[2] // two calls
	x.Requests = append(append(append([]Request(nil), x.Requests[:3]...), sub, sub), x.Requests[3:]...)
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, Trace: []Trace{x},
		NumPrompts: 4, TimeScale: 1e-6, StartAtBeginning: true})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	subs := 0
	for _, r := range res.Requests {
		if r.Subagent {
			subs++
		}
	}
	assert.Equal(t, 4*3*2, subs, "four plays, three subagents of two calls each")
}

// A body sized by userSize holds its call without growing, and not much
// more: main calls and subagent calls of the default workload.
func TestReplayBodySizeEstimate(t *testing.T) {
	t.Parallel()
	bodies, err := newBodyBuilder("deepseek-ai/DeepSeek-V4-Pro-0813", true, nil)
	require.NoError(t, err)
	var shared sync.Map
	calls := 0
	for _, rt := range prepareTraces(DefaultTrace(1)[:4], 10) {
		p := &play{rt: rt, marker: "[rid:0123456789ab]", seen: map[uint64]struct{}{}}
		for _, st := range rt.steps {
			group := [][]*Request{{st.call}}
			if st.call == nil {
				group = st.subs
			}
			for _, cs := range group {
				for _, c := range cs {
					need := bodies.userSize(c.In)
					b, _, _ := p.appendBody(make([]byte, 0, need), bodies, c, st.call == nil, &shared)
					require.LessOrEqual(t, len(b), need, "in %d", c.In)
					require.Less(t, float64(need), 1.05*float64(len(b))+1024, "in %d", c.In)
					calls++
				}
			}
		}
	}
	assert.Greater(t, calls, 100)
}

// pinTraces covers every way replay builds a prompt: generated sessions
// with subagents and compaction, the corpus fixture, calls whose hash ids
// stop short of their prompt (filler text) and "global" hash id scope.
func pinTraces(t *testing.T) []Trace {
	tr := GenerateTrace(11, 3, TraceShape{MainCalls: 8, SubagentEvery: 2, MaxContext: 30000})
	fx := loadFixture(t)
	short := fx[0]
	short.ID = "fx-short-ids"
	short.Requests = append([]Request(nil), fx[0].Requests...)
	short.Requests[1].HashIDs = short.Requests[1].HashIDs[:40] // 58 blocks of prompt, 40 ids
	glob := fx[1]
	glob.ID, glob.HashIDScope = "fx-global", "global"
	return append(tr, fx[0], short, glob)
}

// TestReplayBodiesPinned pins the bytes of every request body and the
// fields replay derives from each prompt (token counts, cacheable prefix)
// for seeded single-lane runs, so a change in how prompts and bodies are
// built cannot change what is sent. The digests were recorded from the
// implementation that built each prompt into a text buffer and escaped it
// into the body afterwards. It is CPU-heavy (16 MB of bodies), so it runs
// before the parallel, timing-sensitive tests rather than beside them.
func TestReplayBodiesPinned(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		extra    map[string]any
		want     string
	}{
		{"chat", "", nil, "594068ff521dc39fb9d5c09d454fc503db1c722096739419245c72ea281c5598"},
		{"completions with extra fields", "/v1/completions", map[string]any{"temperature": 0.5, "max_tokens": 7}, "537860e057f2a95b4ce2233e03f53984890973212d2a753a0e7de75d2d0eb872"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, &fakeServer{tokensPerChunk: 100, completions: tc.endpoint != ""})
			res, err := Run(context.Background(), Options{
				BaseURL: srv.URL(), Endpoint: tc.endpoint, Model: "m", Concurrency: 1, Trace: pinTraces(t),
				NumPrompts: 9, NumWarmups: 2, TimeScale: 1e-6, Seed: 5, Extra: tc.extra,
			})
			require.NoError(t, err)
			require.NoError(t, res.Gate())
			played := map[string]bool{}
			for _, r := range res.Requests {
				played[r.SessionID[:strings.LastIndexByte(r.SessionID, '#')]] = true
				played["subagent"] = played["subagent"] || r.Subagent
			}
			for _, want := range []string{"trace-1", "trace-2", "trace-3", "fx-0001", "fx-short-ids", "fx-global", "subagent"} {
				require.True(t, played[want], "the pinned run covers %s", want)
			}
			bodies := srv.rawBodies()
			require.Len(t, bodies, len(res.Warmups)+len(res.Requests))
			h := sha256.New()
			for _, b := range bodies {
				writeLen(h, len(b))
				h.Write(b)
			}
			for _, recs := range [][]RequestRecord{res.Warmups, res.Requests} {
				for _, r := range recs {
					fmt.Fprintf(h, "%d|%v|%s|%d|%v|%d|%d|%d|%d\n", r.Index, r.Warmup, r.SessionID, r.Turn, r.Subagent,
						r.RequestedPromptTokens, r.PromptTokens, r.MaxTokens, r.cacheable)
				}
			}
			got := hex.EncodeToString(h.Sum(nil))
			t.Logf("%d warmups, %d calls, %d body bytes, digest %s", len(res.Warmups), len(res.Requests), totalLen(bodies), got)
			assert.Equal(t, tc.want, got, "request bodies or prompt figures changed")
		})
	}
}

func writeLen(h hash.Hash, n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func totalLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}

// BenchmarkReplayPrompt is loadgen's per-call CPU for an AgentX call: the
// prompt synthesised from hash ids and the request body around it. One op
// is one call of the default trace's size range.
//
//	go test ./loadgen -run '^$' -bench ReplayPrompt
func BenchmarkReplayPrompt(b *testing.B) {
	tr := DefaultTrace(1)
	rt := prepareTrace(&tr[0], 10)
	bodies, err := newBodyBuilder("m", true, nil)
	if err != nil {
		b.Fatal(err)
	}
	var shared sync.Map
	p := &play{rt: rt, marker: "[rid:000000000000]", seen: map[uint64]struct{}{}}
	var body []byte
	var bytesOut int64
	for i := 0; b.Loop(); i++ {
		r := rt.steps[rt.mains[i%len(rt.mains)]].call
		body, _, _ = p.appendBody(body[:0], bodies, r, false, &shared)
		bytesOut += int64(len(body))
	}
	b.ReportMetric(float64(bytesOut)/float64(b.N)/1e3, "KB/call")
}
