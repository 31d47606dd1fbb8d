package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// Allocate holds the point's nodes. Waiting for nodes is reported in the
// heartbeat so `starter status` can show the pending reason.
func (a *Activities) Allocate(ctx context.Context, p point.Spec) (_ cluster.Allocation, err error) {
	if err := a.injectFault(p, point.StageAllocate); err != nil {
		return cluster.Allocation{}, err
	}
	if err := a.verifyRecipe(p); err != nil {
		return cluster.Allocation{}, err
	}
	if err := checkGPUs(p, false); err != nil {
		return cluster.Allocation{}, err // before any GPU time
	}
	hb := startHeartbeat(ctx, 0, "requesting nodes")
	defer hb.Finish(&err)
	al, err := a.Backend.Allocate(ctx, a.allocRequest(ctx, p, func(s string) { hb.set(s) }))
	if err != nil {
		return cluster.Allocation{}, classify(err)
	}
	a.log(ctx).Info("allocated", zap.String("job", al.JobID), zap.Strings("nodes", al.Nodes))
	al.Backend = a.Backend.Name()
	return al, nil
}

// checkGPUs refuses GPU counts per-GPU figures cannot be divided by:
// prefill and decode GPUs that do not add up to the total, and with
// needTotal (figures about to be stored) no GPUs at all, which would store
// per-GPU figures of 0.
func checkGPUs(p point.Spec, needTotal bool) error {
	switch {
	case p.PrefillGPUs < 0 || p.DecodeGPUs < 0 || p.GPUs < 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("point %s: gpus %d, prefill_gpus %d, decode_gpus %d: GPU counts must be >= 0",
			p.PointID, p.GPUs, p.PrefillGPUs, p.DecodeGPUs), string(failure.ErrBadConfig), nil)
	case p.PrefillGPUs > 0 && p.DecodeGPUs > 0 && p.PrefillGPUs+p.DecodeGPUs != p.GPUs:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("point %s: prefill_gpus %d + decode_gpus %d != gpus %d",
			p.PointID, p.PrefillGPUs, p.DecodeGPUs, p.GPUs), string(failure.ErrBadConfig), nil)
	case needTotal && p.GPUs == 0:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("point %s: gpus is 0: per-GPU figures need the point's GPU count",
			p.PointID), string(failure.ErrBadConfig), nil)
	}
	return nil
}

// stagingDetails is the heartbeat of checkpoint staging: the files each node
// has verified, so a retry resumes where the last attempt stopped.
type stagingDetails struct {
	Done        map[string][]string `json:"done"`
	BytesCopied int64               `json:"bytes_copied"`
}

// StageCheckpoint copies the checkpoint to every node's local disk with a
// size+sha256 manifest, resuming from the last heartbeat.
func (a *Activities) StageCheckpoint(ctx context.Context, in StageInput) (_ cluster.StageReport, err error) {
	if err := a.injectFault(in.Point, point.StageCheckpoint); err != nil {
		return cluster.StageReport{}, err
	}
	details := stagingDetails{Done: map[string][]string{}}
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &details); err != nil || details.Done == nil {
			details = stagingDetails{Done: map[string][]string{}}
		}
	}
	resume := map[string][]string{}
	for n, d := range details.Done {
		resume[n] = append([]string(nil), d...)
	}
	// Bytes copied by earlier attempts: backends report this attempt's.
	earlierBytes := details.BytesCopied
	hb := startHeartbeat(ctx, 0, details)
	defer hb.Finish(&err)
	perNode := map[string]int64{}
	var mu sync.Mutex // nodes report progress concurrently
	if in.Point.CheckpointSource == "" {
		return cluster.StageReport{Nodes: len(in.Alloc.Nodes)}, nil
	}
	rep, err := a.Backend.StageCheckpoint(ctx, in.Alloc, in.Point.CheckpointSource, in.Point.CheckpointPath, resume, func(p cluster.StageProgress) {
		mu.Lock()
		defer mu.Unlock()
		perNode[p.Node] = p.BytesCopied
		details.Done[p.Node] = append([]string(nil), p.Done...)
		total := earlierBytes
		for _, b := range perNode {
			total += b
		}
		details.BytesCopied = total
		cp := stagingDetails{Done: map[string][]string{}, BytesCopied: total}
		for n, d := range details.Done {
			cp.Done[n] = d
		}
		hb.set(cp)
	})
	if err != nil {
		return cluster.StageReport{}, a.nodeFailure(ctx, point.StageCheckpoint, in.Alloc, err)
	}
	a.log(ctx).Info("checkpoint staged", zap.Int("nodes", rep.Nodes), zap.Int64("bytes_copied", rep.BytesCopied), zap.Int64("bytes_skipped", rep.BytesSkipped))
	return rep, nil
}

// BringUp starts the server in the given mode and waits until it is healthy,
// heartbeating the phase it reports. Synthetic acceptance goes into the
// environment for perf only: evals need real draft verification.
func (a *Activities) BringUp(ctx context.Context, in StageInput) (_ cluster.Server, err error) {
	if err := a.injectFault(in.Point, point.StageBringUp); err != nil {
		return cluster.Server{}, err
	}
	if err := a.verifyRecipe(in.Point); err != nil {
		return cluster.Server{}, err
	}
	env := map[string]string{"SWEEPFLOW_MODE": in.Mode}
	spec := cluster.ServeSpec{Model: in.Point.Model, CheckpointPath: in.Point.CheckpointPath, Layout: in.Point.Layout, RowJSON: in.Point.Row,
		RecipePath: in.Point.RecipePath, RecipeDigest: in.Point.RecipeDigest, RecipeSets: in.Point.RecipeSets, Image: in.Point.Image, GPUsPerNode: a.GPUsPerNode, Env: env}
	if err := a.chaosBringUp(ctx, in.Point, &spec); err != nil {
		return cluster.Server{}, err
	}
	al := 0.0
	if in.Mode == "perf" && in.Point.SyntheticAL > 0 {
		env["SYNTHETIC_ACCEPTANCE"] = "true"
		env["SYNTHETIC_ACCEPTANCE_LENGTH"] = strconv.FormatFloat(in.Point.SyntheticAL, 'f', -1, 64)
		al = in.Point.SyntheticAL
	}
	alloc := in.Alloc
	// Heartbeat from the start: stopping the previous server's steps and
	// waiting for etcd (srt-slurm: up to 300 s) happen inside the backend's
	// BringUp, and a silent attempt would be timed out and retried while it
	// still runs.
	hb := startHeartbeat(ctx, 0, "starting")
	defer hb.Finish(&err)
	spec.SyntheticAL = al
	srv, err := a.Backend.BringUp(ctx, alloc, spec)
	if err != nil {
		return cluster.Server{}, a.nodeFailure(ctx, point.StageBringUp, alloc, err)
	}
	interval := a.HealthInterval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	for {
		phase, herr := a.Backend.Health(ctx, alloc, srv)
		hb.set(phase)
		if herr == nil {
			break
		}
		if errors.Is(herr, cluster.ErrAllocationLost) || errors.Is(herr, cluster.ErrOOM) || errors.Is(herr, cluster.ErrBadConfig) {
			return cluster.Server{}, a.nodeFailure(ctx, point.StageBringUp, alloc, herr)
		}
		select {
		case <-ctx.Done():
			return cluster.Server{}, ctx.Err()
		case <-time.After(interval):
		}
	}
	a.log(ctx).Info("server healthy", zap.String("url", srv.URL), zap.String("mode", in.Mode))
	srv.Mode, srv.JobID = in.Mode, in.Alloc.JobID
	return srv, nil
}

// Teardown stops the servers and releases the allocation. Idempotent.
func (a *Activities) Teardown(ctx context.Context, in StageInput) error {
	if err := a.Backend.Teardown(ctx, in.Alloc); err != nil {
		return classify(err)
	}
	logs, err := a.collectJobLogs(ctx, in.Alloc)
	if err != nil {
		a.log(ctx).Warn("collecting job logs failed", zap.String("job", in.Alloc.JobID), zap.Error(err))
	}
	a.log(ctx).Info("torn down", zap.String("job", in.Alloc.JobID), zap.String("logs", logs))
	return nil
}

// Upload writes the point's typed result rows (perf aggregate, eval verdict)
// for this sweep, including outputs reused from earlier sweeps.
func (a *Activities) Upload(ctx context.Context, in UploadInput) (err error) {
	if err := a.injectFault(in.Point, point.StageUpload); err != nil {
		return err
	}
	// Ledger writes wait out a database restart: beat meanwhile.
	hb := startHeartbeat(ctx, 0, "uploading")
	defer hb.Finish(&err)
	p := in.Point
	if in.Perf != nil {
		if err := checkGPUs(p, true); err != nil {
			return err
		}
		so, err := a.putStageStored(ctx, p, point.StagePerf, in.Perf, []string{in.Perf.AggregateURI, in.Perf.RequestsURI}, in.Perf.Simulated, in.PerfFrom)
		if err != nil {
			return err
		}
		data, _ := json.Marshal(in.Perf)
		if err := a.Store.PutPerf(ctx, results.PerfResult{
			SweepID: p.SweepID, PointID: p.PointID, Identity: p.Identity, ProfileHash: so.ProfileHash, ConfigKey: p.ConfigKey,
			ExpName: p.ExpName, Conc: p.Conc, PerfSummary: *in.Perf, SourceSweep: so.SourceSweep, JSON: data,
		}); err != nil {
			return classify(err)
		}
	}
	if in.Eval != nil {
		so, err := a.putStageStored(ctx, p, point.StageEval, in.Eval, []string{in.Eval.ResultURI, in.Eval.SamplesURI}, in.Eval.Simulated, in.EvalFrom)
		if err != nil {
			return err
		}
		data, _ := json.Marshal(in.Eval)
		if err := a.Store.PutEval(ctx, results.EvalResult{
			SweepID: p.SweepID, PointID: p.PointID, Identity: p.Identity, ProfileHash: so.ProfileHash, EMStrict: in.Eval.EMStrict,
			EMFlexible: in.Eval.EMFlexible, NEff: in.Eval.NEff, Passed: in.Eval.Passed, Floor: in.Eval.Floor,
			Simulated: in.Eval.Simulated, SourceSweep: so.SourceSweep, JSON: data,
		}); err != nil {
			return classify(err)
		}
	}
	return nil
}

// putStageStored writes a stage output first and returns the row the ledger
// holds: for a reused output it records where the figures came from, and it
// carries the profile the typed result row repeats. Errors are classified.
func (a *Activities) putStageStored(ctx context.Context, p point.Spec, stage string, out any, uris []string, simulated bool, from *ReuseSource) (*results.StageOutput, error) {
	if err := a.putStage(ctx, p, stage, out, uris, simulated, from); err != nil {
		return nil, classify(err)
	}
	so, _, err := a.Store.StageOutput(ctx, p.SweepID, p.Identity, stage)
	if err != nil || so == nil {
		return nil, classify(fmt.Errorf("%s output of %s missing after write: %v", stage, p.PointID, err))
	}
	return so, nil
}

// RecordPoint stores the point's final status, its spec (exports read the
// identity fields from it) and its stage timings in the ledger, and closes
// the attempts of the point that never ended (closeOpenAttempts).
func (a *Activities) RecordPoint(ctx context.Context, rec PointRecord) error {
	p := rec.Point
	spec, err := json.Marshal(p)
	if err != nil {
		return classify(err)
	}
	if err := a.Store.UpsertPoint(ctx, results.Point{
		SweepID: p.SweepID, PointID: p.PointID, Identity: p.Identity, ProfileHash: p.ProfileHash, BaselineKey: p.BaselineKey,
		ConfigKey: p.ConfigKey, ExpName: p.ExpName, Topology: p.Topology, Conc: p.Conc, Status: rec.Status,
		FailedStage: rec.FailedStage, Error: rec.Error, SpecJSON: spec, UpdatedAt: rec.At,
	}); err != nil {
		return classify(err)
	}
	runs := make([]results.StageRun, 0, len(rec.Stages))
	for i, s := range rec.Stages {
		runs = append(runs, results.StageRun{SweepID: p.SweepID, PointID: p.PointID, Seq: i, Stage: s.Stage,
			Outcome: s.Outcome, Rounds: s.Rounds, Error: s.Error, StartedAt: s.Started, EndedAt: s.Ended, Failures: s.Failures})
	}
	if err := a.Store.PutStageRuns(ctx, p.SweepID, p.PointID, runs); err != nil {
		return classify(err)
	}
	a.closeOpenAttempts(ctx, rec)
	return nil
}

// RecordSweep stores the sweep row in the ledger.
func (a *Activities) RecordSweep(ctx context.Context, rec SweepRecord) error {
	data, _ := json.Marshal(rec)
	return classify(a.Store.UpsertSweep(ctx, results.Sweep{
		ID: rec.SweepID, Name: rec.Name, ConfigJSON: string(data), Status: rec.Status,
		StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, ReuseFrom: strings.Join(rec.ReuseFrom, ","), Nightly: rec.Nightly,
	}))
}

// putArtifact stores a local file in the artifact store and returns its URI.
func (a *Activities) putArtifact(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return a.Artifacts.Put(ctx, filepath.Base(path), f)
}

func (a *Activities) scratch(p point.Spec, stage string) (string, error) {
	dir := filepath.Join(a.StateDir, "scratch", sanitize(p.SweepID), sanitize(p.PointID), stage)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("scratch dir: %w", err)
	}
	return dir, nil
}

// ServerCheck says whether an allocation handed over from the previous
// point of a deployment still holds its nodes and whether its server still
// answers.
type ServerCheck struct {
	AllocationAlive bool   `json:"allocation_alive"`
	ServerAlive     bool   `json:"server_alive"`
	Reason          string `json:"reason,omitempty"`
}

// CheckServer probes a handed-over allocation and its server before the next
// point of the deployment uses them. A dead server or a lost allocation is an
// answer, not an error: the workflow brings the server up again, or
// allocates again.
func (a *Activities) CheckServer(ctx context.Context, in StageInput) (ServerCheck, error) {
	alloc := in.Alloc
	if err := a.Backend.Check(ctx, alloc); err != nil {
		if errors.Is(err, cluster.ErrAllocationLost) {
			a.recordNodeFaults(ctx, "check-server", alloc, err)
			return ServerCheck{Reason: err.Error()}, nil
		}
		return ServerCheck{}, classify(err)
	}
	out := ServerCheck{AllocationAlive: true}
	if in.Endpoint == nil {
		return out, nil
	}
	srv := *in.Endpoint
	// A few tries: one slow /health answer does not cost a bring-up.
	var herr error
	for try := 0; try < 3; try++ {
		if _, herr = a.Backend.Health(ctx, alloc, srv); herr == nil {
			out.ServerAlive = true
			// Requests the previous point left in flight must not load
			// this point's figures: wait until the server is idle.
			hb := startHeartbeat(ctx, 0, "waiting for the server to go idle")
			err := waitIdle(ctx, in.Endpoint.URL, a.Idle, func(s string) { hb.set(s) })
			hb.Stop()
			if err != nil {
				out.ServerAlive, out.Reason = false, err.Error()
			}
			return out, nil
		}
		if errors.Is(herr, cluster.ErrAllocationLost) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	out.Reason = herr.Error()
	a.log(ctx).Info("handed-over server is down", zap.String("job", in.Alloc.JobID), zap.String("url", in.Endpoint.URL), zap.Error(herr))
	return out, nil
}
