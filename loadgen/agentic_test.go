package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunAgenticReplay(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{itl: 100 * time.Microsecond})
	trace := GenerateTrace(11, 4, 3, TraceShape{SharedPrefixBlocks: 2, FirstInputTokens: 300, InputTokens: 40, OutputTokens: 12, MaxDelayMs: 5000})
	start := time.Now()
	res, err := Run(context.Background(), Options{
		BaseURL: srv.URL(), Model: "m", Concurrency: 2, Trace: trace, TimeScale: 0.001, Seed: 5, NumWarmups: 1, TotalGPUs: 4,
	})
	require.NoError(t, err)
	require.NoError(t, res.Gate())
	assert.Less(t, time.Since(start), 5*time.Second, "delays are scaled")
	require.Len(t, res.Requests, 12, "4 sessions x 3 turns")
	require.Len(t, res.Warmups, 1)
	a := res.Aggregate
	assert.Equal(t, ScenarioAgentic, a.ScenarioType)
	assert.True(t, a.IgnoreEOS, "agentic replay forces ignore_eos")
	require.NotNil(t, a.RequestMetrics)
	require.Len(t, a.PerTurn, 3)
	for i, pt := range a.PerTurn {
		assert.Equal(t, i+1, pt.Turn)
		assert.Equal(t, 4, pt.Successful)
	}
	assert.Greater(t, a.PerTurn[2].MeanInputTokens, a.PerTurn[1].MeanInputTokens, "history grows")

	// Group the server-side bodies by session marker and check the history.
	bodies := srv.requestBodies()[1:] // skip the warmup
	require.Len(t, bodies, 12)
	bySession := map[string][][]any{}
	for _, b := range bodies {
		msgs := b["messages"].([]any)
		first := msgs[0].(map[string]any)["content"].(string)
		i := strings.Index(first, "[rid:")
		require.GreaterOrEqual(t, i, 0, "first user message carries the cache-bust marker")
		marker := first[i : i+18]
		bySession[marker] = append(bySession[marker], msgs)
		assert.Equal(t, true, b["ignore_eos"])
	}
	require.Len(t, bySession, 4, "one marker per session replay")
	var firstTurns []string
	for _, turns := range bySession {
		require.Len(t, turns, 3)
		for ti, msgs := range turns {
			require.Len(t, msgs, 2*ti+1, "turn %d resends the history", ti+1)
			for j, m := range msgs {
				role := m.(map[string]any)["role"]
				if j%2 == 0 {
					assert.Equal(t, "user", role)
				} else {
					assert.Equal(t, "assistant", role)
					// The reply as the server streamed it: " tok" per token.
					content := m.(map[string]any)["content"].(string)
					assert.True(t, strings.HasPrefix(content, " tok"), content)
				}
			}
			if ti > 0 {
				assert.Equal(t, turns[ti-1], msgs[:len(msgs)-2], "earlier messages are resent verbatim")
			}
		}
		firstTurns = append(firstTurns, turns[0][0].(map[string]any)["content"].(string))
	}
	// Sessions share the two hash blocks (128 words) and nothing after.
	w0, w1 := strings.Fields(firstTurns[0]), strings.Fields(firstTurns[1])
	assert.Equal(t, w0[:128], w1[:128])
	assert.NotEqual(t, w0[128], w1[128])

	for _, r := range res.Requests {
		assert.NotEmpty(t, r.SessionID)
		assert.Equal(t, r.RequestedPromptTokens, r.PromptTokens)
	}
	rm := a.RequestMetrics
	assert.Greater(t, rm.Cache.TheoreticalCacheHitRate, 0.3, "history and shared blocks are reusable")
	assert.Less(t, rm.Cache.TheoreticalCacheHitRate, 1.0)
	assert.Greater(t, rm.Throughput.Total.TokensPerSecond, 0.0)
	assert.InDelta(t, rm.Throughput.Total.TokensPerSecond/4, rm.Throughput.PerGPU.TotalTputTPS, 1e-9)
	assert.InDelta(t, 1/rm.Latency.ITL.Mean, rm.Latency.Intvty.Mean, 1e-9)
	assert.Equal(t, rm.Latency.ITL, rm.Latency.TPOT)
	assert.Greater(t, rm.Tokens.OutputExpected.Mean, 0.0)
}

func TestRunAgenticDelaysAreCappedAndScaled(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{})
	trace := []Session{{SessionID: "s", Turns: []Turn{
		{InputTokens: 5, OutputTokens: 2},
		{InputTokens: 5, OutputTokens: 2, DelayMs: 3_600_000}, // an hour, capped to 10 s
	}}}
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, Trace: trace, TimeScale: 0.01})
	require.NoError(t, err)
	require.Len(t, res.Requests, 2)
	gap := time.Duration(res.Requests[1].SendNs - res.Requests[0].EndNs)
	assert.GreaterOrEqual(t, gap, 100*time.Millisecond, "10 s cap x 0.01")
	assert.Less(t, gap, 600*time.Millisecond)
	assert.Less(t, res.Requests[1].ClientQueue, 0.05, "a turn is due when its think time ends")
}

func TestRunAgenticFailedTurnEndsSession(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{fault: func(n int, _ map[string]any) string {
		if n == 2 {
			return "http500"
		}
		return ""
	}})
	trace := []Session{{SessionID: "s", Turns: []Turn{{InputTokens: 5, OutputTokens: 2}, {InputTokens: 5, OutputTokens: 2}, {InputTokens: 5, OutputTokens: 2}}}}
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 1, Trace: trace})
	require.NoError(t, err)
	require.Len(t, res.Requests, 2)
	assert.False(t, res.Requests[1].Success)
	assert.Equal(t, 1, res.Aggregate.Failed)
}

func TestRunAgenticDurationRecyclesSessions(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{ttft: 2 * time.Millisecond})
	trace := GenerateTrace(3, 2, 2, TraceShape{FirstInputTokens: 600, InputTokens: 8, OutputTokens: 4, MaxDelayMs: 1})
	res, err := Run(context.Background(), Options{BaseURL: srv.URL(), Model: "m", Concurrency: 2, Trace: trace, Duration: 200 * time.Millisecond})
	require.NoError(t, err)
	markers := map[string]bool{}
	for _, b := range srv.requestBodies() {
		first := b["messages"].([]any)[0].(map[string]any)["content"].(string)
		i := strings.Index(first, "[rid:")
		require.GreaterOrEqual(t, i, 0)
		markers[first[i:i+18]] = true
	}
	assert.Greater(t, len(markers), len(trace), "sessions are replayed again, each with a fresh marker")
	for _, r := range res.Requests {
		assert.Less(t, r.DispatchNs, (200 * time.Millisecond).Nanoseconds())
	}
}
