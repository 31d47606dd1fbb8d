package export

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// TestExportMarksAddedPoints: an added point's row says append_only and
// what added it; the planned points' rows do not; the export writes the
// perf-changelog entry InferenceX's append-only convention wants, which
// InferenceX's changelog format reads back.
func TestExportMarksAddedPoints(t *testing.T) {
	f := newFixture(t)
	fill(t, f)
	ctx := context.Background()
	planned := point.Spec{PointID: "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache", ExpName: "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc768_kvdram-hicache",
		ConfigKey: "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg", Topology: "2P1D DEP16/DEP32", Conc: 768, GPUs: 64, PrefillGPUs: 32, DecodeGPUs: 32,
		DeploymentHash: "fp", Identity: "fp-c768", Row: json.RawMessage(disaggRow)}
	for i, c := range []int{612, 443} {
		a, err := planned.AtConc(c)
		require.NoError(t, err)
		a.Added = &point.Added{Mode: point.AdaptiveFill, Deployment: "fp", Topology: "2P1D DEP16/DEP32", Seq: i + 1,
			Reason: "fill: gap c256 -> c768", Gap: &point.AddedGap{Metric: "median_e2el", FromConc: 256, From: 20, ToConc: 768, To: 100}}
		raw, err := json.Marshal(a)
		require.NoError(t, err)
		require.NoError(t, f.store.UpsertPoint(ctx, results.Point{SweepID: "sw", PointID: a.PointID, Identity: a.Identity, ConfigKey: a.ConfigKey,
			ExpName: a.ExpName, Topology: a.Topology, Conc: c, Status: "completed", SpecJSON: raw}))
		require.NoError(t, f.store.PutPerf(ctx, results.PerfResult{SweepID: "sw", PointID: a.PointID, Identity: a.Identity, ConfigKey: a.ConfigKey,
			ExpName: a.ExpName, Conc: c, JSON: []byte(`{}`), PerfSummary: point.PerfSummary{OutputTputPerGPU: 4000, E2ELMedianMs: 50000, Simulated: true}}))
	}
	e, err := Build(ctx, f.store, f.arts, "sw")
	require.NoError(t, err)
	marked := 0
	for _, row := range e.Bmk {
		if row["append_only"] == true {
			marked++
			a := row["adaptive"].(*point.Added)
			assert.Equal(t, point.AdaptiveFill, a.Mode)
			assert.Equal(t, "fill: gap c256 -> c768", a.Reason)
			assert.Contains(t, row["exp_name"], "_conc")
		} else {
			assert.NotContains(t, row, "adaptive", "%v", row["point_id"])
		}
	}
	assert.Equal(t, 2, marked)

	dir := t.TempDir()
	paths, err := e.WriteDir(dir)
	require.NoError(t, err)
	require.Len(t, paths, 3)
	bmk, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.Contains(t, string(bmk), `"adaptive": {
      "mode": "fill",`)
	assert.Contains(t, string(bmk), `"gap": {
        "metric": "median_e2el",
        "from_conc": 256,`)
	require.Equal(t, filepath.Join(dir, AppendOnlyFile), paths[2])
	data, err := os.ReadFile(paths[2])
	require.NoError(t, err)
	cl, err := ixconfig.ParseChangelog(AppendOnlyFile, data)
	require.NoError(t, err)
	require.Len(t, cl.Entries, 1)
	en := cl.Entries[0]
	require.NoError(t, cl.Check(cl.Entries))
	assert.True(t, en.AppendOnly)
	assert.Equal(t, []string{"dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"}, en.ConfigKeys)
	assert.Equal(t, []string{"agentic-coding"}, en.ScenarioTypes)
	assert.Equal(t, "XXX", en.PRLink)
	assert.Equal(t, []string{"Append concurrency 443, 612 (2P1D DEP16/DEP32) points to the existing dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg curve (sweepflow adaptive fill, sweep sw)."}, en.Description)

	// A sweep without added points writes no entry.
	plain := newFixture(t)
	fill(t, plain)
	e, err = Build(ctx, plain.store, plain.arts, "sw")
	require.NoError(t, err)
	require.Nil(t, e.AppendOnly)
	paths, err = e.WriteDir(t.TempDir())
	require.NoError(t, err)
	require.Len(t, paths, 2)
}
