package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

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
