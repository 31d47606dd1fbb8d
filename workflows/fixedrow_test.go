package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
)

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
