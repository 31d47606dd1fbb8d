// Package energy turns GPU board-power samples of a perf run's measurement
// window into InferenceX's energy figures (joules per output and per total
// token, mean and p90 power, the prefill and decode shares of a
// disaggregated deployment) and judges them with a power validity gate, as
// the perf gate judges latency. A point whose power fails the gate keeps its
// perf figures; its Figures say power-invalid and why.
//
// The definitions are InferenceX's (SemiAnalysisAI/InferenceX,
// infx/results/power/): integration and the p90 of the summed curve from
// common.py (commit 72b1bd7e3cf00144bd95d8144765ac4a1efc61f8,
// _interpolate_power, _integrate_device, _percentile_total_power), the
// metric set from multinode.py validate_and_integrate (commit
// 003c42dac025a733725f0eeeb421b962895e0ca9) and the field names from
// __init__.py WHOLE_METRIC_KEYS and ROLE_METRIC_KEYS (commit
// f387fe099fee259595b5c95f83d72167477b1aef). The gap rule (3 s between
// successive samples from the last at or before the window's start to the
// first at or after its end) and the reason codes of the gate are
// single_node.py integrate_power's (commit
// 09f2cf9a35668ca90e9ff21f0adf03cffea823d2); the device rule is
// multinode.py _validate_devices'. The board limit and the peak figures are
// sweepflow's own: InferenceX has neither.
//
// The samples come from one of three sources (Source), which is part of a
// point's measurement profile so figures of different sources are never
// compared: srt-slurm's telemetry stage on Slurm (samples.csv, read here),
// nvidia-smi on a local GPU host, or the simulator's power model (Model).
package energy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Sources of power samples.
const (
	// SourceDCGM is srt-slurm's telemetry stage (provider dcgm-power): a
	// head-node collector scraping every worker node's dcgm-exporter.
	SourceDCGM = "dcgm-power"
	// SourceNVML is nvidia-smi's NVML readings on the worker's own host.
	SourceNVML = "nvml"
	// SourceSimulated is the simulator's power model (Model).
	SourceSimulated = "simulated"
)

// Worker roles of a GPU (srt-slurm's worker_role).
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleAgg     = "agg"
)

// DefaultMaxGapSec is the longest gap between a GPU's successive samples
// across the window (single_node.py _DEFAULT_MAX_SAMPLE_GAP_S; srt-slurm's
// contract.MAX_SAMPLE_GAP_SECONDS is the same 3 s).
const DefaultMaxGapSec = 3.0

// Reason codes of the power gate, InferenceX's where it has one.
const (
	ReasonWindow          = "invalid_benchmark_window"       // common.py _load_benchmark_data
	ReasonQueries         = "invalid_successful_query_count" // common.py
	ReasonInputTokens     = "invalid_input_token_count"      // common.py
	ReasonOutputTokens    = "invalid_output_token_count"     // common.py
	ReasonDeviceMissing   = "expected_device_missing"        // multinode.py _validate_devices
	ReasonUnexpected      = "unexpected_device"              // multinode.py _validate_devices
	ReasonNoSamples       = "no_usable_power_samples"        // single_node.py
	ReasonInsufficient    = "insufficient_power_samples"     // single_node.py
	ReasonNotBracketed    = "benchmark_window_not_bracketed" // single_node.py
	ReasonGap             = "sampling_gap_exceeded"          // single_node.py
	ReasonInvalidSample   = "invalid_power_sample"           // single_node.py
	ReasonAboveBoardLimit = "power_above_board_limit"        // sweepflow: a reading above the board's rated limit
	ReasonNonFinite       = "non_finite_power_metric"        // multinode.py
	ReasonNotCollected    = "power_not_collected"            // sweepflow: the source produced no samples file
)

// Sample is one GPU's board-power reading, a row of srt-slurm's
// samples.csv.
type Sample struct {
	Timestamp float64 // unix seconds on the window's clock
	Seq       int     // scrape sequence number
	Hostname  string
	GPUIndex  int
	GPUUUID   string
	PowerW    float64
}

// Device is a GPU the deployment holds, with its worker role.
type Device struct {
	Hostname string `json:"hostname"`
	GPUIndex int    `json:"gpu_index"`
	Role     string `json:"role"` // prefill | decode | agg
}

func (d Device) key() string { return fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex) }

// Window is the perf run's formal measurement window, unix seconds
// (benchmark_start_time_unix, benchmark_end_time_unix): warmup, bring-up
// and the eval lie outside it.
type Window struct {
	Start float64 `json:"start_time_unix"`
	End   float64 `json:"end_time_unix"`
}

// Tokens are the perf result's counts the energy is normalised by.
type Tokens struct {
	Completed    int   // successful queries
	InputTokens  int64 // total_input_tokens
	OutputTokens int64 // total_output_tokens
}

// Rule is the power gate's bounds.
type Rule struct {
	MaxGapSec float64 // DefaultMaxGapSec when 0
	// BoardLimitW is the board's rated power limit; a reading above it is
	// not a measurement (0: not checked).
	BoardLimitW float64
}

// Figures are a point's power figures with the gate's verdict. The metric
// fields carry InferenceX's names and are set only when Valid, as
// InferenceX publishes metrics only for a valid measurement.
type Figures struct {
	Source    string   `json:"power_source"`
	Simulated bool     `json:"simulated,omitempty"`
	Valid     bool     `json:"power_valid"`
	Reasons   []string `json:"power_invalid_reasons,omitempty"`
	Window    Window   `json:"window"`
	// ExpectedGPUs and ObservedGPUs are the deployment's GPUs and those the
	// samples show; MaxGapSec is the largest gap any GPU had across the
	// window.
	ExpectedGPUs int     `json:"expected_gpu_count"`
	ObservedGPUs int     `json:"observed_gpu_count"`
	MaxGapSec    float64 `json:"max_sample_gap_s"`

	AvgPowerW                float64 `json:"avg_power_w,omitempty"`
	P90PowerW                float64 `json:"p90_power_w,omitempty"`
	P90TotalGPUPowerW        float64 `json:"p90_total_gpu_power_w,omitempty"`
	AvgTotalGPUPowerW        float64 `json:"avg_total_gpu_power_w,omitempty"`
	TotalGPUEnergyJ          float64 `json:"total_gpu_energy_j,omitempty"`
	JoulesPerSuccessfulQuery float64 `json:"joules_per_successful_query,omitempty"`
	JoulesPerInputToken      float64 `json:"joules_per_input_token,omitempty"`
	JoulesPerOutputToken     float64 `json:"joules_per_output_token,omitempty"`
	JoulesPerTotalToken      float64 `json:"joules_per_total_token,omitempty"`
	// Roles of a disaggregated deployment: the board energy of the role's
	// GPUs over the whole window (not a kernel-phase energy), as
	// multinode.py defines them.
	PrefillGPUEnergyJ          float64 `json:"prefill_gpu_energy_j,omitempty"`
	DecodeGPUEnergyJ           float64 `json:"decode_gpu_energy_j,omitempty"`
	PrefillAvgPowerW           float64 `json:"prefill_avg_power_w,omitempty"`
	DecodeAvgPowerW            float64 `json:"decode_avg_power_w,omitempty"`
	PrefillJoulesPerInputToken float64 `json:"prefill_joules_per_input_token,omitempty"`
	DecodeJoulesPerOutputToken float64 `json:"decode_joules_per_output_token,omitempty"`
	// Peaks are sweepflow's: the highest reading of one GPU in the window,
	// and the highest point of the deployment's summed power curve.
	PeakPowerW         float64 `json:"peak_power_w,omitempty"`
	PeakTotalGPUPowerW float64 `json:"peak_total_gpu_power_w,omitempty"`
}

// Reason is the gate's refusal in one line ("" when valid).
func (f *Figures) Reason() string {
	if f == nil || f.Valid {
		return ""
	}
	return strings.Join(f.Reasons, ", ")
}

// Invalid is figures refused before any sample was read (a source that
// wrote nothing, a window without an end).
func Invalid(source string, simulated bool, reasons ...string) *Figures {
	return &Figures{Source: source, Simulated: simulated, Reasons: reasons}
}

// Compute judges samples of the window against the deployment's devices and,
// when they pass, integrates them into Figures.
func Compute(source string, samples []Sample, devices []Device, w Window, t Tokens, rule Rule) *Figures {
	f := &Figures{Source: source, Window: w, ExpectedGPUs: len(devices)}
	if rule.MaxGapSec <= 0 {
		rule.MaxGapSec = DefaultMaxGapSec
	}
	add := func(r string) {
		if !slices.Contains(f.Reasons, r) {
			f.Reasons = append(f.Reasons, r)
		}
	}
	if !finite(w.Start) || !finite(w.End) || w.End <= w.Start {
		add(ReasonWindow)
		return f
	}
	if t.Completed <= 0 {
		add(ReasonQueries)
	}
	if t.InputTokens <= 0 {
		add(ReasonInputTokens)
	}
	if t.OutputTokens <= 0 {
		add(ReasonOutputTokens)
	}
	// Per device, the samples in the band the window's bracketing can use;
	// rows further out are warmup, bring-up or eval and never judged
	// (single_node.py skips them the same way).
	lo, hi := w.Start-rule.MaxGapSec, w.End+rule.MaxGapSec
	byDev := map[string][]point{}
	for _, s := range samples {
		if !finite(s.Timestamp) || s.Timestamp < lo || s.Timestamp > hi {
			continue
		}
		k := Device{Hostname: s.Hostname, GPUIndex: s.GPUIndex}.key()
		if !finite(s.PowerW) || s.PowerW < 0 {
			add(ReasonInvalidSample)
			continue
		}
		if rule.BoardLimitW > 0 && s.PowerW > rule.BoardLimitW {
			add(ReasonAboveBoardLimit)
		}
		byDev[k] = append(byDev[k], point{s.Timestamp, s.PowerW})
	}
	f.ObservedGPUs = len(byDev)
	expected := map[string]Device{}
	for _, d := range devices {
		expected[d.key()] = d
	}
	if len(byDev) == 0 {
		add(ReasonNoSamples)
	}
	if len(devices) == 0 {
		add(ReasonDeviceMissing)
	}
	for _, d := range devices {
		if _, ok := byDev[d.key()]; !ok {
			add(ReasonDeviceMissing)
		}
	}
	for k := range byDev {
		if _, ok := expected[k]; !ok {
			add(ReasonUnexpected)
		}
	}
	curves := make([][]point, 0, len(devices))
	for _, d := range devices {
		pts := byDev[d.key()]
		if len(pts) == 0 {
			continue
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
		pts = meanDuplicates(pts)
		switch {
		case len(pts) < 2:
			add(ReasonInsufficient)
			continue
		case pts[0].t > w.Start || pts[len(pts)-1].t < w.End:
			add(ReasonNotBracketed)
			continue
		}
		gap := maxGap(pts, w)
		f.MaxGapSec = math.Max(f.MaxGapSec, gap)
		if gap > rule.MaxGapSec {
			add(ReasonGap)
		}
		curves = append(curves, pts)
	}
	if len(f.Reasons) > 0 {
		return f
	}
	f.fill(devices, curves, w, t)
	for _, v := range []float64{f.TotalGPUEnergyJ, f.JoulesPerOutputToken, f.JoulesPerTotalToken, f.P90TotalGPUPowerW} {
		if !finite(v) {
			*f = Figures{Source: f.Source, Window: w, ExpectedGPUs: f.ExpectedGPUs, ObservedGPUs: f.ObservedGPUs, MaxGapSec: f.MaxGapSec}
			add(ReasonNonFinite)
			return f
		}
	}
	f.Valid = true
	return f
}

// fill sets the metrics of a valid window (multinode.py
// validate_and_integrate, the metrics block).
func (f *Figures) fill(devices []Device, curves [][]point, w Window, t Tokens) {
	dur := w.End - w.Start
	n := float64(len(devices))
	role := map[string]float64{}
	roleGPUs := map[string]float64{}
	for i, d := range devices {
		e := integrate(curves[i], w)
		f.TotalGPUEnergyJ += e
		role[d.Role] += e
		roleGPUs[d.Role]++
		for _, p := range clip(curves[i], w) {
			f.PeakPowerW = math.Max(f.PeakPowerW, p.p)
		}
	}
	p90 := percentileTotal(curves, w, 0.9)
	f.AvgPowerW = f.TotalGPUEnergyJ / dur / n
	f.P90PowerW = p90 / n
	f.P90TotalGPUPowerW = p90
	f.AvgTotalGPUPowerW = f.TotalGPUEnergyJ / dur
	f.JoulesPerSuccessfulQuery = f.TotalGPUEnergyJ / float64(t.Completed)
	f.JoulesPerInputToken = f.TotalGPUEnergyJ / float64(t.InputTokens)
	f.JoulesPerOutputToken = f.TotalGPUEnergyJ / float64(t.OutputTokens)
	f.JoulesPerTotalToken = f.TotalGPUEnergyJ / float64(t.InputTokens+t.OutputTokens)
	f.PeakTotalGPUPowerW = percentileTotal(curves, w, 1)
	if g := roleGPUs[RolePrefill]; g > 0 {
		f.PrefillGPUEnergyJ = role[RolePrefill]
		f.PrefillAvgPowerW = role[RolePrefill] / dur / g
		f.PrefillJoulesPerInputToken = role[RolePrefill] / float64(t.InputTokens)
	}
	if g := roleGPUs[RoleDecode]; g > 0 {
		f.DecodeGPUEnergyJ = role[RoleDecode]
		f.DecodeAvgPowerW = role[RoleDecode] / dur / g
		f.DecodeJoulesPerOutputToken = role[RoleDecode] / float64(t.OutputTokens)
	}
}

// point is one (time, watts) sample of a device's curve.
type point struct{ t, p float64 }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// meanDuplicates averages readings that share a timestamp (single_node.py:
// some tools stamp at a lower resolution than they sample).
func meanDuplicates(pts []point) []point {
	out := pts[:0:0]
	for i := 0; i < len(pts); {
		j, sum := i, 0.0
		for ; j < len(pts) && pts[j].t == pts[i].t; j++ {
			sum += pts[j].p
		}
		out = append(out, point{pts[i].t, sum / float64(j-i)})
		i = j
	}
	return out
}

// maxGap is the largest gap between successive samples from the last at or
// before the window's start to the first at or after its end
// (single_node.py integrate_power's relevant slice).
func maxGap(pts []point, w Window) float64 {
	left := sort.Search(len(pts), func(i int) bool { return pts[i].t > w.Start }) - 1
	right := sort.Search(len(pts), func(i int) bool { return pts[i].t >= w.End })
	gap := 0.0
	for i := max(left, 0); i < right && i+1 < len(pts); i++ {
		gap = math.Max(gap, pts[i+1].t-pts[i].t)
	}
	return gap
}

// interpolate is the power at t, linear between the samples around it
// (common.py _interpolate_power); t must be bracketed.
func interpolate(pts []point, t float64) float64 {
	r := sort.Search(len(pts), func(i int) bool { return pts[i].t >= t })
	if r < len(pts) && math.Abs(pts[r].t-t) <= 1e-9 {
		return pts[r].p
	}
	l := r - 1
	a, b := pts[l], pts[r]
	return a.p + (t-a.t)/(b.t-a.t)*(b.p-a.p)
}

// clip is the curve inside the window with interpolated end points.
func clip(pts []point, w Window) []point {
	out := []point{{w.Start, interpolate(pts, w.Start)}}
	for _, p := range pts {
		if p.t > w.Start && p.t < w.End {
			out = append(out, p)
		}
	}
	return append(out, point{w.End, interpolate(pts, w.End)})
}

// integrate is one device's energy over the window by the trapezoid rule
// (common.py _integrate_device).
func integrate(pts []point, w Window) float64 {
	c := clip(pts, w)
	e := 0.0
	for i := 1; i < len(c); i++ {
		e += (c[i].t - c[i-1].t) * (c[i-1].p + c[i].p) / 2
	}
	return e
}

// percentileTotal is the time-weighted quantile q of the deployment's
// summed power curve (common.py _percentile_total_power): the sum of the
// devices' piecewise-linear curves, each segment's power uniform over its
// range and weighted by its duration, found by 60 bisection steps.
func percentileTotal(curves [][]point, w Window, q float64) float64 {
	slope := map[float64]float64{w.Start: 0, w.End: 0}
	total := 0.0
	for _, pts := range curves {
		c := clip(pts, w)
		total += c[0].p
		for i := 1; i < len(c); i++ {
			s := (c[i].p - c[i-1].p) / (c[i].t - c[i-1].t)
			slope[c[i-1].t] += s
			slope[c[i].t] -= s
		}
	}
	times := make([]float64, 0, len(slope))
	for t := range slope {
		times = append(times, t)
	}
	slices.Sort(times)
	type seg struct{ lo, hi, d float64 }
	var segs []seg
	s := 0.0
	for i := 1; i < len(times); i++ {
		s += slope[times[i-1]]
		next := total + s*(times[i]-times[i-1])
		segs = append(segs, seg{math.Min(total, next), math.Max(total, next), times[i] - times[i-1]})
		total = next
	}
	lower, upper := math.Inf(1), math.Inf(-1)
	for _, g := range segs {
		lower, upper = math.Min(lower, g.lo), math.Max(upper, g.hi)
	}
	target := (w.End - w.Start) * q
	for range 60 {
		v := lower + (upper-lower)/2
		below := 0.0
		for _, g := range segs {
			switch {
			case v >= g.hi:
				below += g.d
			case v > g.lo:
				below += g.d * (v - g.lo) / (g.hi - g.lo)
			}
		}
		if below >= target {
			upper = v
		} else {
			lower = v
		}
	}
	return upper
}

// SortDevices orders devices by host, then GPU index.
func SortDevices(ds []Device) {
	slices.SortFunc(ds, func(a, b Device) int {
		return cmp.Or(strings.Compare(a.Hostname, b.Hostname), cmp.Compare(a.GPUIndex, b.GPUIndex))
	})
}
