package report

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/point"
)

// ForecastRow is one line of the forecast against what the sweep took.
type ForecastRow struct {
	What             string
	Forecast, Actual float64 // hours or node-hours; Actual < 0: not known
}

// ForecastCheck sets the forecast (Input.Forecast) against the sweep: the
// node-hours its stage runs held, in total and by stage kind, and its
// makespan (start to finish as the ledger has it). Nil without a forecast.
func (in *Input) ForecastCheck() []ForecastRow {
	f := in.Forecast
	if f == nil {
		return nil
	}
	cur := in.Current
	nodes := map[string]int{}
	for _, p := range cur.Points {
		var spec point.Spec
		if len(p.SpecJSON) > 0 && json.Unmarshal(p.SpecJSON, &spec) == nil {
			nodes[p.PointID] = spec.Nodes
		}
	}
	actual := forecast.Actual(cur.Stages, nodes)
	var total time.Duration
	for _, d := range actual {
		total += d
	}
	rows := []ForecastRow{{What: "node-hours", Forecast: f.NodeHours, Actual: total.Hours()}}
	for _, k := range forecast.Kinds {
		rows = append(rows, ForecastRow{What: "  " + k, Forecast: f.NodeHoursByStage[k], Actual: actual[k].Hours()})
	}
	mk := ForecastRow{What: "makespan (hours)", Forecast: f.MakespanHours, Actual: -1}
	if s := cur.Sweep; !s.StartedAt.IsZero() && !s.FinishedAt.IsZero() {
		mk.Actual = s.FinishedAt.Sub(s.StartedAt).Hours()
	}
	return append(rows, mk)
}

// forecastNote says what the forecast assumed and what the actual
// figures are.
const forecastNote = "Forecast: the sweep's stored plan run through the sweep workflow in virtual time (starter forecast), " +
	"bring-up from its cluster profile's bring-up-time, perf from each row, warmup 5 min and eval 10 min assumed. " +
	"Actual: the node time of the ledger's stage runs, every attempt counted, and the sweep's start to finish."

// ForecastLine is the one-line comparison `starter report` prints ("" without
// a forecast).
func (in *Input) ForecastLine() string {
	rows := in.ForecastCheck()
	if rows == nil {
		return in.ForecastNote
	}
	nh, mk := rows[0], rows[len(rows)-1]
	line := fmt.Sprintf("forecast vs actual: %.1f vs %.1f node-hours", nh.Forecast, nh.Actual)
	if mk.Actual >= 0 {
		return line + fmt.Sprintf(", makespan %s vs %s", hm(mk.Forecast), hm(mk.Actual))
	}
	return line + fmt.Sprintf(", makespan %s forecast (the sweep has not finished)", hm(mk.Forecast))
}

func hm(h float64) string {
	s := int(h*3600 + 0.5)
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s%3600/60, s%60)
}
