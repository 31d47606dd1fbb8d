// Package regress compares a sweep's points with their baselines and says
// which ones regressed: output throughput per GPU or interactivity down, TTFT
// p90 up beyond a threshold, an eval below its floor, or a point that fails
// where its baseline succeeded. It is plain Go and imports no workflow
// code: the nightly's comparison activity feeds it ledger rows, and report
// (`starter report --baseline`) compares any two sweeps with it.
package regress

import (
	"fmt"
	"math"
	"sort"

	"github.com/sweepflow/sweepflow/point"
)

// Thresholds are the tolerated changes in percent. A negative value turns
// that check off; zero flags any worsening.
type Thresholds struct {
	OutputTputPerGPUDropPct float64 `json:"output_tput_per_gpu_drop_pct"`
	TTFTp90RisePct          float64 `json:"ttft_p90_rise_pct"`
	InteractivityDropPct    float64 `json:"interactivity_drop_pct"`
	// JoulesPerOutputTokenRisePct bounds the rise of the GPUs' energy per
	// output token (package energy). nil is DefaultJoulesRisePct, so
	// thresholds stored before it existed check it too.
	JoulesPerOutputTokenRisePct *float64 `json:"joules_per_output_token_rise_pct,omitempty"`
}

// DefaultJoulesRisePct is the tolerated rise of joules per output token: the
// same 10 % as TTFT p90, a cost where lower is better.
const DefaultJoulesRisePct = 10.0

// JoulesRisePct is the joules-per-output-token threshold in effect.
func (t Thresholds) JoulesRisePct() float64 {
	if t.JoulesPerOutputTokenRisePct == nil {
		return DefaultJoulesRisePct
	}
	return *t.JoulesPerOutputTokenRisePct
}

// DefaultThresholds: throughput per GPU -5 %, TTFT p90 +10 %, interactivity
// -5 %, joules per output token +10 %.
func DefaultThresholds() Thresholds {
	j := DefaultJoulesRisePct
	return Thresholds{OutputTputPerGPUDropPct: 5, TTFTp90RisePct: 10, InteractivityDropPct: 5, JoulesPerOutputTokenRisePct: &j}
}

// Perf is the one perf summary; regress compares its output throughput per
// GPU, TTFT p90 and interactivity.
type Perf = point.PerfSummary

// Eval is a point's accuracy verdict.
type Eval struct {
	Score  float64 `json:"score"` // exact match, strict
	Floor  float64 `json:"floor"`
	Passed bool    `json:"passed"`
}

// Point is one point of a run.
type Point struct {
	// Key matches a point with its baseline: point.BaselineKey, the
	// identity apart from the image.
	Key       string `json:"key"`
	SweepID   string `json:"sweep_id"`
	PointID   string `json:"point_id"`
	ConfigKey string `json:"config_key,omitempty"`
	Conc      int    `json:"conc,omitempty"`
	// OK is whether the point ran to the end (completed or eval-failed:
	// its figures exist); Status is the word shown.
	OK     bool   `json:"ok"`
	Status string `json:"status"`
	Perf   *Perf  `json:"perf,omitempty"`
	Eval   *Eval  `json:"eval,omitempty"`
	// ProfileHash is the measurement profile hash stored with Perf: figures
	// are compared only with a baseline measured under the same profile and
	// the same simulated flag (Incomparable).
	ProfileHash string `json:"profile_hash,omitempty"`
}

// Incomparable says why b's figures are no baseline for c's ("" when they
// are): a simulated figure against a real one, or another measurement
// profile. Both points must have perf.
func Incomparable(c, b Point) string {
	word := func(sim bool) string {
		if sim {
			return "simulated"
		}
		return "real"
	}
	switch {
	case c.Perf == nil || b.Perf == nil:
		return ""
	case c.Perf.Simulated != b.Perf.Simulated:
		return fmt.Sprintf("%s figures, the baseline's in %s are %s", word(c.Perf.Simulated), b.SweepID, word(b.Perf.Simulated))
	case !(b.Perf.OutputTputPerGPU > 0):
		// Per-GPU figures of a point stored without its GPU count: a
		// baseline with them would hide every later regression.
		return fmt.Sprintf("the baseline in %s has no output throughput per GPU", b.SweepID)
	case c.ProfileHash != b.ProfileHash:
		return fmt.Sprintf("measurement profile %s, the baseline's in %s is %s", short(c.ProfileHash), b.SweepID, short(b.ProfileHash))
	}
	return ""
}

func short(hash string) string {
	if hash == "" {
		return "(none)"
	}
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// Kinds of finding.
const (
	KindOutputTput     = "output_tput_per_gpu_drop"
	KindTTFT           = "ttft_p90_rise"
	KindInteractivity  = "interactivity_drop"
	KindJoules         = "joules_per_output_token_rise"
	KindEvalBelowFloor = "eval_below_floor"
	KindNewFailure     = "new_failure"
)

// Finding is one regression of one point.
type Finding struct {
	Kind          string  `json:"kind"`
	PointID       string  `json:"point_id"`
	ConfigKey     string  `json:"config_key,omitempty"`
	Conc          int     `json:"conc,omitempty"`
	BaselineSweep string  `json:"baseline_sweep,omitempty"`
	Baseline      float64 `json:"baseline,omitempty"`
	Current       float64 `json:"current,omitempty"`
	ChangePct     float64 `json:"change_pct,omitempty"` // signed: negative is down
	ThresholdPct  float64 `json:"threshold_pct,omitempty"`
	Message       string  `json:"message"`
}

// Compare checks every current point against the baseline point with the
// same Key (points without one are checked only against their eval floor).
// Figures are compared only when Incomparable finds nothing.
// Findings come out in current-point order, one per regressed figure.
func Compare(current, baseline []Point, th Thresholds) []Finding {
	base := make(map[string]Point, len(baseline))
	for _, b := range baseline {
		base[b.Key] = b
	}
	var out []Finding
	for _, c := range current {
		b, hasBase := base[c.Key]
		f := func(kind string) Finding {
			x := Finding{Kind: kind, PointID: c.PointID, ConfigKey: c.ConfigKey, Conc: c.Conc}
			if hasBase {
				x.BaselineSweep = b.SweepID
			}
			return x
		}
		if !c.OK {
			if hasBase && b.OK {
				x := f(KindNewFailure)
				x.Message = fmt.Sprintf("%s now %s; it succeeded in %s", c.PointID, orWord(c.Status, "fails"), b.SweepID)
				out = append(out, x)
			}
			continue
		}
		if c.Eval != nil && !c.Eval.Passed {
			x := f(KindEvalBelowFloor)
			x.Current, x.Baseline = c.Eval.Score, c.Eval.Floor
			x.Message = fmt.Sprintf("%s eval %.4f below its floor %.4f", c.PointID, c.Eval.Score, c.Eval.Floor)
			out = append(out, x)
		}
		if !hasBase || c.Perf == nil || b.Perf == nil || Incomparable(c, b) != "" {
			continue
		}
		type check struct {
			kind, name string
			base, cur  float64
			threshold  float64
			higherGood bool
			unit       string
		}
		for _, k := range []check{
			{KindOutputTput, "output throughput per GPU", b.Perf.OutputTputPerGPU, c.Perf.OutputTputPerGPU, th.OutputTputPerGPUDropPct, true, "tok/s/GPU"},
			{KindTTFT, "TTFT p90", b.Perf.TTFTp90Ms, c.Perf.TTFTp90Ms, th.TTFTp90RisePct, false, "ms"},
			{KindInteractivity, "interactivity", b.Perf.Interactivity, c.Perf.Interactivity, th.InteractivityDropPct, true, "tok/s/user"},
			{KindJoules, "joules per output token", validJoules(b.Perf), validJoules(c.Perf), th.JoulesRisePct(), false, "J/token"},
		} {
			if k.threshold < 0 || !(k.base > 0) || math.IsNaN(k.cur) || math.IsInf(k.cur, 0) {
				continue
			}
			change := (k.cur - k.base) / k.base * 100
			worse := -change
			if !k.higherGood {
				worse = change
			}
			if worse <= k.threshold {
				continue
			}
			x := f(k.kind)
			x.Baseline, x.Current, x.ChangePct, x.ThresholdPct = k.base, k.cur, round(change), k.threshold
			x.Message = fmt.Sprintf("%s %s %.4g -> %.4g %s (%+.1f %%, threshold %.4g %%) vs %s",
				c.PointID, k.name, k.base, k.cur, k.unit, change, k.threshold, b.SweepID)
			out = append(out, x)
		}
	}
	return out
}

// Count tallies findings by kind, for summaries.
func Count(fs []Finding) map[string]int {
	m := map[string]int{}
	for _, f := range fs {
		m[f.Kind]++
	}
	return m
}

// Points lists the distinct point IDs with findings, sorted.
func Points(fs []Finding) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if !seen[f.PointID] {
			seen[f.PointID] = true
			out = append(out, f.PointID)
		}
	}
	sort.Strings(out)
	return out
}

// validJoules is a perf result's joules per output token when its power
// passed the gate (0, not compared, otherwise). Figures of two power
// sources never meet here: the source is in the measurement profile, so
// such a baseline is Incomparable.
func validJoules(p *Perf) float64 {
	if p.Power == nil || !p.Power.Valid {
		return 0
	}
	return p.Power.JoulesPerOutputToken
}

func round(v float64) float64 { return math.Round(v*100) / 100 }

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
