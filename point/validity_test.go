package point

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goodPerf is a fixed-seq-len c4 result of 40 requests at ISL 1024 / OSL
// 1024 drawn with range ratio 0.8 (served means near 0.9 L), 20 ms TPOT.
func goodPerf() (PerfSummary, PerfPlan) {
	lag := 0.01
	s := PerfSummary{OutputTputPerGPU: 100, Interactivity: 50, TPOTMedianMs: 20, TTFTp90Ms: 300, Requests: 40,
		Evidence: &PerfEvidence{Client: PerfClientLoadgen, Completed: 40, OutputTokens: 40 * 922, WindowSec: 30,
			MeanPromptTokens: 921.5, MeanOutputTokens: 922, ITLMedianMs: 20, ClientLag: &lag, LanesFinished: -1}}
	return s, PerfPlan{Scenario: "fixed-seq-len", ISL: 1024, OSL: 1024, RangeRatio: 0.8, Requests: 40, ClockScale: 1}
}

// TestValidatePerf feeds the gate one figure wrong at a time: each is
// refused as an InvalidResult whose one-line reason names the figure.
func TestValidatePerf(t *testing.T) {
	t.Parallel()
	agentic := func(s *PerfSummary, p *PerfPlan) {
		*p = PerfPlan{Scenario: "agentic-coding", Lanes: 4, WindowSec: 1000, ClockScale: 1}
		s.Evidence.MeanPromptTokens, s.Evidence.MeanOutputTokens, s.Evidence.LanesFinished = 30000, 300, 4
		s.Evidence.WindowSec = 1003
	}
	cases := []struct {
		name   string
		mutate func(*PerfSummary, *PerfPlan)
		figure string // "" passes
		reason string
	}{
		{"valid", func(*PerfSummary, *PerfPlan) {}, "", ""},
		{"valid agentic", agentic, "", ""},
		{"served lengths at the low end of the range", func(s *PerfSummary, _ *PerfPlan) {
			s.Evidence.MeanPromptTokens, s.Evidence.MeanOutputTokens = 819, 819 // floor(0.8 x 1024)
		}, "", ""},
		{"zero output tokens", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.OutputTokens = 0 },
			"output_tokens", "output_tokens: 0 output tokens over 40 completed requests"},
		{"fewer requests than planned", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.Completed = 39 },
			"completed", "completed: 39 of 40 planned requests completed"},
		{"a lane without a finished call", func(s *PerfSummary, p *PerfPlan) { agentic(s, p); s.Evidence.LanesFinished = 3 },
			"completed", "completed: 3 of 4 lanes finished a measured call"},
		{"short window", func(s *PerfSummary, p *PerfPlan) { agentic(s, p); s.Evidence.WindowSec = 940 },
			"window", "window: measured 940 s, shorter than the planned 1000 s"},
		{"prompts too short", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.MeanPromptTokens = 512 },
			"prompt_tokens", "prompt_tokens: served mean 512.0 outside the requested 819-1024 (±5%)"},
		{"prompts too long", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.MeanPromptTokens = 1080 },
			"prompt_tokens", "prompt_tokens: served mean 1080.0 outside the requested 819-1024 (±5%)"},
		{"outputs cut short", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.MeanOutputTokens = 700 },
			"output_tokens", "output_tokens: served mean 700.0 outside the requested 819-1024 (±5%)"},
		{"identical first and last chunk times", func(s *PerfSummary, _ *PerfPlan) { s.TPOTMedianMs, s.Interactivity = 0, 1e11 },
			"tpot", "tpot: median 0 ms is at or below the clock resolution (0.001 ms)"},
		{"chunks stamped alike", func(s *PerfSummary, _ *PerfPlan) { s.Evidence.ITLMedianMs = 0 },
			"itl", "itl: median 0 ms is at or below the clock resolution (0.001 ms)"},
		{"client fell behind", func(s *PerfSummary, _ *PerfPlan) { lag := 0.3; s.Evidence.ClientLag = &lag },
			"client_lag", "client_lag: the client did not see 30% of the chunk gaps arrive (bound 25%): a starved client or a buffering proxy"},
		{"no evidence", func(s *PerfSummary, _ *PerfPlan) { s.Evidence = nil },
			"evidence", "the perf client reported no evidence to judge its figures by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, p := goodPerf()
			tc.mutate(&s, &p)
			err := ValidatePerf(s, p)
			if tc.figure == "" {
				require.NoError(t, err)
				return
			}
			var ir *InvalidResult
			require.ErrorAs(t, err, &ir)
			assert.Equal(t, tc.figure, ir.Figure)
			assert.Equal(t, tc.reason, ir.Reason)
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.True(t, IsInvalidResult(err))
		})
	}
}

// On a time-compressed simulator the server itself falls behind its
// schedule and writes the chunks it owes together, so TPOT, ITL and client
// lag say nothing there: they are waived, and the waiver is stored. The
// other checks still apply.
func TestValidatePerfCompressedClock(t *testing.T) {
	t.Parallel()
	s, p := goodPerf()
	p.ClockScale = 0.002
	lag := 0.94
	s.TPOTMedianMs, s.Evidence.ClientLag, s.Evidence.ITLMedianMs = 0.12, &lag, 0
	require.NoError(t, ValidatePerf(s, p))
	assert.Equal(t, []string{"tpot, itl, client_lag: simulator clock compressed 500x"}, s.Evidence.Waived)

	s, p = goodPerf()
	p.ClockScale = 0.002
	s.Evidence.Completed = 38
	var ir *InvalidResult
	require.ErrorAs(t, ValidatePerf(s, p), &ir)
	assert.Equal(t, "completed", ir.Figure)
}

// A client that does not measure its lag (the recipe's benchmark) is not
// refused for it, and the evidence says the check did not apply.
func TestValidatePerfLagNotMeasured(t *testing.T) {
	t.Parallel()
	s, p := goodPerf()
	s.Evidence.Client, s.Evidence.ClientLag = PerfClientBenchmark, nil
	require.NoError(t, ValidatePerf(s, p))
	assert.Equal(t, []string{"client_lag: benchmark does not measure it"}, s.Evidence.Waived)
}

// A simulated window capped below the row's duration does not judge the
// per-lane count (lanes may be inside their first long call at the cap) and
// says so; uncapped, the same result is refused.
func TestValidatePerfCappedWindow(t *testing.T) {
	t.Parallel()
	s, _ := goodPerf()
	s.Evidence.MeanPromptTokens, s.Evidence.MeanOutputTokens, s.Evidence.LanesFinished, s.Evidence.WindowSec = 30000, 300, 726, 30
	s.Evidence.Completed, s.Evidence.OutputTokens = 871, 871*300
	plan := PerfPlan{Scenario: "agentic-coding", Lanes: 768, WindowSec: 30, ClockScale: 1}
	require.ErrorContains(t, ValidatePerf(s, plan), "726 of 768 lanes finished a measured call")
	plan.Capped = true
	require.NoError(t, ValidatePerf(s, plan))
	assert.Contains(t, s.Evidence.Waived, "lanes: 871 calls completed, 726 of 768 lanes finished one, in a window capped below the row's duration")
	// Fewer calls than lanes (a client that reports no lanes) likewise.
	s.Evidence.Waived, s.Evidence.Completed, s.Evidence.LanesFinished = nil, 700, -1
	plan.Capped = false
	require.ErrorContains(t, ValidatePerf(s, plan), "700 completed calls, fewer than the 768 lanes")
	plan.Capped = true
	require.NoError(t, ValidatePerf(s, plan))
}
