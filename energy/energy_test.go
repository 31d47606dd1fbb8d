package energy

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture testdata/samples-1p1d.csv is written in srt-slurm's telemetry
// stage format (samples.csv, schema 1, \r\n rows): a 1P1D deployment, two
// prefill GPUs on gb200-01 and two decode GPUs on gb200-02, sampled once a
// second from t=1000 to t=1007. Prefill GPU 0 draws 500 W, prefill GPU 1
// 300 W, decode GPU 0 ramps 400 + 100·(t-1000) W, decode GPU 1 alternates
// 600 W (even seconds) and 800 W (odd). The window is [1001.5, 1005.5]
// (4 s): both ends fall between samples, so the boundary interpolation
// counts.
var (
	fixtureDevices = []Device{
		{Hostname: "gb200-01", GPUIndex: 0, Role: RolePrefill}, {Hostname: "gb200-01", GPUIndex: 1, Role: RolePrefill},
		{Hostname: "gb200-02", GPUIndex: 0, Role: RoleDecode}, {Hostname: "gb200-02", GPUIndex: 1, Role: RoleDecode},
	}
	fixtureWindow = Window{Start: 1001.5, End: 1005.5}
	fixtureTokens = Tokens{Completed: 10, InputTokens: 3000, OutputTokens: 1500}
)

func readFixture(t *testing.T) []Sample {
	t.Helper()
	rows, reasons, err := ReadSamples(filepath.Join("testdata", "samples-1p1d.csv"))
	require.NoError(t, err)
	require.Empty(t, reasons)
	require.Len(t, rows, 32)
	return rows
}

// TestFiguresFromTelemetryFixture: every figure equals what InferenceX's
// definitions give on the fixture, each computed by hand below.
func TestFiguresFromTelemetryFixture(t *testing.T) {
	f := Compute(SourceDCGM, readFixture(t), fixtureDevices, fixtureWindow, fixtureTokens, Rule{BoardLimitW: 1200})
	require.True(t, f.Valid, f.Reason())
	assert.Equal(t, 4, f.ExpectedGPUs)
	assert.Equal(t, 4, f.ObservedGPUs)
	assert.InDelta(t, 1.0, f.MaxGapSec, 1e-12, "single_node.py integrate_power: largest gap over the bracketing samples")

	// common.py _integrate_device, per GPU (trapezoid over the window, ends
	// by _interpolate_power): prefill 0: 500 W x 4 s = 2000 J; prefill 1:
	// 300 W x 4 s = 1200 J; decode 0 is linear, 550 W at 1001.5 to 950 W at
	// 1005.5, mean 750 W x 4 s = 3000 J; decode 1: 700 W interpolated at
	// both ends, trapezoids 0.5·(700+600)/2 + 3·700 + 0.5·(800+700)/2 =
	// 325 + 2100 + 375 = 2800 J. multinode.py validate_and_integrate:
	// total_gpu_energy_j is their sum, 9000 J.
	assert.InDelta(t, 9000, f.TotalGPUEnergyJ, 1e-9, "total_gpu_energy_j")
	// multinode.py validate_and_integrate: energy / duration (4 s) = 2250 W
	// total, / 4 GPUs = 562.5 W.
	assert.InDelta(t, 2250, f.AvgTotalGPUPowerW, 1e-9, "avg_total_gpu_power_w")
	assert.InDelta(t, 562.5, f.AvgPowerW, 1e-9, "avg_power_w")
	// multinode.py: energy / completed (10), / input (3000), / output (1500),
	// / input+output (4500).
	assert.InDelta(t, 900, f.JoulesPerSuccessfulQuery, 1e-9, "joules_per_successful_query")
	assert.InDelta(t, 3, f.JoulesPerInputToken, 1e-12, "joules_per_input_token")
	assert.InDelta(t, 6, f.JoulesPerOutputToken, 1e-12, "joules_per_output_token")
	assert.InDelta(t, 2, f.JoulesPerTotalToken, 1e-12, "joules_per_total_token")
	// common.py _percentile_total_power(q=0.9): the summed curve is 800 W of
	// prefill plus the decode pair: 2050 at 1001.5, 2000 at 1002, 2300 at
	// 1003, 2200 at 1004, 2500 at 1005, 2450 at 1005.5. Time below v for v
	// in (2450, 2500]: 0.5 + 1 + 1 + (v-2200)/300 + 0.5·(v-2450)/50 = 3.6 s
	// (90 % of 4 s) gives v = 2470 W; per GPU 2470 / 4 = 617.5 W.
	assert.InDelta(t, 2470, f.P90TotalGPUPowerW, 1e-6, "p90_total_gpu_power_w")
	assert.InDelta(t, 617.5, f.P90PowerW, 1e-6, "p90_power_w")
	// multinode.py role metrics: prefill 2000+1200 = 3200 J, / 4 s / 2 GPUs
	// = 400 W, / 3000 input tokens; decode 3000+2800 = 5800 J, / 4 s / 2 GPUs
	// = 725 W, / 1500 output tokens.
	assert.InDelta(t, 3200, f.PrefillGPUEnergyJ, 1e-9, "prefill_gpu_energy_j")
	assert.InDelta(t, 400, f.PrefillAvgPowerW, 1e-9, "prefill_avg_power_w")
	assert.InDelta(t, 3200.0/3000, f.PrefillJoulesPerInputToken, 1e-12, "prefill_joules_per_input_token")
	assert.InDelta(t, 5800, f.DecodeGPUEnergyJ, 1e-9, "decode_gpu_energy_j")
	assert.InDelta(t, 725, f.DecodeAvgPowerW, 1e-9, "decode_avg_power_w")
	assert.InDelta(t, 5800.0/1500, f.DecodeJoulesPerOutputToken, 1e-12, "decode_joules_per_output_token")
	// sweepflow's peaks: decode 0 at the window's end (950 W); the summed
	// curve's top (2500 W at 1005), _percentile_total_power at q=1.
	assert.InDelta(t, 950, f.PeakPowerW, 1e-9)
	assert.InDelta(t, 2500, f.PeakTotalGPUPowerW, 1e-6)
}

func without(rows []Sample, drop func(Sample) bool) []Sample {
	var out []Sample
	for _, r := range rows {
		if !drop(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestGateRefusesMissingGPU: a window where one GPU of the deployment never
// reports is power-invalid (multinode.py _validate_devices), with no
// figures.
func TestGateRefusesMissingGPU(t *testing.T) {
	rows := without(readFixture(t), func(s Sample) bool { return s.Hostname == "gb200-02" && s.GPUIndex == 1 })
	f := Compute(SourceDCGM, rows, fixtureDevices, fixtureWindow, fixtureTokens, Rule{})
	assert.False(t, f.Valid)
	assert.Equal(t, []string{ReasonDeviceMissing}, f.Reasons)
	assert.Equal(t, 3, f.ObservedGPUs)
	assert.Zero(t, f.JoulesPerOutputToken, "no figures from an invalid window")
}

// TestGateRefusesLongGap: decode GPU 0 missing its 1002-1004 samples has a
// 4 s gap (1001 to 1005) across the window, above the 3 s rule
// (single_node.py integrate_power, sampling_gap_exceeded). A 3 s gap
// (1002-1003 missing) is within the rule.
func TestGateRefusesLongGap(t *testing.T) {
	gap := func(from, to float64) []Sample {
		return without(readFixture(t), func(s Sample) bool {
			return s.Hostname == "gb200-02" && s.GPUIndex == 0 && s.Timestamp >= from && s.Timestamp <= to
		})
	}
	f := Compute(SourceDCGM, gap(1002, 1004), fixtureDevices, fixtureWindow, fixtureTokens, Rule{})
	assert.False(t, f.Valid)
	assert.Equal(t, []string{ReasonGap}, f.Reasons)
	assert.InDelta(t, 4, f.MaxGapSec, 1e-12)
	f = Compute(SourceDCGM, gap(1002, 1003), fixtureDevices, fixtureWindow, fixtureTokens, Rule{})
	assert.True(t, f.Valid, f.Reason())
	assert.InDelta(t, 3, f.MaxGapSec, 1e-12)
}

// TestGateRefusesBadReadings: a negative reading, a reading above the board
// limit, a window no sample brackets, and a window without tokens.
func TestGateRefusesBadReadings(t *testing.T) {
	rows := readFixture(t)
	neg := append([]Sample(nil), rows...)
	neg[10].PowerW = -1
	assert.Contains(t, Compute(SourceDCGM, neg, fixtureDevices, fixtureWindow, fixtureTokens, Rule{}).Reasons, ReasonInvalidSample)
	assert.Equal(t, []string{ReasonAboveBoardLimit},
		Compute(SourceDCGM, rows, fixtureDevices, fixtureWindow, fixtureTokens, Rule{BoardLimitW: 900}).Reasons, "decode 0 reads 900-1000 W in the band")
	late := Window{Start: 1005.5, End: 1009}
	assert.Equal(t, []string{ReasonNotBracketed}, Compute(SourceDCGM, rows, fixtureDevices, late, fixtureTokens, Rule{}).Reasons)
	assert.Equal(t, []string{ReasonOutputTokens}, Compute(SourceDCGM, rows, fixtureDevices, fixtureWindow, Tokens{Completed: 1, InputTokens: 1}, Rule{}).Reasons)
}

// TestResultFields: the fixture's figures as InferenceX's
// with_power_metrics writes them (__init__.py: schema version 2,
// power_valid 1/0, _w and _j rounded to 3 decimals, the rest to 6; Python's
// round is half-to-even), and an invalid window with no metric at all.
func TestResultFields(t *testing.T) {
	f := Compute(SourceDCGM, readFixture(t), fixtureDevices, fixtureWindow, fixtureTokens, Rule{})
	got := f.ResultFields()
	assert.Equal(t, map[string]any{
		"power_metric_schema_version": 2, "power_valid": 1, "power_source": "dcgm-power",
		"avg_power_w": 562.5, "p90_power_w": 617.5, "p90_total_gpu_power_w": 2470.0, "avg_total_gpu_power_w": 2250.0,
		"total_gpu_energy_j": 9000.0, "joules_per_successful_query": 900.0, "joules_per_input_token": 3.0,
		"joules_per_output_token": 6.0, "joules_per_total_token": 2.0,
		"prefill_gpu_energy_j": 3200.0, "prefill_avg_power_w": 400.0, "prefill_joules_per_input_token": 1.066667,
		"decode_gpu_energy_j": 5800.0, "decode_avg_power_w": 725.0, "decode_joules_per_output_token": 3.866667,
	}, got)
	bad := Compute(SourceDCGM, nil, fixtureDevices, fixtureWindow, fixtureTokens, Rule{})
	assert.Equal(t, map[string]any{"power_metric_schema_version": 2, "power_valid": 0, "power_source": "dcgm-power"}, bad.ResultFields())
}
