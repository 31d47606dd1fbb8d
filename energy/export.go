package energy

import "math"

// PowerMetricSchemaVersion is the power_metric_schema_version InferenceX
// stamps on a result with power fields (infx/results/power/__init__.py,
// commit f387fe099fee259595b5c95f83d72167477b1aef).
const PowerMetricSchemaVersion = 2

// ResultFields are the fields InferenceX's with_power_metrics writes into
// an aggregate result (__init__.py, the commit above):
// power_metric_schema_version, power_valid as 1 or 0, and, only when
// valid, each metric rounded to 3 decimals (watts, joules) or 6 (per-token
// and per-query figures); role metrics only for a role the deployment
// has. power_source and simulated are sweepflow's, so an export never
// passes a simulated or differently sourced figure for a measured one.
func (f *Figures) ResultFields() map[string]any {
	if f == nil {
		return nil
	}
	out := map[string]any{"power_metric_schema_version": PowerMetricSchemaVersion, "power_valid": 0, "power_source": f.Source}
	if f.Simulated {
		out["simulated_power"] = true
	}
	if !f.Valid {
		return out
	}
	out["power_valid"] = 1
	round := func(v float64, prec int) float64 {
		p := math.Pow(10, float64(prec))
		return math.RoundToEven(v*p) / p
	}
	for _, m := range []struct {
		key  string
		v    float64
		prec int
	}{
		{"avg_power_w", f.AvgPowerW, 3}, {"p90_power_w", f.P90PowerW, 3}, {"p90_total_gpu_power_w", f.P90TotalGPUPowerW, 3},
		{"avg_total_gpu_power_w", f.AvgTotalGPUPowerW, 3}, {"total_gpu_energy_j", f.TotalGPUEnergyJ, 3},
		{"joules_per_successful_query", f.JoulesPerSuccessfulQuery, 6}, {"joules_per_input_token", f.JoulesPerInputToken, 6},
		{"joules_per_output_token", f.JoulesPerOutputToken, 6}, {"joules_per_total_token", f.JoulesPerTotalToken, 6},
	} {
		out[m.key] = round(m.v, m.prec)
	}
	if f.PrefillGPUEnergyJ > 0 {
		out["prefill_gpu_energy_j"] = round(f.PrefillGPUEnergyJ, 3)
		out["prefill_avg_power_w"] = round(f.PrefillAvgPowerW, 3)
		out["prefill_joules_per_input_token"] = round(f.PrefillJoulesPerInputToken, 6)
	}
	if f.DecodeGPUEnergyJ > 0 {
		out["decode_gpu_energy_j"] = round(f.DecodeGPUEnergyJ, 3)
		out["decode_avg_power_w"] = round(f.DecodeAvgPowerW, 3)
		out["decode_joules_per_output_token"] = round(f.DecodeJoulesPerOutputToken, 6)
	}
	return out
}
