package workflows

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stretchr/testify/assert"
	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
	"go.temporal.io/sdk/temporal"
)

// seedPoints mirrors the seed GB200 sweep: node counts per point.
func seedPoints() []point.Spec {
	nodes := []struct {
		id    string
		nodes int
	}{{"agg_c1", 2}, {"agg_c4", 2}, {"dep8_c64", 6}, {"dep8_c128", 6}, {"dep16_c256", 12}, {"2p1d_c768", 16}, {"2p1d_c1024", 16}, {"2p1d_c1280", 16}}
	var out []point.Spec
	for i, n := range nodes {
		out = append(out, point.Spec{PointID: n.id, ConfigKey: "k", Nodes: n.nodes, Conc: i + 1, Topology: "t"})
	}
	return out
}

type interval struct {
	id         string
	nodes      int
	start, end time.Time
}

// runSweep runs the sweep with point workflows that sleep duration; setup
// may add mocks (e.g. search-attribute listeners) before it starts.
func runSweep(t *testing.T, in SweepInput, duration func(p point.Spec) time.Duration, setup ...func(*testsuite.TestWorkflowEnvironment)) ([]interval, *SweepProgress, *testsuite.TestWorkflowEnvironment) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	env.RegisterWorkflow(PointWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	var spans []interval
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, pin PointInput) (*PointState, error) {
		start := workflow.Now(ctx)
		if err := workflow.Sleep(ctx, duration(pin.Point)); err != nil {
			return nil, err
		}
		spans = append(spans, interval{pin.Point.PointID, pin.Point.Nodes, start, workflow.Now(ctx)})
		return &PointState{PointID: pin.Point.PointID, Status: point.StatusCompleted}, nil
	})
	for _, f := range setup {
		f(env)
	}
	env.ExecuteWorkflow(SweepWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var pr SweepProgress
	require.NoError(t, env.GetWorkflowResult(&pr))
	return spans, &pr, env
}

// peak is the largest number of nodes held at once over the spans.
func peak(spans []interval) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, s.nodes}, ev{s.end, -s.nodes})
	}
	// Releases before acquisitions at the same instant.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

func TestSweepNodeBudget(t *testing.T) {
	tests := []struct {
		name     string
		duration func(p point.Spec) time.Duration
	}{
		{"equal durations", func(point.Spec) time.Duration { return time.Hour }},
		// Small points that keep finishing would starve a 16-node row under
		// plain backfilling; the bypass bound must prevent it.
		{"short small points", func(p point.Spec) time.Duration {
			if p.Nodes <= 6 {
				return 10 * time.Minute
			}
			return 2 * time.Hour
		}},
		{"long small points", func(p point.Spec) time.Duration {
			if p.Nodes <= 6 {
				return 5 * time.Hour
			}
			return 30 * time.Minute
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spans, pr, _ := runSweep(t, SweepInput{SweepID: "s", Name: "seed", TaskQueue: "q", NodeBudget: 18, Points: seedPoints()}, tc.duration)
			require.Len(t, spans, 8, "every point ran")
			require.LessOrEqual(t, peak(spans), 18, "never more nodes than the cluster has")
			require.LessOrEqual(t, pr.MaxInUse, 18)
			require.Equal(t, 8, pr.Counts[point.StatusCompleted])
			// The three 16-node rows ran, each alone among the large rows.
			var big []interval
			for _, s := range spans {
				if s.nodes == 16 {
					big = append(big, s)
				}
			}
			require.Len(t, big, 3)
		})
	}
}

func TestSweepStarvationBound(t *testing.T) {
	// One 16-node point behind a stream of 2-node points on 18 nodes: the
	// big one must start after at most MaxBypass small ones jumped it.
	points := []point.Spec{{PointID: "a", Nodes: 4, ConfigKey: "k"}, {PointID: "big", Nodes: 16, ConfigKey: "k"}}
	for i := range 10 {
		points = append(points, point.Spec{PointID: fmt.Sprintf("small%d", i), Nodes: 2, ConfigKey: "k"})
	}
	spans, _, _ := runSweep(t, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: points, MaxBypass: 2},
		func(p point.Spec) time.Duration { return time.Duration(p.Nodes) * time.Minute })
	require.LessOrEqual(t, peak(spans), 18)
	var bigStart time.Time
	for _, s := range spans {
		if s.id == "big" {
			bigStart = s.start
		}
	}
	startedBefore := 0
	for _, s := range spans {
		if s.start.Before(bigStart) && s.nodes == 2 {
			startedBefore++
		}
	}
	require.LessOrEqual(t, startedBefore, 2, "small points bypassed the big one more than MaxBypass times")
}

// instantPointsEnv is a sweep environment whose points complete at once.
func instantPointsEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SweepWorkflow)
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	env.OnWorkflow(PointWorkflow, mock.Anything, mock.Anything).Return(&PointState{Status: point.StatusCompleted}, nil)
	return env
}

func TestSweepRejectsOversizedPointAndContinuesAsNew(t *testing.T) {
	points := append(seedPoints(), point.Spec{PointID: "huge", Nodes: 40, ConfigKey: "k"})
	env := instantPointsEnv()
	// A small per-run budget forces a drain and continue-as-new that carries
	// the finished points and the rest of the queue.
	env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: points, PointsPerRun: 3})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can, "got %v", err)
	var next SweepInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Len(t, next.Done, 4, "3 points ran, the oversized one failed at once")
	require.Len(t, next.Points, 5)
	require.Equal(t, 1, next.Runs)
	for _, d := range next.Done {
		if d.PointID == "huge" {
			require.Equal(t, point.StatusFailed, d.Status)
			require.Contains(t, d.Error, "needs 40 nodes")
		}
	}
}

// TestSweepContinuesAsNewOnItsOwnHistoryBudget: a sweep run drains and
// continues as new at HistoryLimit events or historyBytesLimit bytes, not
// when the server suggests it (at 4 MiB, every ~500 points: each drain
// idles the node budget until the last running point ends).
func TestSweepContinuesAsNewOnItsOwnHistoryBudget(t *testing.T) {
	tests := []struct {
		name      string
		suggested bool
		size      int
		wantCAN   bool
	}{
		{name: "server suggests, history small", suggested: true, size: 4 << 20, wantCAN: false},
		{name: "history over the byte budget", size: historyBytesLimit + 1, wantCAN: true},
		{name: "neither", size: 1 << 20, wantCAN: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := instantPointsEnv()
			env.SetContinueAsNewSuggested(tc.suggested)
			env.SetCurrentHistorySize(tc.size)
			env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "s", TaskQueue: "q", NodeBudget: 18, Points: seedPoints()})
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			var can *workflow.ContinueAsNewError
			if !tc.wantCAN {
				require.NoError(t, err)
				var pr SweepProgress
				require.NoError(t, env.GetWorkflowResult(&pr))
				require.Equal(t, 8, pr.Counts[point.StatusCompleted], "every point ran in one run")
				return
			}
			require.ErrorAs(t, err, &can, "got %v", err)
			var next SweepInput
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
			require.NotEmpty(t, next.Done, "the drained run hands on its finished points")
			ids := map[string]bool{}
			for _, d := range next.Done {
				ids[d.PointID] = true
			}
			for _, p := range next.Points {
				ids[p.PointID] = true
			}
			require.Len(t, ids, 8, "every point finished or handed on, none lost")
			require.Equal(t, 8, len(next.Done)+len(next.Points), "none repeated")
		})
	}
}

// fixedRowPoints are the points of one fixed-seq-len row: one deployment
// (same row, recipe, image, model, launcher, backend), several
// concurrencies, and one InferenceX exp-name for all of them.
func fixedRowPoints(sweepID string, concs []int, nodes int) []point.Spec {
	dep := point.Deployment{
		Row:       `{"config-key":"dsr1-fp4-gb200-dynamo-trt","isl":8192,"osl":1024,"prefill":{"num-worker":1,"tp":4,"ep":4,"dp-attn":true},"decode":{"num-worker":4,"tp":8,"ep":8,"dp-attn":false}}`,
		RecipeRef: "recipes/trtllm/gb200-fp4/8k1k/stp/ctx1_gen4_tep8_batch16_eplb0_mtp0.yaml", Recipe: []byte("name: ctx1_gen4\n"),
		Image: "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1", Model: "nvidia/DeepSeek-R1-0528-NVFP4-v2",
		Launcher: "local+local/sweepflow-launch/1", Backend: "local",
	}
	var out []point.Spec
	for _, c := range concs {
		id := point.New(dep, c)
		out = append(out, point.Spec{
			SweepID: sweepID, PointID: point.ID("dsr1_8k1k", id), ExpName: "dsr1_8k1k", ConfigKey: "dsr1-fp4-gb200-dynamo-trt",
			Topology: "1P4D DEP4/TEP8", Layout: "1P4D DEP4/TEP8", Conc: c, Nodes: nodes, GPUs: 36, PrefillGPUs: 4, DecodeGPUs: 32,
			Identity: id.String(), ISL: 8192, OSL: 1024,
		})
	}
	return out
}

// concFigures is what the fake perf stage measures at a concurrency: every
// figure differs per concurrency, so a point that got another point's
// figures is caught.
func concFigures(conc int) point.PerfSummary {
	return point.PerfSummary{
		OutputTputPerGPU: 100 + float64(conc),
		TTFTp90Ms:        1000 + 10*float64(conc),
		Interactivity:    500 - float64(conc),
		Simulated:        true,
	}
}

// rowRecorder is the ledger as the fake activities see it: perf figures
// uploaded per identity and final point records.
type rowRecorder struct {
	mu       sync.Mutex
	uploads  map[string][]activities.UploadInput // identity -> uploads
	records  map[string][]activities.PointRecord // identity -> records
	children map[string]string                   // child workflow ID -> identity of its input
	starts   int
}

func (r *rowRecorder) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activities.Activities
	env.RegisterActivity(a)
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(func(_ context.Context, p point.Spec) (cluster.Allocation, error) {
		return cluster.Allocation{JobID: "job-" + p.PointID, Nodes: make([]string, p.Nodes)}, nil
	})
	env.OnActivity(a.StageCheckpoint, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StageInput) (cluster.StageReport, error) {
		return cluster.StageReport{Nodes: len(in.Alloc.Nodes)}, nil
	})
	env.OnActivity(a.BringUp, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StageInput) (cluster.Server, error) {
		return cluster.Server{URL: "http://127.0.0.1:1", Mode: in.Mode, JobID: in.Alloc.JobID}, nil
	})
	env.OnActivity(a.Warmup, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.Perf, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StageInput) (point.PerfSummary, error) {
		return concFigures(in.Point.Conc), nil
	})
	env.OnActivity(a.Upload, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.UploadInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.uploads[in.Point.Identity] = append(r.uploads[in.Point.Identity], in)
		return nil
	})
	env.OnActivity(a.Teardown, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.CheckServer, mock.Anything, mock.Anything).Return(activities.ServerCheck{AllocationAlive: true, ServerAlive: true}, nil)
	env.OnActivity(a.RecordPoint, mock.Anything, mock.Anything).Return(func(_ context.Context, rec activities.PointRecord) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.records[rec.Point.Identity] = append(r.records[rec.Point.Identity], rec)
		return nil
	})
	env.OnActivity(a.RecordSweep, mock.Anything, mock.Anything).Return(nil)
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		if info.WorkflowType.Name != "PointWorkflow" {
			return // the deployment's group workflow
		}
		var in PointInput
		if err := args.Get(&in); err != nil {
			panic(err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.starts++
		r.children[info.WorkflowExecution.ID] = in.Point.Identity
	})
}

// TestSweepFixedSeqLenRowConcurrencies runs one fixed-seq-len row with
// several concurrencies through SweepWorkflow and the real PointWorkflow:
// every point gets its own child workflow and its perf figures are uploaded
// and reported under its own identity. The points share one deployment, so
// they run one after another on one allocation that holds its nodes once,
// however many would fit side by side.
func TestSweepFixedSeqLenRowConcurrencies(t *testing.T) {
	concs := []int{12, 44, 76}
	tests := []struct {
		name        string
		nodes       int // per point; the budget is 18
		wantMaxUsed int
	}{
		{"small deployment", 5, 5},
		{"large deployment", 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pts := fixedRowPoints("fixed", concs, tc.nodes)
			// The premise: one exp-name and one deployment, different identities.
			ids := map[string]int{}
			for _, p := range pts {
				require.Equal(t, "dsr1_8k1k", p.ExpName)
				ids[p.Identity] = p.Conc
			}
			require.Len(t, ids, len(concs))

			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			Register(env)
			rec := &rowRecorder{uploads: map[string][]activities.UploadInput{}, records: map[string][]activities.PointRecord{},
				children: map[string]string{}}
			rec.register(env)
			env.ExecuteWorkflow(SweepWorkflow, SweepInput{SweepID: "fixed", Name: "fixed", TaskQueue: "q", NodeBudget: 18,
				Tuning: fastTuning, Points: pts})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			pr := finalProgress(t, env)
			require.Equal(t, len(concs), pr.Counts[point.StatusCompleted], "%+v", pr.Counts)
			assert.Equal(t, tc.wantMaxUsed, pr.MaxInUse)

			// One child workflow per point, each with its own ID and its own
			// point as input.
			require.Equal(t, len(concs), rec.starts, "child workflows started")
			require.Len(t, rec.children, len(concs), "distinct child workflow IDs: %v", rec.children)
			for _, p := range pts {
				wid := PointWorkflowID("fixed", p.PointID)
				assert.Equal(t, p.Identity, rec.children[wid], "child %s runs its own point", wid)
			}

			// Uploaded (ledger) and reported (progress) figures: each
			// identity holds exactly the figures measured at its own conc.
			for _, p := range pts {
				want := concFigures(p.Conc)
				ups := rec.uploads[p.Identity]
				require.Len(t, ups, 1, "conc %d: one upload", p.Conc)
				require.NotNil(t, ups[0].Perf, "conc %d: perf uploaded", p.Conc)
				assert.Equal(t, p.Conc, ups[0].Point.Conc)
				assert.Equal(t, want, *ups[0].Perf, "conc %d: the ledger gets its own figures", p.Conc)

				recs := rec.records[p.Identity]
				require.NotEmpty(t, recs, "conc %d: point recorded", p.Conc)
				assert.Equal(t, point.StatusCompleted, recs[len(recs)-1].Status)
			}
			require.Len(t, pr.Points, len(concs))
			seen := map[string]bool{}
			for _, pp := range pr.Points {
				require.NotNil(t, pp.Outcome, pp.PointID)
				require.NotNil(t, pp.Outcome.State, pp.PointID)
				require.NotNil(t, pp.Outcome.State.Perf, pp.PointID)
				conc := -1
				for _, p := range pts {
					if p.PointID == pp.PointID {
						conc = p.Conc
					}
				}
				require.NotEqual(t, -1, conc, "unknown point %s", pp.PointID)
				assert.False(t, seen[pp.WorkflowID], "workflow ID %s reported twice", pp.WorkflowID)
				seen[pp.WorkflowID] = true
				assert.Equal(t, concFigures(conc), *pp.Outcome.State.Perf, fmt.Sprintf("%s (conc %d): progress reports its own figures", pp.PointID, conc))
			}
		})
	}
}

// TestRecordedSpecsRoundTrip finds every point spec inside the recorded
// histories' payloads (workflow and activity inputs and results), decodes it
// into point.Spec and encodes it again: the bytes must equal the recorded
// ones, so no field of a recorded spec is lost or renamed on replay.
func TestRecordedSpecsRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var hist any
		require.NoError(t, json.Unmarshal(data, &hist))
		var specs []json.RawMessage
		for _, p := range jsonPayloads(hist) {
			specs = append(specs, findSpecs(p)...)
		}
		for _, raw := range specs {
			var s point.Spec
			require.NoError(t, json.Unmarshal(raw, &s), f)
			again, err := json.Marshal(s)
			require.NoError(t, err)
			require.Equal(t, string(raw), string(again), f)
		}
		total += len(specs)
	}
	require.Positive(t, total, "no point spec found in the recorded histories")
}

// jsonPayloads decodes the json/plain payloads anywhere in a history.
func jsonPayloads(v any) [][]byte {
	plain := base64.StdEncoding.EncodeToString([]byte("json/plain"))
	var out [][]byte
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			md, _ := x["metadata"].(map[string]any)
			if d, ok := x["data"].(string); ok && md != nil && md["encoding"] == plain {
				if b, err := base64.StdEncoding.DecodeString(d); err == nil {
					out = append(out, b)
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return out
}

// findSpecs returns the objects in a JSON document that are point specs (they
// have point_id, config_key and topology), as their recorded bytes.
func findSpecs(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	var out []json.RawMessage
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		_, id := m["point_id"]
		_, key := m["config_key"]
		_, topo := m["topology"]
		if id && key && topo {
			return []json.RawMessage{raw}
		}
		for _, v := range m {
			out = append(out, findSpecs(v)...)
		}
	case len(raw) > 0 && raw[0] == '[':
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil {
			return nil
		}
		for _, v := range l {
			out = append(out, findSpecs(v)...)
		}
	}
	return out
}

// total must count what progress lists, without building it.
func TestSweepTotalMatchesProgress(t *testing.T) {
	pts := []point.Spec{{PointID: "a"}, {PointID: "b"}, {PointID: "c"}}
	one := func(ps ...point.Spec) []queuedDeployment { return queuedDeployments(ps, nil) }
	tests := []struct {
		name string
		run  sweepRun
	}{
		{"fresh", sweepRun{in: SweepInput{Points: pts}, points: pts, queue: one(pts...)}},
		{"some done", sweepRun{in: SweepInput{Points: pts}, points: pts, queue: one(pts[2:]...), running: queuedDeployments(pts[1:2], nil),
			done: []PointOutcome{{PointID: "a"}}}},
		{"continued as new", sweepRun{in: SweepInput{Points: pts[1:]}, points: pts[1:], queue: one(pts[2:]...),
			done: []PointOutcome{{PointID: "x"}, {PointID: "y"}, {PointID: "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, len(tt.run.progress(time.Time{}).Points), tt.run.total())
		})
	}
}

// TestSweepProgressAttributeThrottled: the sweep's "N/M done" attribute is
// written at the start, at most every progressAttrEvery and at the end, not
// after every point; the final value is exact.
func TestSweepProgressAttributeThrottled(t *testing.T) {
	var progress []string
	listen := func(env *testsuite.TestWorkflowEnvironment) {
		env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
			if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalx.SAStage); ok {
				progress = append(progress, v)
			}
		}).Return(nil)
	}
	var pts []point.Spec
	for i := range 40 {
		pts = append(pts, point.Spec{PointID: fmt.Sprintf("p%02d", i), ConfigKey: "k", Nodes: 2, Conc: i + 1, Topology: "t"})
	}
	runSweep(t, SweepInput{SweepID: "s", Points: pts, NodeBudget: 18, TaskQueue: "q"},
		func(point.Spec) time.Duration { return time.Second }, listen)
	// 40 one-second points, 9 at a time: about 5 s of sweep.
	require.NotEmpty(t, progress)
	assert.Equal(t, "0/40 done", progress[0])
	assert.Equal(t, "40/40 done", progress[len(progress)-1])
	assert.LessOrEqual(t, len(progress), 4, "written every 5 s, not after each of 40 points: %v", progress)
}
