package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/nightly/regress"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/report"
	"github.com/sweepflow/sweepflow/results"
)

// newLedgerActs: the nightly's activities on a fresh ledger and artifact
// store.
func newLedgerActs(t *testing.T) *Activities {
	dir := t.TempDir()
	store, err := results.Open(context.Background(), filepath.Join(dir, "results.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	arts, err := artifacts.Open(filepath.Join(dir, "artifacts"))
	require.NoError(t, err)
	return &Activities{Store: store, Artifacts: arts, StateDir: filepath.Join(dir, "state")}
}

// TestCompareWithBaseline runs three nights through the ledger: night 1 sets
// the baseline, night 2 is 20 % slower on c1 and fails c4 (a new failure),
// night 3 fails c4 again (not new) and is compared with night 1's c1 since
// night 2's c1 is its latest completed run.
func TestCompareWithBaseline(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	night := func(d int) time.Time { return time.Date(2026, 11, d, 2, 0, 0, 0, time.UTC) }
	putPerf := func(sweep, point string, tput, ttft, intvty float64) {
		require.NoError(t, a.Store.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: point, Identity: "id-" + point,
			Conc: 1, PerfSummary: regress.Perf{OutputTputPerGPU: tput, TTFTp90Ms: ttft, Interactivity: intvty}}))
	}
	compare := func(sweep string, d int, statuses map[string]string) RegressionReport {
		req := RegressionRequest{NightlyID: "nightly-" + sweep, SweepID: sweep, Night: night(d), Thresholds: regress.DefaultThresholds()}
		for _, id := range []string{"c1", "c4"} {
			req.Points = append(req.Points, RegressionPoint{PointID: id, ConfigKey: "k", BaselineKey: "key-" + id, Status: statuses[id]})
		}
		rep, err := a.CompareWithBaseline(ctx, req)
		require.NoError(t, err)
		return rep
	}

	putPerf("n1", "c1", 1000, 200, 50)
	putPerf("n1", "c4", 800, 300, 20)
	rep := compare("n1", 1, map[string]string{"c1": "completed", "c4": "completed"})
	assert.Equal(t, 0, rep.Compared)
	assert.ElementsMatch(t, []string{"c1", "c4"}, rep.NoBaseline)
	assert.Empty(t, rep.Findings)

	putPerf("n2", "c1", 1000/1.2, 240, 50/1.2)
	rep = compare("n2", 2, map[string]string{"c1": "completed", "c4": "failed"})
	assert.Equal(t, 2, rep.Compared)
	kinds := map[string][]string{}
	for _, f := range rep.Findings {
		kinds[f.PointID] = append(kinds[f.PointID], f.Kind)
		assert.Equal(t, "n1", f.BaselineSweep)
	}
	assert.Equal(t, map[string][]string{
		"c1": {regress.KindOutputTput, regress.KindTTFT, regress.KindInteractivity},
		"c4": {regress.KindNewFailure},
	}, kinds)
	assert.Equal(t, []string{"c1", "c4"}, rep.RegressedPoints)

	// Stored in the ledger and as an artifact with the same content.
	stored, ok, err := a.Store.GetRegressionReport(ctx, "n2")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 4, stored.Findings)
	assert.Equal(t, rep.ReportURI, stored.ArtifactURI)
	rc, err := a.Artifacts.Open(ctx, rep.ReportURI)
	require.NoError(t, err)
	data, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	var fromArtifact RegressionReport
	require.NoError(t, json.Unmarshal(data, &fromArtifact))
	assert.Len(t, fromArtifact.Findings, 4)
	assert.Contains(t, string(data), "c1 output throughput per GPU")

	// Retried activity: same report, no duplicate rows.
	again := compare("n2", 2, map[string]string{"c1": "completed", "c4": "failed"})
	assert.Len(t, again.Findings, 4)

	putPerf("n3", "c1", 1000/1.2, 240, 50/1.2)
	rep = compare("n3", 3, map[string]string{"c1": "completed", "c4": "failed"})
	assert.Equal(t, "n2", rep.BaselineSweeps["c1"], "the latest completed night")
	assert.Equal(t, "n2", rep.BaselineSweeps["c4"], "the previous night, failed too")
	assert.Empty(t, rep.Findings, "same speed as night 2, and c4's failure is not new")

	// A pinned baseline compares with that sweep whatever came since.
	req := RegressionRequest{SweepID: "n3", Night: night(3), Baseline: "n1", Thresholds: regress.DefaultThresholds(),
		Points: []RegressionPoint{{PointID: "c1", BaselineKey: "key-c1", Status: "completed"}}}
	rep, err = a.CompareWithBaseline(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "n1", rep.Baseline)
	require.Len(t, rep.Findings, 3)
	assert.Equal(t, "n1", rep.Findings[0].BaselineSweep)
}

func TestPostWebhook(t *testing.T) {
	var got []byte
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		w.WriteHeader(status)
	}))
	defer srv.Close()
	a := &Activities{}
	cases := []struct {
		name         string
		status       int
		url          string
		wantErr      bool
		nonRetryable bool
	}{
		{"ok", http.StatusOK, srv.URL + "/hook", false, false},
		{"accepted", http.StatusAccepted, srv.URL + "/hook", false, false},
		{"not found is final", http.StatusNotFound, srv.URL + "/hook", true, true},
		{"rate limited is retried", http.StatusTooManyRequests, srv.URL + "/hook", true, false},
		{"server error is retried", http.StatusBadGateway, srv.URL + "/hook", true, false},
		{"unreachable is retried", 0, "http://127.0.0.1:1/secret-token", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status = tc.status
			err := a.PostWebhook(context.Background(), WebhookRequest{URL: tc.url, Summary: Summary{NightlyID: "n", Regressions: 1,
				RegressedPoints: []string{"c1"}}})
			if !tc.wantErr {
				require.NoError(t, err)
				var body Summary
				require.NoError(t, json.Unmarshal(got, &body))
				assert.Equal(t, 1, body.Regressions)
				assert.Equal(t, []string{"c1"}, body.RegressedPoints)
				return
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "secret-token", "the URL path may hold a token")
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			assert.Equal(t, tc.nonRetryable, app.NonRetryable())
		})
	}
}

// TestCompareWithBaselineOnlyComparable: a real night whose only earlier
// night under the same baseline key was simulated (or measured under
// another profile) reports "no comparable baseline", not a verdict, and a
// night further back with the same flag and profile is the baseline.
func TestCompareWithBaselineOnlyComparable(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	night := func(d int) time.Time { return time.Date(2026, 11, d, 2, 0, 0, 0, time.UTC) }
	putPerf := func(sweep string, tput float64, sim bool, hash string) {
		require.NoError(t, a.Store.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: "c1", Identity: "id-" + sweep, ProfileHash: hash,
			Conc: 1, PerfSummary: regress.Perf{OutputTputPerGPU: tput, TTFTp90Ms: 200, Interactivity: 50, Simulated: sim}}))
	}
	compare := func(sweep string, d int) RegressionReport {
		rep, err := a.CompareWithBaseline(ctx, RegressionRequest{NightlyID: "nightly-" + sweep, SweepID: sweep, Night: night(d), Thresholds: regress.DefaultThresholds(),
			Points: []RegressionPoint{{PointID: "c1", ConfigKey: "k", BaselineKey: "key-c1", Status: "completed"}}})
		require.NoError(t, err)
		return rep
	}

	putPerf("emu", 5000, true, "hash-real")
	compare("emu", 1)
	putPerf("real", 1000, false, "hash-real")
	rep := compare("real", 2)
	assert.Equal(t, 0, rep.Compared)
	assert.Empty(t, rep.Findings, "5x below the simulated night is no regression")
	assert.Equal(t, []string{"c1: no comparable baseline: real figures, the baseline's in emu are simulated"}, rep.NoComparable)

	putPerf("other-profile", 500, false, "hash-other")
	rep = compare("other-profile", 3)
	assert.Equal(t, []string{"c1: no comparable baseline: measurement profile hash-other, the baseline's in real is hash-real"}, rep.NoComparable)
	assert.Empty(t, rep.Findings)

	// Same flag and profile as "real", two nights back: that is the baseline.
	putPerf("real2", 500, false, "hash-real")
	rep = compare("real2", 4)
	assert.Equal(t, 1, rep.Compared)
	assert.Equal(t, "real", rep.BaselineSweeps["c1"])
	require.NotEmpty(t, rep.Findings)
	assert.Equal(t, regress.KindOutputTput, rep.Findings[0].Kind)
	assert.Empty(t, rep.NoComparable)

	// A pinned baseline that is not comparable says so too.
	rep, err := a.CompareWithBaseline(ctx, RegressionRequest{SweepID: "real2", Night: night(4), Baseline: "emu", Thresholds: regress.DefaultThresholds(),
		Points: []RegressionPoint{{PointID: "c1", BaselineKey: "key-c1", Status: "completed"}}})
	require.NoError(t, err)
	assert.Empty(t, rep.Findings)
	assert.Len(t, rep.NoComparable, 1)
}

// TestCompareWithBaselineSkipsZeroPerGPUNight: a night stored with per-GPU
// figures of 0 (a point without its GPU count, before such uploads were
// refused) is passed over, so it cannot hide regressions for good.
func TestCompareWithBaselineSkipsZeroPerGPUNight(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	for d, tput := range map[int]float64{1: 1000, 2: 0} {
		sweep := fmt.Sprintf("n%d", d)
		require.NoError(t, a.Store.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: "c1", Identity: "id", ProfileHash: "h",
			Conc: 1, PerfSummary: regress.Perf{OutputTputPerGPU: tput, TTFTp90Ms: 200, Interactivity: 50}}))
		_, err := a.CompareWithBaseline(ctx, RegressionRequest{SweepID: sweep, Night: time.Date(2026, 11, d, 2, 0, 0, 0, time.UTC),
			Thresholds: regress.DefaultThresholds(), Points: []RegressionPoint{{PointID: "c1", BaselineKey: "key", Status: "completed"}}})
		require.NoError(t, err)
	}
	require.NoError(t, a.Store.PutPerf(ctx, results.PerfResult{SweepID: "n3", PointID: "c1", Identity: "id", ProfileHash: "h",
		Conc: 1, PerfSummary: regress.Perf{OutputTputPerGPU: 500, TTFTp90Ms: 200, Interactivity: 50}}))
	rep, err := a.CompareWithBaseline(ctx, RegressionRequest{SweepID: "n3", Night: time.Date(2026, 11, 3, 2, 0, 0, 0, time.UTC),
		Thresholds: regress.DefaultThresholds(), Points: []RegressionPoint{{PointID: "c1", BaselineKey: "key", Status: "completed"}}})
	require.NoError(t, err)
	assert.Equal(t, "n1", rep.BaselineSweeps["c1"])
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, regress.KindOutputTput, rep.Findings[0].Kind)
}

// TestCompareWithBaselineJoulesRise: the nightly sees a night whose GPUs
// spent 20 % more energy per output token at the same speed (the power
// figures the ledger stores with perf, migration 00005) as a regression of
// its own kind; a night whose power was invalid is not compared on energy
// and keeps its perf comparison.
func TestCompareWithBaselineJoulesRise(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	night := func(d int) time.Time { return time.Date(2026, 11, d, 2, 0, 0, 0, time.UTC) }
	put := func(sweep string, power *energy.Figures) {
		sum := regress.Perf{OutputTputPerGPU: 1000, TTFTp90Ms: 200, Interactivity: 50, Simulated: true, Power: power}
		js, err := json.Marshal(sum)
		require.NoError(t, err)
		require.NoError(t, a.Store.PutPerf(ctx, results.PerfResult{SweepID: sweep, PointID: "c64", Identity: "id-" + sweep, Conc: 64, PerfSummary: sum, JSON: js}))
	}
	compare := func(sweep string, d int) RegressionReport {
		rep, err := a.CompareWithBaseline(ctx, RegressionRequest{NightlyID: "nightly-" + sweep, SweepID: sweep, Night: night(d), Thresholds: regress.DefaultThresholds(),
			Points: []RegressionPoint{{PointID: "c64", ConfigKey: "k", BaselineKey: "key-c64", Status: "completed"}}})
		require.NoError(t, err)
		return rep
	}
	valid := func(j float64) *energy.Figures {
		return &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, JoulesPerOutputToken: j}
	}
	put("n1", valid(1.5))
	compare("n1", 1)
	put("n2", valid(1.8))
	rep := compare("n2", 2)
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, regress.KindJoules, f.Kind)
	assert.Equal(t, "n1", f.BaselineSweep)
	assert.InDelta(t, 20, f.ChangePct, 1e-9)
	assert.Equal(t, []string{"c64"}, rep.RegressedPoints)

	put("n3", &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Reasons: []string{energy.ReasonGap}})
	rep = compare("n3", 3)
	assert.Equal(t, 1, rep.Compared, "perf still compared")
	assert.Empty(t, rep.Findings, "no energy figure to compare")
}

// TestRecordCheckFailure: a night whose check failed is in the ledger as a
// nightly sweep with status check-failed and a report holding the
// findings, and `starter report` (report.Load + Render) shows them.
func TestRecordCheckFailure(t *testing.T) {
	a := newLedgerActs(t)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	ctx := context.Background()
	night := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	failures := []string{
		"upstream-image configs/dsv4-gb200-agentx.yaml:4: registry.example.com/sglang:patched (expected an upstream lmsysorg/sglang image)",
		"engine-patch configs/recipes/x.yaml:12: git apply fix.patch (expected no engine patches)",
	}
	req := CheckFailedNight{NightlyID: "nightly-x-2026-11-30T02:00:00Z", SweepID: "nightly-x-2026-11-30T02:00:00Z/sweep", Name: "dsv4",
		Night: night, Commit: "abc123", Failures: failures}
	for attempt := 0; attempt < 2; attempt++ { // idempotent: a retry rewrites the same rows
		v, err := env.ExecuteActivity(a.RecordCheckFailure, req)
		require.NoError(t, err)
		var rep RegressionReport
		require.NoError(t, v.Get(&rep))
		assert.NotEmpty(t, rep.ReportURI)
		assert.Equal(t, failures, rep.CheckFailures)
	}

	sw, found, err := a.Store.GetSweep(ctx, req.SweepID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, point.StatusCheckFailed, sw.Status)
	assert.True(t, sw.Nightly)
	assert.Equal(t, "dsv4", sw.Name)

	stored, ok, err := a.Store.GetRegressionReport(ctx, req.SweepID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, stored.Findings)
	var rep RegressionReport
	require.NoError(t, json.Unmarshal(stored.JSON, &rep))
	assert.Equal(t, failures, rep.CheckFailures)
	assert.Equal(t, "abc123", rep.SourceCommit)
	assert.Zero(t, rep.Points)

	in, err := report.Load(ctx, a.Store, req.SweepID, "")
	require.NoError(t, err)
	assert.Equal(t, failures, in.Current.CheckFailures)
	var html bytes.Buffer
	require.NoError(t, report.Render(&html, in))
	assert.Contains(t, html.String(), `id="check-failed"`)
	assert.Contains(t, html.String(), "failed with 2 findings; no point ran")
	assert.Contains(t, html.String(), "registry.example.com/sglang:patched")
}
