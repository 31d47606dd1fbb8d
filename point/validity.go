package point

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Perf clients: what measured a perf result.
const (
	PerfClientLoadgen   = "loadgen"   // sweepflow's load generator, from the worker
	PerfClientBenchmark = "benchmark" // the recipe's benchmark (InferenceX's result file)
)

// PerfEvidence is what a perf client measured beside the headline figures,
// in the units of the engine's clock: what the validity gate needs to tell a
// measured figure from an artefact of the measurement.
type PerfEvidence struct {
	Client    string `json:"client"`    // PerfClientLoadgen or PerfClientBenchmark
	Completed int    `json:"completed"` // successful measured requests (agentic: calls)
	// OutputTokens is the output the server reported over the measured
	// requests (usage.completion_tokens).
	OutputTokens int64 `json:"output_tokens"`
	// WindowSec is how long the measurement ran, engine seconds.
	WindowSec float64 `json:"window_sec"`
	// MeanPromptTokens and MeanOutputTokens are the served lengths per
	// successful request (server usage).
	MeanPromptTokens float64 `json:"mean_prompt_tokens"`
	MeanOutputTokens float64 `json:"mean_output_tokens"`
	ITLMedianMs      float64 `json:"itl_median_ms"`
	// ClientLag is the fraction of gaps between token chunks the client did
	// not see arrive (loadgen.Aggregate.ClientLag); nil when the client does
	// not measure it (the recipe's benchmark file has no such figure).
	ClientLag *float64 `json:"client_lag,omitempty"`
	// ServerLag is the fraction of chunk gaps the server said it wrote back
	// to back, behind its own schedule (loadgen.Aggregate.ServerLag: the
	// simulator on a host too slow for its model); they are not in
	// ClientLag. 0 when no server reports it.
	ServerLag float64 `json:"server_lag,omitempty"`
	// LanesFinished (agentic) counts lanes with a finished measured call;
	// -1 when the client does not report lanes.
	LanesFinished int `json:"lanes_finished,omitempty"`
	// PrefixCacheFlushed: the server's prefix cache was emptied before the
	// measurement, so no earlier point's prompts were cached.
	PrefixCacheFlushed bool `json:"prefix_cache_flushed,omitempty"`
	// Waived names the checks that did not apply, and why.
	Waived []string `json:"waived,omitempty"`
}

// PerfPlan is what a perf result must show it measured.
type PerfPlan struct {
	Scenario string // fixed-seq-len | agentic-coding
	// ISL and OSL are the requested lengths; lengths are drawn from
	// [RangeRatio·L, L] (RangeRatio 0 or 1: exactly L).
	ISL, OSL   int
	RangeRatio float64
	// Requests is the number of measured requests planned (fixed-seq-len).
	Requests int
	// Lanes is the number of replay lanes (agentic: the concurrency).
	Lanes int
	// WindowSec is the planned measurement window, engine seconds (0: the
	// run is bounded by Requests instead).
	WindowSec float64
	// ClockScale is the server clock's rate against real time (a
	// time-compressed simulator: < 1; a real engine: 1 or 0).
	ClockScale float64
	// Capped: a simulated run whose window was cut below the row's
	// duration (the simulator-only perf-duration cap). Its lanes may still
	// be inside their first long call at the deadline, so the per-lane
	// count is not judged (and the evidence says so); real clusters never
	// cap.
	Capped bool
}

// Gate bounds, each with the reason it is where it is.
const (
	// LengthTolerance widens the requested length range [r·L, L] on both
	// sides: served prompts carry the chat template (a few tokens) and a real
	// tokenizer does not count random words one for one; 5 % covers both at
	// InferenceX's 1k-8k lengths, while a server that truncates or ignores
	// max_tokens misses by far more.
	LengthTolerance = 0.05
	// WindowTolerance: a replay window measured first send to last response
	// (aiperf, the recipe's benchmark) ends up to one idle gap before the
	// planned end, since lanes idle at the deadline send nothing more; 5 %
	// of InferenceX's 600-3600 s windows covers AgentX's 10 s gap cap, and a
	// run cut short by a lost server or a crash misses by more.
	WindowTolerance = 0.05
	// ClockResolutionSec is the resolution of a chunk's arrival time as the
	// clients stamp it: Go's and aiperf's clocks count nanoseconds, but a
	// stamp is when a socket read returned, which a scheduler only resolves
	// to about a microsecond. A TPOT or ITL at or below it was not measured.
	ClockResolutionSec = 1e-6
	// MaxClientLag bounds the fraction of chunk gaps the client did not see
	// arrive, less those the server says it wrote back to back (ServerLag).
	// An unseen gap reads 0 in ITL and can make a request's first and last
	// chunk times late. A client that keeps up still finds a chunk waiting
	// now and then (a reader descheduled for a moment: 5.6 % at c1024 on a
	// loaded 2-core host, where the simulator's catch-up made another
	// 25.2 %); a quarter of the gaps unseen is a client behind the stream
	// or a buffering proxy, and the median ITL then reads 0 well before
	// half.
	MaxClientLag = 0.25
)

// InvalidResult is a perf result the validity gate refused: Figure names
// what is wrong, Reason says it in one line, Evidence is what was measured.
type InvalidResult struct {
	Figure   string
	Reason   string
	Evidence PerfEvidence
}

func (e *InvalidResult) Error() string { return "invalid perf result: " + e.Reason }

// Explain is err's message, and for an InvalidResult its reason with the
// evidence in one line: what `starter bench` prints and the operator gate
// shows.
func Explain(err error) string {
	var ir *InvalidResult
	if !errors.As(err, &ir) {
		return err.Error()
	}
	return ir.Error() + "; evidence: " + ir.Evidence.Line()
}

// Line is the evidence in one line.
func (ev PerfEvidence) Line() string {
	parts := []string{
		"client " + ev.Client,
		fmt.Sprintf("%d completed", ev.Completed),
		fmt.Sprintf("%d output tokens", ev.OutputTokens),
		fmt.Sprintf("window %.4g s", ev.WindowSec),
		fmt.Sprintf("mean prompt %.1f, output %.1f tokens", ev.MeanPromptTokens, ev.MeanOutputTokens),
		fmt.Sprintf("median ITL %.4g ms", ev.ITLMedianMs),
	}
	if ev.ClientLag != nil {
		parts = append(parts, fmt.Sprintf("client lag %.1f%%", 100**ev.ClientLag))
	}
	if ev.ServerLag > 0 {
		parts = append(parts, fmt.Sprintf("server catch-up %.1f%%", 100*ev.ServerLag))
	}
	if ev.LanesFinished >= 0 {
		parts = append(parts, fmt.Sprintf("%d lanes finished", ev.LanesFinished))
	}
	return strings.Join(parts, ", ")
}

// IsInvalidResult reports whether err is (or wraps) an InvalidResult.
func IsInvalidResult(err error) bool {
	var ir *InvalidResult
	return errors.As(err, &ir)
}

// ValidatePerf is the one validity gate every perf result passes before it
// is stored, whichever client measured it. It refuses, naming the figure:
// zero output tokens; fewer completed requests than planned (agentic: a
// lane without a finished call); a window shorter than planned; served
// lengths outside the requested range; a TPOT or ITL at or below the
// clock's resolution; a client that fell behind the streams. Checks that do
// not apply (the client does not measure lag, a time-compressed simulator)
// are noted in s.Evidence.Waived.
func ValidatePerf(s PerfSummary, plan PerfPlan) error {
	if s.Evidence == nil {
		return &InvalidResult{Figure: "evidence", Reason: "the perf client reported no evidence to judge its figures by"}
	}
	ev := *s.Evidence
	bad := func(figure, format string, args ...any) error {
		return &InvalidResult{Figure: figure, Reason: figure + ": " + fmt.Sprintf(format, args...), Evidence: ev}
	}
	if ev.OutputTokens <= 0 {
		return bad("output_tokens", "0 output tokens over %d completed requests", ev.Completed)
	}
	if plan.Scenario == "agentic-coding" {
		short := plan.Lanes > 0 && (ev.Completed < plan.Lanes || (ev.LanesFinished >= 0 && ev.LanesFinished < plan.Lanes))
		switch {
		case short && plan.Capped:
			s.Evidence.Waived = append(s.Evidence.Waived, fmt.Sprintf("lanes: %d calls completed, %d of %d lanes finished one, in a window capped below the row's duration",
				ev.Completed, max(ev.LanesFinished, 0), plan.Lanes))
		case plan.Lanes > 0 && ev.LanesFinished >= 0 && ev.LanesFinished < plan.Lanes:
			return bad("completed", "%d of %d lanes finished a measured call", ev.LanesFinished, plan.Lanes)
		case plan.Lanes > 0 && ev.Completed < plan.Lanes:
			return bad("completed", "%d completed calls, fewer than the %d lanes", ev.Completed, plan.Lanes)
		}
	} else if plan.Requests > 0 && ev.Completed < plan.Requests {
		return bad("completed", "%d of %d planned requests completed", ev.Completed, plan.Requests)
	}
	if plan.WindowSec > 0 && ev.WindowSec < plan.WindowSec*(1-WindowTolerance) {
		return bad("window", "measured %.4g s, shorter than the planned %.4g s", ev.WindowSec, plan.WindowSec)
	}
	if err := checkLength(bad, "prompt_tokens", ev.MeanPromptTokens, plan.ISL, plan.RangeRatio); err != nil {
		return err
	}
	if err := checkLength(bad, "output_tokens", ev.MeanOutputTokens, plan.OSL, plan.RangeRatio); err != nil {
		return err
	}
	if plan.ClockScale > 0 && plan.ClockScale < 1 {
		// A compressed simulator falls behind its schedule as soon as it
		// owes more chunks per wall-clock tick than it can write, then writes
		// them together: at 500x, 64 agentic lanes read a median TPOT of
		// 0.12 ms against the model's ~15 ms. Its per-token timings are the
		// server's catch-up, not a client's or an engine's, so TPOT, ITL and
		// chunk lag are not judged there; the evidence says so, and the
		// figures stay labelled simulated.
		s.Evidence.Waived = append(s.Evidence.Waived, fmt.Sprintf("tpot, itl, client_lag: simulator clock compressed %gx", 1/plan.ClockScale))
		return nil
	}
	if ev.MeanOutputTokens > 1 && s.TPOTMedianMs/1000 <= ClockResolutionSec {
		return bad("tpot", "median %.3g ms is at or below the clock resolution (%.3g ms)", s.TPOTMedianMs, ClockResolutionSec*1000)
	}
	if ev.MeanOutputTokens > 1 && ev.ITLMedianMs/1000 <= ClockResolutionSec {
		return bad("itl", "median %.3g ms is at or below the clock resolution (%.3g ms)", ev.ITLMedianMs, ClockResolutionSec*1000)
	}
	if ev.ClientLag != nil && *ev.ClientLag > MaxClientLag {
		return bad("client_lag", "the client did not see %.0f%% of the chunk gaps arrive (bound %.0f%%): a starved client or a buffering proxy",
			100**ev.ClientLag, 100*MaxClientLag)
	}
	if ev.ClientLag == nil {
		s.Evidence.Waived = append(s.Evidence.Waived, "client_lag: "+ev.Client+" does not measure it")
	}
	if ev.ServerLag > 0 {
		s.Evidence.Waived = append(s.Evidence.Waived, fmt.Sprintf("client_lag: %.1f%% of the chunk gaps the server wrote back to back, behind its own schedule, are not counted against the client", 100*ev.ServerLag))
	}
	return nil
}

// checkLength refuses a served mean length outside [r·L, L] widened by
// LengthTolerance; L = 0 (agentic: lengths come from the trace) passes.
func checkLength(bad func(string, string, ...any) error, figure string, served float64, want int, ratio float64) error {
	if want <= 0 {
		return nil
	}
	if ratio <= 0 || ratio > 1 {
		ratio = 1
	}
	lo := math.Max(math.Floor(float64(want)*ratio), 1) * (1 - LengthTolerance)
	hi := float64(want) * (1 + LengthTolerance)
	if served < lo || served > hi {
		return bad(figure, "served mean %.1f outside the requested %s (±%.0f%%)", served, lengthRange(want, ratio), 100*LengthTolerance)
	}
	return nil
}

func lengthRange(want int, ratio float64) string {
	if ratio >= 1 {
		return fmt.Sprint(want)
	}
	return strings.Join([]string{fmt.Sprint(int(math.Max(math.Floor(float64(want)*ratio), 1))), fmt.Sprint(want)}, "-")
}
