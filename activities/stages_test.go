package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/local"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// TestCheckServer: the probe before a point uses the server the previous
// point of its deployment handed over. A dead server or lost nodes are
// answers the workflow acts on; only an unexpected backend error fails.
func TestCheckServer(t *testing.T) {
	ep := &cluster.Server{URL: "http://127.0.0.1:1", Mode: "perf", Handle: "fake"}
	tests := []struct {
		name      string
		backend   *fakeBackend
		endpoint  *cluster.Server
		want      ServerCheck
		wantErr   bool
		reasonHas string
	}{
		{name: "alive", backend: &fakeBackend{}, endpoint: ep, want: ServerCheck{AllocationAlive: true, ServerAlive: true}},
		{name: "allocation only", backend: &fakeBackend{}, want: ServerCheck{AllocationAlive: true}},
		{name: "server died", backend: &fakeBackend{healthErr: fmt.Errorf("%w: server process 42 exited", cluster.ErrAllocationLost)},
			endpoint: ep, want: ServerCheck{AllocationAlive: true}, reasonHas: "process 42 exited"},
		{name: "nodes gone", backend: &fakeBackend{checkErr: fmt.Errorf("%w: job 7 no longer holds its nodes", cluster.ErrAllocationLost)},
			endpoint: ep, reasonHas: "job 7"},
		{name: "backend broken", backend: &fakeBackend{checkErr: errors.New("squeue: connection refused")}, endpoint: ep, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{Backend: tc.backend, StateDir: t.TempDir()}
			env := newActivityEnv(a)
			val, err := env.ExecuteActivity(a.CheckServer, StageInput{Point: point.Spec{PointID: "p"}, Alloc: cluster.Allocation{JobID: "7"}, Endpoint: tc.endpoint})
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got ServerCheck
			require.NoError(t, val.Get(&got))
			assert.Equal(t, tc.want.AllocationAlive, got.AllocationAlive)
			assert.Equal(t, tc.want.ServerAlive, got.ServerAlive)
			assert.Contains(t, got.Reason, tc.reasonHas)
		})
	}
}

// stagingRig is a checkpoint on a "shared filesystem" directory and a real
// local backend whose nodes' local disks are directories, behind a fake
// backend that records the resume lists point.StageCheckpoint hands it.
type stagingRig struct {
	acts  *Activities
	fake  *fakeBackend
	local *local.Backend
	files []string // manifest paths of the checkpoint
	src   string
	in    StageInput
}

func newStagingRig(t *testing.T) *stagingRig {
	dir := t.TempDir()
	lb, err := local.New(local.Config{Root: filepath.Join(dir, "root"), Nodes: 2, SharedRoot: filepath.Join(dir, "shared"),
		NodeLocalRoot: filepath.Join(dir, "nvme"), ServeCommand: []string{"true"}})
	require.NoError(t, err)
	r := &stagingRig{local: lb, src: filepath.Join(dir, "shared", "model")}
	r.files = []string{"config.json", "tokenizer.json"}
	for i := 1; i <= 6; i++ {
		r.files = append(r.files, fmt.Sprintf("model-%05d-of-00006.safetensors", i))
	}
	for i, f := range r.files {
		require.NoError(t, os.MkdirAll(r.src, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(r.src, f), bytes.Repeat([]byte{byte('a' + i)}, 8<<10+i), 0o644))
	}
	r.fake = &fakeBackend{stage: lb.StageCheckpoint}
	r.acts = &Activities{Backend: r.fake, StateDir: filepath.Join(dir, "state")}
	r.in = StageInput{
		Point: point.Spec{SweepID: "s1", PointID: "p1", CheckpointSource: r.src, CheckpointPath: filepath.Join(dir, "nvme", "model")},
		Alloc: cluster.Allocation{JobID: "s1.p1", Nodes: []string{"n1", "n2"}},
	}
	return r
}

// nodeFile is a checkpoint file on a node's local disk.
func (r *stagingRig) nodeFile(node, f string) string {
	return filepath.Join(filepath.Dir(r.in.Point.CheckpointPath), node, "model", f)
}

// stage runs the point.StageCheckpoint activity, as a retry attempt resuming from
// details when they are not nil.
func (r *stagingRig) stage(t *testing.T, details *stagingDetails) (cluster.StageReport, []stagingDetails, error) {
	env := newActivityEnv(r.acts)
	if details != nil {
		env.SetHeartbeatDetails(*details)
	}
	hb := listen[stagingDetails](t, env)
	val, err := env.ExecuteActivity(r.acts.StageCheckpoint, r.in)
	if err != nil {
		return cluster.StageReport{}, hb.all(), err
	}
	var out cluster.StageReport
	require.NoError(t, val.Get(&out))
	return out, hb.all(), nil
}

func (r *stagingRig) requireStaged(t *testing.T) {
	t.Helper()
	for _, node := range r.in.Alloc.Nodes {
		for _, f := range r.files {
			want, err := os.ReadFile(filepath.Join(r.src, f))
			require.NoError(t, err)
			got, err := os.ReadFile(r.nodeFile(node, f))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "%s on %s differs from the source", f, node)
		}
	}
}

// TestStageCheckpointResumesFromHeartbeat runs a retry attempt of checkpoint
// staging with and without the heartbeat details of the attempt before. Both
// copy what is missing; only the resumed one trusts the files the earlier
// attempt verified (staging's trust rule: listed and of the right size means
// not re-hashed), which shows the details reached the backend, so progress
// continues instead of restarting.
func TestStageCheckpointResumesFromHeartbeat(t *testing.T) {
	tests := []struct {
		name   string
		resume bool
	}{
		{name: "retry attempt with heartbeat details", resume: true},
		{name: "fresh attempt", resume: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newStagingRig(t)
			first, _, err := r.stage(t, nil)
			require.NoError(t, err)
			total := len(r.files) * len(r.in.Alloc.Nodes)
			assert.Equal(t, total, first.FilesCopied)
			assert.Zero(t, first.FilesSkipped)
			r.requireStaged(t)

			// The earlier attempt verified n1's first half and all of n2.
			// Then two n1 files change under their names, same size: one
			// the attempt listed as done, one it did not.
			listed, unlisted := r.files[1], r.files[len(r.files)-1]
			details := stagingDetails{
				Done:        map[string][]string{"n1": r.files[:len(r.files)/2], "n2": r.files},
				BytesCopied: 12345,
			}
			for _, f := range []string{listed, unlisted} {
				st, err := os.Stat(r.nodeFile("n1", f))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(r.nodeFile("n1", f), bytes.Repeat([]byte{'X'}, int(st.Size())), 0o644))
			}

			var given *stagingDetails
			if tc.resume {
				given = &details
			}
			out, beats, err := r.stage(t, given)
			require.NoError(t, err)
			assert.Empty(t, beats, "a successful attempt shorter than a beat interval sends no heartbeat (the server keeps the earlier attempt's details)")
			assert.Equal(t, 2, out.Nodes)
			assert.Equal(t, total, out.FilesCopied+out.FilesSkipped)
			changed, err := os.ReadFile(r.nodeFile("n1", listed))
			require.NoError(t, err)
			if tc.resume {
				assert.Equal(t, details.Done, r.fake.lastResume(), "the backend resumes from the heartbeat details")
				assert.Equal(t, 1, out.FilesCopied, "only the unlisted changed file is copied again")
				assert.Equal(t, bytes.Repeat([]byte{'X'}, len(changed)), changed, "a file the earlier attempt verified is trusted, not re-hashed")
			} else {
				assert.Empty(t, r.fake.lastResume())
				assert.Equal(t, 2, out.FilesCopied, "without details every existing file is re-hashed and both changes are repaired")
				r.requireStaged(t)
			}
		})
	}
}

// TestStageCheckpointRetryContinuesFailedAttempt chains three attempts: the
// first two fail with a transient error after some files are done, and the
// heartbeat sent with each failure carries them; each retry, given those
// details as Temporal would, skips them, and bytes copied add up across
// attempts; the third copies the rest.
func TestStageCheckpointRetryContinuesFailedAttempt(t *testing.T) {
	r := newStagingRig(t)
	total := len(r.files) * len(r.in.Alloc.Nodes)

	// Attempts 1 and 2: the link to the nodes drops once the attempt has
	// copied a file (files an earlier attempt verified are skipped first).
	failMidway := func(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var once sync.Once
		_, err := r.local.StageCheckpoint(ctx, alloc, src, dst, resume, func(p cluster.StageProgress) {
			progress(p)
			if p.BytesCopied > 0 {
				once.Do(cancel)
			}
		})
		if err == nil {
			return cluster.StageReport{}, errors.New("the link was expected to drop mid-way")
		}
		return cluster.StageReport{}, fmt.Errorf("ssh %s: connection reset by peer", alloc.Nodes[0])
	}
	r.fake.stage = failMidway
	_, beats1, err := r.stage(t, nil)
	app := appError(t, err)
	assert.Equal(t, "Transient", app.Type())
	assert.False(t, app.NonRetryable())
	require.Len(t, beats1, 1, "no beat at the start, one with the progress sent with the failure")
	last := beats1[len(beats1)-1]
	listed := 0
	for _, done := range last.Done {
		listed += len(done)
	}
	require.Positive(t, listed, "the failed attempt's heartbeat lists the files it verified")
	require.Positive(t, last.BytesCopied)

	// Attempt 2 resumes from the last heartbeat of attempt 1 and fails
	// again: its bytes add to attempt 1's instead of restarting at zero.
	_, beats2, err := r.stage(t, &last)
	require.Error(t, err)
	assert.Equal(t, last.Done, r.fake.lastResume())
	require.Len(t, beats2, 1)
	assert.Greater(t, beats2[0].BytesCopied, last.BytesCopied, "progress continues from the failed attempt")
	for node, done := range last.Done {
		assert.Subset(t, beats2[0].Done[node], done, "files verified by attempt 1 stay listed on %s", node)
	}
	last = beats2[0]
	listed = 0
	for _, done := range last.Done {
		listed += len(done)
	}

	// Attempt 3 resumes from attempt 2's heartbeat and finishes.
	r.fake.stage = r.local.StageCheckpoint
	out, beats3, err := r.stage(t, &last)
	require.NoError(t, err)
	assert.Equal(t, last.Done, r.fake.lastResume())
	assert.Empty(t, beats3, "a successful attempt shorter than a beat interval sends no heartbeat")
	assert.Equal(t, total, out.FilesCopied+out.FilesSkipped)
	assert.GreaterOrEqual(t, out.FilesSkipped, listed, "files the failed attempt verified are not copied again")
	assert.Less(t, out.FilesCopied, total, "the retry does not start over")
	r.requireStaged(t)
	for node, done := range last.Done {
		for _, f := range done {
			assert.True(t, slices.Contains(r.files, f), "%s on %s", f, node)
		}
	}
}

// testSpec is a fixed-seq-len point of sweep at concurrency conc; deployment
// tells deployments apart (one letter, repeated into a hash-like string).
func testSpec(sweep, deployment string, conc int) point.Spec {
	id := point.Identity{DeploymentHash: strings.Repeat(deployment, 64), Conc: conc}
	return point.Spec{SweepID: sweep, PointID: point.ID("x_1k1k", id), ExpName: "x_1k1k", ConfigKey: "k", Conc: conc, Nodes: 2, GPUs: 8,
		Identity: id.String(), ModelPrefix: "dsv4", Eval: true, ISL: 1024, OSL: 1024,
		Profile: point.Profile{Scenario: "fixed-seq-len", ISL: 1024, OSL: 1024, Eval: true, Backend: "local", Launcher: "local"}}
}

// uploadInput is the upload of one point of sweep "s1" with perf figure tput.
func uploadInput(tput float64) UploadInput {
	return UploadInput{
		Point: testSpec("s1", "d", 4),
		Perf:  &point.PerfSummary{OutputTputPerGPU: tput, TputPerGPU: 2 * tput, Interactivity: 40, TTFTp90Ms: 210, Requests: 64, Simulated: true},
		Eval:  &point.EvalSummary{EMStrict: 0.93, EMFlexible: 0.94, NEff: 12, Floor: 0.9, Passed: true, Simulated: true},
	}
}

// putFile stores a local file with the given content through the activities'
// artifact helper (what perf and eval do with their outputs).
func putFile(t *testing.T, a *Activities, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	uri, err := a.putArtifact(context.Background(), p)
	require.NoError(t, err)
	return uri
}

// TestUploadActivity runs Upload through the test activity environment
// against a SQLite ledger and a directory artifact store: the same upload
// again (a retried attempt, another worker run) succeeds and keeps one row
// per (sweep, identity, stage); different figures for the point are a
// non-retryable conflict that leaves the first row alone.
func TestUploadActivity(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	a.Simulated, a.Load.TimeScale = true, 0.01
	base := uploadInput(400)
	base.Perf.AggregateURI = putFile(t, a, "x_1k1k_conc4.json", `{"output_tput_per_gpu": 400}`)
	base.Perf.RequestsURI = putFile(t, a, "x_1k1k_requests.jsonl", "{\"ok\": true}\n")
	base.Eval.ResultURI = putFile(t, a, "eval_x.json", `{"em_strict": 0.93}`)
	base.Eval.SamplesURI = putFile(t, a, "eval_samples_x.jsonl", "{\"doc_id\": 0}\n")

	env := newActivityEnv(a)
	_, err := env.ExecuteActivity(a.Upload, base)
	require.NoError(t, err)

	tests := []struct {
		name     string
		in       func() UploadInput
		sameEnv  bool
		conflict bool
	}{
		{name: "the same upload again in the same run", in: func() UploadInput { return uploadInput2(base) }, sameEnv: true},
		{name: "the same upload from another worker run", in: func() UploadInput { return uploadInput2(base) }},
		{name: "another perf figure", conflict: true, in: func() UploadInput {
			in := uploadInput2(base)
			in.Perf.OutputTputPerGPU = 401
			return in
		}},
		{name: "another eval verdict", conflict: true, in: func() UploadInput {
			in := uploadInput2(base)
			in.Eval.Passed, in.Eval.EMStrict = false, 0.5
			return in
		}},
		{name: "the same figures with other artifacts", conflict: true, in: func() UploadInput {
			in := uploadInput2(base)
			in.Perf.RequestsURI = putFile(t, a, "x_1k1k_requests.jsonl", "{\"ok\": false}\n")
			return in
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if !tc.sameEnv {
				e = newActivityEnv(a)
			}
			_, err := e.ExecuteActivity(a.Upload, tc.in())
			if tc.conflict {
				app := appError(t, err)
				assert.Equal(t, string(failure.ErrResultConflict), app.Type())
				assert.True(t, app.NonRetryable(), "retrying cannot make two figures one")
			} else {
				require.NoError(t, err)
			}
			for _, stage := range []string{point.StagePerf, point.StageEval} {
				n, err := a.Store.CountStageOutputs(ctx, "s1", stage)
				require.NoError(t, err)
				assert.Equal(t, 1, n, "one %s row per (sweep, identity, stage)", stage)
			}
			perf, err := a.Store.Perf(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, perf, 1)
			assert.Equal(t, 400.0, perf[0].OutputTputPerGPU, "the first figure stands")
			evals, err := a.Store.Evals(ctx, "s1")
			require.NoError(t, err)
			require.Len(t, evals, 1)
			assert.True(t, evals[0].Passed)
		})
	}

	t.Run("artifacts are content-addressed", func(t *testing.T) {
		so, ok, err := a.Store.StageOutput(ctx, "s1", base.Point.Identity, point.StagePerf)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []string{base.Perf.AggregateURI, base.Perf.RequestsURI}, so.ArtifactURIs)
		for _, uri := range so.ArtifactURIs {
			assertContentAddressed(t, a, uri, "%s is keyed by its content", uri)
		}
		// A retried stage writing the same bytes gets the same URI, so its
		// upload is the identical write above, not a conflict.
		assert.Equal(t, base.Perf.AggregateURI, putFile(t, a, "x_1k1k_conc4.json", `{"output_tput_per_gpu": 400}`))
	})

	t.Run("a reused output uploaded twice keeps its source", func(t *testing.T) {
		in := uploadInput2(base)
		in.Point.SweepID = "s2"
		in.PerfFrom = &ReuseSource{Sweep: "s1"}
		in.Eval, in.EvalFrom = nil, nil
		for range 2 {
			_, err := newActivityEnv(a).ExecuteActivity(a.Upload, in)
			require.NoError(t, err)
		}
		n, err := a.Store.CountStageOutputs(ctx, "s2", point.StagePerf)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		perf, err := a.Store.Perf(ctx, "s2")
		require.NoError(t, err)
		require.Len(t, perf, 1)
		assert.Equal(t, "s1", perf[0].SourceSweep)
		assert.Equal(t, 400.0, perf[0].OutputTputPerGPU)
	})
}

// assertContentAddressed checks that the artifact at uri is stored under
// the SHA-256 of its bytes.
func assertContentAddressed(t *testing.T, a *Activities, uri string, msgAndArgs ...any) {
	t.Helper()
	key, err := artifacts.SHA256(uri)
	require.NoError(t, err)
	rc, err := a.Artifacts.Open(context.Background(), uri)
	require.NoError(t, err)
	data, err := io.ReadAll(rc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(sum[:]), key, msgAndArgs...)
}

// uploadInput2 is a deep copy of in, so a case can change its figures.
func uploadInput2(in UploadInput) UploadInput {
	out := in
	if in.Perf != nil {
		p := *in.Perf
		out.Perf = &p
	}
	if in.Eval != nil {
		e := *in.Eval
		out.Eval = &e
	}
	return out
}

// TestGPUCountsRefused: prefill and decode GPUs that do not add up to the
// total are refused before any GPU time (one line naming the fields), and a
// perf result of a point with 0 GPUs never reaches the ledger as per-GPU
// figures of 0.
func TestGPUCountsRefused(t *testing.T) {
	a := newLedgerActs(t)
	env := newActivityEnv(a)
	p := testSpec("s1", "d", 4)
	p.PrefillGPUs, p.DecodeGPUs, p.GPUs = 16, 32, 64
	_, err := env.ExecuteActivity(a.Allocate, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "point "+p.PointID+": prefill_gpus 16 + decode_gpus 32 != gpus 64")
	assert.Equal(t, string(failure.ErrBadConfig), appError(t, err).Type())
	assert.True(t, appError(t, err).NonRetryable())

	in := uploadInput(400)
	in.Point.GPUs = 0
	_, err = env.ExecuteActivity(a.Upload, in)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gpus is 0: per-GPU figures need the point's GPU count")
	perf, err := a.Store.Perf(context.Background(), "s1")
	require.NoError(t, err)
	assert.Empty(t, perf, "nothing stored")
}

// TestReusedOutputKeepsTheProducersProfile: a reused output is stored with
// the profile it was measured under, even when this worker measures
// another; when the producer's row cannot be read, nothing is stored
// rather than this worker's profile.
func TestReusedOutputKeepsTheProducersProfile(t *testing.T) {
	ctx := context.Background()
	a := newLedgerActs(t)
	a.Simulated, a.Load.TimeScale = true, 0.01
	produced := uploadInput(400)
	produced.Eval = nil
	_, err := newActivityEnv(a).ExecuteActivity(a.Upload, produced)
	require.NoError(t, err)
	src, ok, err := a.Store.StageOutput(ctx, "s1", produced.Point.Identity, point.StagePerf)
	require.NoError(t, err)
	require.True(t, ok)

	other := *a
	other.Load.TimeScale = 1 // this worker's profile differs from the producer's
	in := produced
	in.Point.SweepID, in.PerfFrom = "s2", &ReuseSource{Sweep: "s1"}
	_, err = newActivityEnv(&other).ExecuteActivity(other.Upload, in)
	require.NoError(t, err)
	got, ok, err := a.Store.StageOutput(ctx, "s2", produced.Point.Identity, point.StagePerf)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, src.ProfileHash, got.ProfileHash)
	assert.NotEqual(t, other.measured(in.Point, point.StagePerf).Hash(), got.ProfileHash)

	// The producer's sweep does not hold the output: refused, nothing stored.
	in.Point.SweepID, in.PerfFrom = "s3", &ReuseSource{Sweep: "gone"}
	_, err = newActivityEnv(&other).ExecuteActivity(other.Upload, in)
	require.Error(t, err)
	assert.Equal(t, string(failure.ErrResultConflict), appError(t, err).Type())
	assert.Contains(t, err.Error(), "no longer in sweep gone, so its profile is unknown")
	n, err := a.Store.CountStageOutputs(ctx, "s3", point.StagePerf)
	require.NoError(t, err)
	assert.Zero(t, n)
	perf, err := a.Store.Perf(ctx, "s3")
	require.NoError(t, err)
	assert.Empty(t, perf)
}
