package loadgen

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// TraceShape sets the shape of generated traces; zero fields take the
// defaults noted, which follow the AgentX corpus's records: a Claude Code
// main agent whose calls carry tens of thousands of prompt tokens, almost
// all of them the session's growing context, replies of a few hundred to
// about 2,000 tokens, and now and then a subagent making a few short calls.
type TraceShape struct {
	MainCalls    int // main-agent calls per trace (default 24)
	SystemTokens int // system prompt opening every main call (default 3000)
	ToolTokens   int // tool definitions after it (default 12000)
	// FirstUserTokens bounds the first call's user text, drawn from
	// [FirstUserTokens/4, FirstUserTokens] (default 4000).
	FirstUserTokens int
	// ToolResultTokens bounds the new input each later call adds besides the
	// previous reply, drawn log-uniformly from [64, ToolResultTokens]
	// (default 6000).
	ToolResultTokens int
	// MinOut and MaxOut bound main-agent replies, drawn uniformly (default
	// 300 and 2000).
	MinOut, MaxOut int
	// MaxContext: when a main call's prompt would exceed it the session is
	// compacted to the system and tool prefix plus a summary (default 90000).
	MaxContext int
	// SubagentEvery: after about one main call in this many a subagent runs
	// 2-4 short calls (inputs of a few thousand tokens, outputs 40-400) that the next main
	// call waits for (default 5; negative: none).
	SubagentEvery int
	// MaxThinkSeconds bounds the recorded tool/think gap between calls, drawn
	// log-uniformly from [0.2, MaxThinkSeconds] (default 8); one gap in
	// twenty is an idle pause of 30-300 s, which replay caps.
	MaxThinkSeconds float64
}

func (s TraceShape) withDefaults() TraceShape {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.MainCalls, 24)
	def(&s.SystemTokens, 3000)
	def(&s.ToolTokens, 12000)
	def(&s.FirstUserTokens, 4000)
	def(&s.ToolResultTokens, 6000)
	def(&s.MinOut, 300)
	def(&s.MaxOut, 2000)
	def(&s.MaxContext, 90000)
	def(&s.SubagentEvery, 5)
	if s.MaxThinkSeconds == 0 {
		s.MaxThinkSeconds = 8
	}
	s.MinOut = max(s.MinOut, 1)
	s.MaxOut = max(s.MaxOut, s.MinOut)
	s.MainCalls = max(s.MainCalls, 1)
	return s
}

// DefaultTraceCount is how many traces the default workload generates;
// lanes share them (each play with its own start point and cache-bust
// marker), as aiperf wraps a corpus smaller than the concurrency.
const DefaultTraceCount = 32

// DefaultTraceName names the default generated workload in measurement
// profiles; bump it when GenerateTrace's output changes.
const DefaultTraceName = "generated-agentx-v1"

// DefaultTrace is the workload of agentic points without a trace file.
func DefaultTrace(seed int64) []Trace {
	return GenerateTrace(seed, DefaultTraceCount, TraceShape{})
}

// GenerateTrace returns n deterministic synthetic traces in the corpus
// format: the same arguments always give the same traces, so tests and
// sweeps need no corpus download.
func GenerateTrace(seed int64, n int, shape TraceShape) []Trace {
	shape = shape.withDefaults()
	out := make([]Trace, n)
	for i := range out {
		out[i] = generateOne(rand.New(rand.NewPCG(uint64(seed), uint64(i)+0x7a11ce)), "trace-"+strconv.Itoa(i+1), shape)
	}
	return out
}

func generateOne(rng *rand.Rand, id string, s TraceShape) Trace {
	const bs = CorpusBlockSize
	const mainModel, subModel = "claude-opus-4-7", "claude-haiku-4-5"
	t := Trace{ID: id, BlockSize: bs, HashIDScope: "local", SystemTokens: s.SystemTokens, ToolTokens: s.ToolTokens, Models: []string{mainModel}}
	var next int64 // the session's next unused hash id
	fresh := func(ids []int64, blocks int) []int64 {
		for range blocks {
			ids = append(ids, next)
			next++
		}
		return ids
	}
	between := func(lo, hi int) int {
		if hi <= lo {
			return lo
		}
		return lo + rng.IntN(hi-lo+1)
	}
	logUniform := func(lo, hi float64) float64 {
		return lo * math.Exp(rng.Float64()*math.Log(hi/lo))
	}
	think := func() float64 {
		if rng.IntN(20) == 0 {
			return 30 + rng.Float64()*270
		}
		return logUniform(0.2, max(s.MaxThinkSeconds, 0.3))
	}
	apiTime := func(in, out int) float64 { // a hosted model's pace: ~60 tok/s after a prefill
		return round3(0.4 + float64(in)/200_000 + float64(out)/60)
	}
	// The prompt is built in whole blocks of context; ctx counts its tokens.
	// The prefix the system prompt and tools fill is shared by every call.
	prefix := fresh(nil, (s.SystemTokens+s.ToolTokens+bs-1)/bs)
	ctxIDs := append([]int64(nil), prefix...)
	ctx := len(prefix) * bs
	now := 0.0
	for call := 0; call < s.MainCalls; call++ {
		var add int
		if call == 0 {
			add = between(s.FirstUserTokens/4, s.FirstUserTokens)
		} else {
			add = int(logUniform(64, float64(max(s.ToolResultTokens, 65))))
		}
		if ctx+add > s.MaxContext {
			// Compaction: the context restarts from the prefix and a summary.
			ctxIDs = append([]int64(nil), prefix...)
			ctx = len(prefix)*bs + between(2000, 6000)
			ctxIDs = fresh(ctxIDs, (ctx-len(prefix)*bs+bs-1)/bs)
		}
		in := ctx + add
		// Whole blocks already in the context keep their ids; the rest of
		// the prompt (the partial tail block and the new input) is new.
		ids := append([]int64(nil), ctxIDs[:ctx/bs]...)
		ids = fresh(ids, (in+bs-1)/bs-len(ids))
		out := between(s.MinOut, s.MaxOut)
		r := Request{T: round3(now), Type: ReqStreaming, Model: mainModel, In: in, Out: out, HashIDs: ids, APITime: apiTime(in, out)}
		if call > 0 {
			r.ThinkTime = round3(now - t.Requests[len(t.Requests)-1].T)
		}
		t.Requests = append(t.Requests, r)
		now += r.APITime
		// The reply joins the context: the next call resends it.
		ctx = in + out
		ctxIDs = fresh(ids, (ctx+bs-1)/bs-len(ids))
		if s.SubagentEvery > 0 && call < s.MainCalls-1 && rng.IntN(s.SubagentEvery) == 0 {
			if len(t.Models) == 1 {
				t.Models = append(t.Models, subModel)
			}
			sub := Request{Type: ReqSubagent, T: round3(now + 0.1)}
			subPrefix := fresh(nil, between(1500, 4000)/bs)
			sctx, sids := len(subPrefix)*bs, subPrefix
			now += 0.1
			for range between(2, 4) {
				sin := sctx + between(200, 2500)
				ids := append([]int64(nil), sids[:min(sctx/bs, len(sids))]...)
				ids = fresh(ids, (sin+bs-1)/bs-len(ids))
				sout := between(40, 400)
				c := Request{T: round3(now), Type: ReqStreaming, Model: subModel, In: sin, Out: sout, HashIDs: ids, APITime: apiTime(sin, sout)}
				sub.Requests = append(sub.Requests, c)
				now += c.APITime + logUniform(0.1, 2)
				sctx = sin + sout
				sids = fresh(ids, (sctx+bs-1)/bs-len(ids))
			}
			t.Requests = append(t.Requests, sub)
			// The subagent's result comes back as the next call's input.
		}
		now += think()
	}
	return t
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
