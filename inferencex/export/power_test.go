package export

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// TestExportPowerFields: a point's power figures go into its agg_bmk row as
// InferenceX's with_power_metrics writes them (energy.Figures.ResultFields),
// a power-invalid point's row says power_valid 0 and keeps its perf fields.
func TestExportPowerFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.UpsertSweep(ctx, results.Sweep{ID: "sw", Name: "seed", Status: "completed"}))
	put := func(id string, conc int, pw *energy.Figures) {
		pid := "dsr1_1k1k-c" + id
		require.NoError(t, f.store.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: pid, Identity: "fp" + id, ConfigKey: "dsr1-fp8-gb200-dynamo-trt",
			ExpName: "dsr1_1k1k", Topology: "TP4 agg", Conc: conc, Status: "completed", SpecJSON: spec(pid, "dsr1-fp8-gb200-dynamo-trt", conc, 4, 4, 0, fixedRow)}))
		sum := point.PerfSummary{OutputTputPerGPU: 5000, TputPerGPU: 10000, Interactivity: 50, TTFTp90Ms: 300, Power: pw}
		js, err := json.Marshal(sum)
		require.NoError(t, err)
		require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: pid, Identity: "fp" + id, ConfigKey: "dsr1-fp8-gb200-dynamo-trt",
			ExpName: "dsr1_1k1k", Conc: conc, JSON: js, PerfSummary: sum}))
	}
	put("64", 64, &energy.Figures{Source: energy.SourceNVML, Valid: true, AvgPowerW: 562.5004, TotalGPUEnergyJ: 9000, JoulesPerOutputToken: 6.0000004, JoulesPerTotalToken: 2})
	put("128", 128, &energy.Figures{Source: energy.SourceNVML, Reasons: []string{energy.ReasonGap}})
	e, err := Build(ctx, f.store, f.arts, "sw")
	require.NoError(t, err)
	require.Len(t, e.Bmk, 2)
	rows := map[string]map[string]any{}
	for _, r := range e.Bmk {
		rows[r["point_id"].(string)] = r
	}
	ok, bad := rows["dsr1_1k1k-c64"], rows["dsr1_1k1k-c128"]
	assert.Equal(t, 2, ok["power_metric_schema_version"])
	assert.Equal(t, 1, ok["power_valid"])
	assert.Equal(t, "nvml", ok["power_source"])
	assert.Equal(t, 562.5, ok["avg_power_w"], "watts to 3 decimals")
	assert.Equal(t, 6.0, ok["joules_per_output_token"], "per token to 6 decimals")
	assert.Equal(t, 0, bad["power_valid"])
	assert.NotContains(t, bad, "joules_per_output_token")
	assert.Equal(t, 5000.0, bad["output_tput_per_gpu"], "perf fields kept")
}
