package accounting

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/sweepflow/sweepflow/results"
)

// EnergySummary is the GPU energy the ledger's perf windows spent, beside
// the node-hours: per power source (package energy; simulated figures are
// their own source, never added to measured ones), the energy and output
// tokens of the points whose power passed the gate, and how many did not.
type EnergySummary struct {
	Sources []SourceEnergy `json:"sources"`
}

// SourceEnergy is one power source's total.
type SourceEnergy struct {
	Source       string  `json:"source"`
	Simulated    bool    `json:"simulated"`
	Points       int     `json:"points"`         // with valid power figures
	Invalid      int     `json:"invalid_points"` // refused by the power gate
	EnergyKWh    float64 `json:"gpu_energy_kwh"`
	OutputTokens float64 `json:"output_tokens"`
	// JoulesPerOutputToken is the energy over the output tokens of the
	// valid points.
	JoulesPerOutputToken float64 `json:"joules_per_output_token"`
}

// LoadEnergy sums the power figures of the sweeps' perf results (only
// configKey's when set).
func LoadEnergy(ctx context.Context, s *results.Store, sweeps []string, configKey string) (EnergySummary, error) {
	by := map[string]*SourceEnergy{}
	joules := map[string]float64{}
	for _, id := range sweeps {
		perf, err := s.Perf(ctx, id)
		if err != nil {
			return EnergySummary{}, err
		}
		for _, p := range perf {
			if p.Power == nil || (configKey != "" && p.ConfigKey != configKey) {
				continue
			}
			k := fmt.Sprintf("%s/%v", p.Power.Source, p.Power.Simulated)
			e := by[k]
			if e == nil {
				e = &SourceEnergy{Source: p.Power.Source, Simulated: p.Power.Simulated}
				by[k] = e
			}
			if !p.Power.Valid {
				e.Invalid++
				continue
			}
			e.Points++
			joules[k] += p.Power.TotalGPUEnergyJ
			if p.Power.JoulesPerOutputToken > 0 {
				e.OutputTokens += p.Power.TotalGPUEnergyJ / p.Power.JoulesPerOutputToken
			}
		}
	}
	out := EnergySummary{Sources: []SourceEnergy{}}
	for k, e := range by {
		e.EnergyKWh = joules[k] / 3.6e6
		if e.OutputTokens > 0 {
			e.JoulesPerOutputToken = joules[k] / e.OutputTokens
		}
		out.Sources = append(out.Sources, *e)
	}
	sort.Slice(out.Sources, func(i, j int) bool {
		a, b := out.Sources[i], out.Sources[j]
		if a.Simulated != b.Simulated {
			return !a.Simulated
		}
		return a.Source < b.Source
	})
	return out, nil
}

// WriteText prints one line per source.
func (e EnergySummary) WriteText(w io.Writer) {
	if len(e.Sources) == 0 {
		fmt.Fprintln(w, "\nGPU energy in perf windows: none recorded (no power source)")
		return
	}
	fmt.Fprintln(w, "\nGPU energy in perf windows, by power source:")
	for _, s := range e.Sources {
		label := s.Source
		if s.Simulated {
			label += ", SIMULATED"
		}
		fmt.Fprintf(w, "  %s: %.3f kWh over %d points, %.4g J/output token", label, s.EnergyKWh, s.Points, s.JoulesPerOutputToken)
		if s.Invalid > 0 {
			fmt.Fprintf(w, "; %d points power-invalid", s.Invalid)
		}
		fmt.Fprintln(w)
	}
}
