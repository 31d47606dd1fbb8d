package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// engineFault is how gateEngine misbehaves.
type engineFault int

const (
	engineOK         engineFault = iota
	engineBuffered               // holds the stream back and sends it in one write (a buffering proxy)
	engineZeroTokens             // streams text but reports usage.completion_tokens 0
	engineHalfPrompt             // reports half the prompt tokens it was sent
)

// gateEngine is an OpenAI-compatible streaming server for the validity gate
// tests: one token per chunk, 3 ms apart, the prompt counted in words (the
// load generator's random words) and max_tokens honoured.
func gateEngine(t *testing.T, fault engineFault) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flush_cache" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		prompt := 0
		for _, m := range req.Messages {
			prompt += len(strings.Fields(m.Content))
		}
		out := req.MaxTokens
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		var held strings.Builder
		emit := func(s string) {
			if fault == engineBuffered {
				held.WriteString(s)
				return
			}
			_, _ = w.Write([]byte(s))
			fl.Flush()
		}
		time.Sleep(5 * time.Millisecond)
		for i := range out {
			if i > 0 {
				time.Sleep(3 * time.Millisecond)
			}
			emit(`data: {"id":"g","choices":[{"index":0,"delta":{"content":" tok"}}]}` + "\n\n")
		}
		reported, completion := prompt, out
		switch fault {
		case engineZeroTokens:
			completion = 0
		case engineHalfPrompt:
			reported = prompt / 2
		}
		emit(fmt.Sprintf(`data: {"id":"g","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", reported, completion))
		emit("data: [DONE]\n\n")
		if fault == engineBuffered {
			_, _ = w.Write([]byte(held.String()))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// gateSpec is a small fixed-seq-len point: c2, 20 requests of ISL 64 / OSL 16.
func gateSpec(sweep string) point.Spec {
	p := testSpec(sweep, "g", 2)
	p.ISL, p.OSL, p.Eval, p.Model = 64, 16, false, "m"
	p.Profile.ISL, p.Profile.OSL, p.Profile.Eval = 64, 16, false
	return p
}

// TestPerfValidityGate is issue 24's acceptance test: perf results with
// identical chunk timestamps, zero output tokens, a short window and wrong
// lengths are each refused with a reason naming the figure, as an
// InvalidResult the workflow retries once; none reaches the ledger. The
// same point against a well-behaved engine is stored with its evidence.
func TestPerfValidityGate(t *testing.T) {
	cases := []struct {
		name   string
		fault  engineFault
		reason string
	}{
		{"identical chunk timestamps", engineBuffered, "invalid perf result: tpot: median 0 ms is at or below the clock resolution"},
		{"zero output tokens", engineZeroTokens, "invalid perf result: output_tokens: 0 output tokens over 20 completed requests"},
		{"wrong prompt lengths", engineHalfPrompt, "invalid perf result: prompt_tokens: served mean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newLedgerActs(t)
			p := gateSpec("s-" + strings.ReplaceAll(tc.name, " ", "-"))
			in := StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, tc.fault)}}
			_, err := newActivityEnv(a).ExecuteActivity(a.Perf, in)
			app := appError(t, err)
			assert.Equal(t, string(failure.ErrInvalidResult), app.Type())
			assert.Contains(t, app.Error(), tc.reason)
			assert.Contains(t, app.Error(), "; evidence: client loadgen, ", "the operator sees what was measured")
			assert.False(t, app.NonRetryable(), "the first refusal is retried")
			_, stored, err := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
			require.NoError(t, err)
			assert.False(t, stored, "a refused result never enters the ledger")

			// The retry's refusal is the last: it goes to the operator gate.
			env := newActivityEnv(a)
			env.SetHeartbeatDetails(loadProgress{Phase: "perf", Refused: 1})
			_, err = env.ExecuteActivity(a.Perf, in)
			app = appError(t, err)
			assert.Equal(t, string(failure.ErrInvalidResult), app.Type())
			assert.True(t, app.NonRetryable(), "refused twice: the operator decides")
			_, stored, err = a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
			require.NoError(t, err)
			assert.False(t, stored)
		})
	}

	t.Run("valid", func(t *testing.T) {
		a := newLedgerActs(t)
		p := gateSpec("s-valid")
		val, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, engineOK)}})
		require.NoError(t, err)
		var out point.PerfSummary
		require.NoError(t, val.Get(&out))
		require.NotNil(t, out.Evidence)
		ev := out.Evidence
		assert.Equal(t, 20, ev.Completed)
		assert.Equal(t, point.PerfClientLoadgen, ev.Client)
		assert.False(t, ev.PrefixCacheFlushed, "this engine has no /flush_cache")
		// One token per chunk 3 ms apart: TPOT is at least the server's
		// sleep (sleeps only overshoot) and far from 0.
		assert.GreaterOrEqual(t, out.TPOTMedianMs, 3.0)
		assert.Less(t, out.TPOTMedianMs, 30.0)
		require.NotNil(t, ev.ClientLag)
		assert.LessOrEqual(t, *ev.ClientLag, point.MaxClientLag)
		so, stored, err := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
		require.NoError(t, err)
		require.True(t, stored)
		assert.Contains(t, string(so.OutputJSON), `"evidence":{"client":"loadgen","completed":20`)
	})
}

// benchBackend is a backend whose recipe benchmark leaves a prepared
// InferenceX result file.
type benchBackend struct {
	fakeBackend
	result *resultfile.Result
	dir    string
	env    map[string]string
}

func (b *benchBackend) RunBenchmark(_ context.Context, _ cluster.Allocation, _ cluster.Server, spec cluster.BenchmarkSpec) (string, error) {
	b.env = spec.Env
	path := filepath.Join(b.dir, resultfile.FileName(spec.ResultFilename, spec.Conc))
	return path, resultfile.Write(path, b.result)
}

// TestPerfValidityGateBenchmarkFile: the recipe's benchmark result goes
// through the same gate. A replay whose window is shorter than the DURATION
// it was given (less two idle-gap caps: first send to last response), or
// with fewer calls than lanes, is refused and not stored.
func TestPerfValidityGateBenchmarkFile(t *testing.T) {
	good := func() *resultfile.Result {
		r := &resultfile.Result{Conc: 4, ScenarioType: resultfile.ScenarioAgentic, NumRequestsTotal: 40, NumRequestsSuccess: 40, TP: 8}
		rm := &r.RequestMetrics
		rm.Throughput.DurationSeconds = 600
		rm.Throughput.Output.TokensPerSecond = 800
		rm.Tokens.Input.Mean, rm.Tokens.OutputActual.Mean = 30000, 300
		rm.Latency.TPOT.P50, rm.Latency.ITL.P50, rm.Latency.Intvty.P50 = 0.02, 0.02, 50
		return r
	}
	cases := []struct {
		name   string
		mutate func(*resultfile.Result)
		reason string // "" stores
	}{
		{"valid", func(*resultfile.Result) {}, ""},
		{"short window", func(r *resultfile.Result) { r.RequestMetrics.Throughput.DurationSeconds = 300 },
			"invalid perf result: window: measured 300 s, shorter than the planned 580 s"},
		{"fewer calls than lanes", func(r *resultfile.Result) { r.NumRequestsTotal, r.NumRequestsSuccess = 3, 3 },
			"invalid perf result: completed: 3 completed calls, fewer than the 4 lanes"},
		{"zero output tokens", func(r *resultfile.Result) { r.RequestMetrics.Tokens.OutputActual.Mean = 0 },
			"invalid perf result: output_tokens: 0 output tokens over 40 completed requests"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newLedgerActs(t)
			r := good()
			tc.mutate(r)
			bb := &benchBackend{result: r, dir: t.TempDir()}
			a.Backend, a.PerfClient, a.Simulated, a.Load.Seed = bb, point.PerfClientBenchmark, true, 11
			p := testSpec("s-"+strings.ReplaceAll(tc.name, " ", "-"), "b", 4)
			p.ISL, p.OSL, p.DurationSec, p.Eval = 0, 0, 600, false
			p.Profile = point.Profile{Scenario: loadgen.ScenarioAgentic, DurationSec: 600, Backend: "slurm", Launcher: "sbatch"}
			_, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: gateEngine(t, engineOK)}})
			_, stored, lerr := a.Store.StageOutput(context.Background(), p.SweepID, p.Identity, point.StagePerf)
			require.NoError(t, lerr)
			// The simulated benchmark replays with the point's seeds, which
			// the measurement profile records.
			m := a.measurement(p)
			assert.Equal(t, strconv.FormatInt(m.PointSeed, 10), bb.env[simenv.EnvSeed])
			assert.Equal(t, "11", bb.env[simenv.EnvTraceSeed])
			assert.EqualValues(t, 11, m.TraceSeed)
			assert.Equal(t, point.PerfClientBenchmark, m.PerfClient)
			if tc.reason == "" {
				require.NoError(t, err)
				assert.True(t, stored)
				return
			}
			app := appError(t, err)
			assert.Equal(t, string(failure.ErrInvalidResult), app.Type())
			assert.Contains(t, app.Error(), tc.reason)
			assert.Contains(t, app.Error(), "; evidence: client benchmark, ")
			assert.False(t, stored, "a refused result never enters the ledger")
		})
	}
}

// TestPerfDurationUnits: the row's duration is engine seconds and the
// worker's cap wall seconds; on a simulator at time scale s the row takes
// s x its duration of wall time, and the shorter of that and the cap wins
// (issue 24, found 6).
func TestPerfDurationUnits(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Activities
		row  int
		want time.Duration
	}{
		{"row shorter than the cap on the scaled clock", Activities{Load: PerfConfig{Duration: 4 * time.Second, TimeScale: 0.002}}, 1800, 3600 * time.Millisecond},
		{"cap shorter than the row", Activities{Load: PerfConfig{Duration: 2 * time.Second, TimeScale: 0.002}}, 3600, 2 * time.Second},
		{"no cap, scaled clock", Activities{Load: PerfConfig{TimeScale: 0.002}}, 600, 1200 * time.Millisecond},
		{"real engine", Activities{Load: PerfConfig{Duration: time.Hour}}, 600, 600 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.a.perfDuration(point.Spec{DurationSec: tc.row}))
		})
	}
}

// TestPointIndependentOfPredecessor is issue 24's cross-point test: on one
// simulated server, the c8 point measures the same TTFT and cached-token
// count whether it runs first or after the c4 point of its deployment
// (prompts seeded from the point's identity; the prefix cache flushed
// before each point).
func TestPointIndependentOfPredecessor(t *testing.T) {
	const scale = 0.2 // engine time runs 5x faster: 1 ms of wall jitter is 5 ms of TTFT
	run := func(specs ...point.Spec) loadgen.Aggregate {
		s, err := sim.New(sim.Config{TimeScale: scale, Seed: 1})
		require.NoError(t, err)
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		a := newLedgerActs(t)
		a.Simulated, a.Load.TimeScale, a.Load.Seed = true, scale, 5
		var out point.PerfSummary
		for _, p := range specs {
			val, err := newActivityEnv(a).ExecuteActivity(a.Perf, StageInput{Point: p, Endpoint: &cluster.Server{URL: srv.URL}})
			require.NoError(t, err, p.PointID)
			out = point.PerfSummary{}
			require.NoError(t, val.Get(&out))
		}
		require.NotNil(t, out.Evidence)
		assert.True(t, out.Evidence.PrefixCacheFlushed, "the simulator offers /flush_cache")
		agg := readAggregate(t, a, out.AggregateURI)
		t.Logf("c8 after %d point(s): median TTFT %.4g s, cached tokens %d", len(specs)-1, agg.MedianTTFT, agg.TotalCachedTokens)
		return agg
	}
	spec := func(conc int) point.Spec {
		p := testSpec("s-cross", "c", conc)
		p.ISL, p.OSL, p.Eval, p.Model = 512, 8, false, sim.DefaultModel
		p.Profile.ISL, p.Profile.OSL, p.Profile.Eval = 512, 8, false
		return p
	}
	alone := run(spec(8))
	after := run(spec(4), spec(8))
	assert.Equal(t, alone.TotalCachedTokens, after.TotalCachedTokens, "cached tokens of c8 must not depend on c4 running first")
	assert.Zero(t, after.TotalCachedTokens, "random prompts of one point share no prefix page")
	// Median TTFT at c8 of ISL ~460 (about 43 ms): the same model figure
	// either way; 15 % covers the scheduling jitter of a loaded 2-core host
	// at 5x compression (runs here differ by up to 6 %).
	assert.InEpsilon(t, alone.MedianTTFT, after.MedianTTFT, 0.15)
}

// readAggregate loads a stored perf aggregate.
func readAggregate(t *testing.T, a *Activities, uri string) loadgen.Aggregate {
	t.Helper()
	rc, err := a.Artifacts.Open(context.Background(), uri)
	require.NoError(t, err)
	defer rc.Close()
	var agg loadgen.Aggregate
	require.NoError(t, json.NewDecoder(rc).Decode(&agg))
	return agg
}

// TestPerfMeasurementProfile: what changes a perf figure is in the
// measurement profile, so a stored figure is reused only under the same
// client, load generator, settings, seeds and container remapping (issue
// 24, found 3); and each point of a deployment gets its own seed (found 2).
func TestPerfMeasurementProfile(t *testing.T) {
	a := &Activities{Load: PerfConfig{Seed: 3}, Containers: map[string]string{"sglang": "/images/sglang-0.5.sqsh"}}
	p4, p8 := testSpec("s", "d", 4), testSpec("s", "d", 8)
	m := a.measurement(p4)
	assert.Equal(t, point.PerfClientLoadgen, m.PerfClient)
	assert.Equal(t, loadgen.Version, m.LoadgenVersion)
	assert.Equal(t, 0.8, m.RandomRangeRatio)
	assert.Equal(t, [2]int{512, 64}, [2]int{m.WarmupISL, m.WarmupOSL})
	assert.Equal(t, "flush", m.PrefixCache)
	assert.Equal(t, a.Containers, m.Containers)
	assert.Equal(t, a.pointSeed(p4), m.PointSeed)
	assert.NotEqual(t, a.pointSeed(p4), a.pointSeed(p8), "no two points of a deployment share prompts")
	assert.Equal(t, a.pointSeed(p4), a.options(p4, cluster.Server{URL: "http://x"}).Seed)
	// The same point on another image (same baseline key) keeps its prompts,
	// so a nightly's figures stay comparable with the last image's.
	img := p4
	img.Identity, img.BaselineKey = "other-image-identity-c4", "same-point-c4"
	p4k := p4
	p4k.BaselineKey = "same-point-c4"
	assert.Equal(t, a.pointSeed(p4k), a.pointSeed(img))
	assert.Equal(t, a.measured(p4k, point.StagePerf).Hash(), a.measured(img, point.StagePerf).Hash(), "an image change alone keeps the profile")

	b := *a
	b.Containers = map[string]string{"sglang": "/images/sglang-0.6.sqsh"}
	assert.NotEqual(t, a.measured(p4, point.StagePerf).Hash(), b.measured(p4, point.StagePerf).Hash(), "another image, another profile")
}
