package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/local"
)

// stagingRig is a checkpoint on a "shared filesystem" directory and a real
// local backend whose nodes' local disks are directories, behind a fake
// backend that records the resume lists StageCheckpoint hands it.
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
		Point: PointSpec{SweepID: "s1", PointID: "p1", CheckpointSource: r.src, CheckpointPath: filepath.Join(dir, "nvme", "model")},
		Alloc: Allocation{JobID: "s1.p1", Nodes: []string{"n1", "n2"}},
	}
	return r
}

// nodeFile is a checkpoint file on a node's local disk.
func (r *stagingRig) nodeFile(node, f string) string {
	return filepath.Join(filepath.Dir(r.in.Point.CheckpointPath), node, "model", f)
}

// stage runs the StageCheckpoint activity, as a retry attempt resuming from
// details when they are not nil.
func (r *stagingRig) stage(t *testing.T, details *stagingDetails) (CheckpointOutput, []stagingDetails, error) {
	env := newActivityEnv(r.acts)
	if details != nil {
		env.SetHeartbeatDetails(*details)
	}
	hb := listen[stagingDetails](t, env)
	val, err := env.ExecuteActivity(r.acts.StageCheckpoint, r.in)
	if err != nil {
		return CheckpointOutput{}, hb.all(), err
	}
	var out CheckpointOutput
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
// not re-hashed), which shows the details reached the backend. Its first
// heartbeat repeats them, so progress continues instead of restarting.
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
			require.NotEmpty(t, beats, "the activity heartbeats while it works")
			assert.Equal(t, 2, out.Nodes)
			assert.Equal(t, total, out.FilesCopied+out.FilesSkipped)
			changed, err := os.ReadFile(r.nodeFile("n1", listed))
			require.NoError(t, err)
			if tc.resume {
				assert.Equal(t, details.Done, r.fake.lastResume(), "the backend resumes from the heartbeat details")
				assert.Equal(t, details, beats[0], "the first heartbeat continues from the earlier attempt's progress")
				assert.Equal(t, 1, out.FilesCopied, "only the unlisted changed file is copied again")
				assert.Equal(t, bytes.Repeat([]byte{'X'}, len(changed)), changed, "a file the earlier attempt verified is trusted, not re-hashed")
			} else {
				assert.Empty(t, r.fake.lastResume())
				assert.Empty(t, beats[0].Done, "a fresh attempt starts from nothing")
				assert.Equal(t, 2, out.FilesCopied, "without details every existing file is re-hashed and both changes are repaired")
				r.requireStaged(t)
			}
		})
	}
}

// TestStageCheckpointRetryContinuesFailedAttempt chains two attempts: the
// first fails with a transient error after some files are done and its last
// heartbeat carries them; the retry, given those details as Temporal would,
// skips them, copies the rest and reports bytes copied across both attempts.
func TestStageCheckpointRetryContinuesFailedAttempt(t *testing.T) {
	r := newStagingRig(t)
	total := len(r.files) * len(r.in.Alloc.Nodes)

	// Attempt 1: the link to the nodes drops after the first verified file.
	r.fake.stage = func(ctx context.Context, alloc cluster.Allocation, src, dst string, resume map[string][]string, progress func(cluster.StageProgress)) (cluster.StageReport, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var once sync.Once
		_, err := r.local.StageCheckpoint(ctx, alloc, src, dst, resume, func(p cluster.StageProgress) {
			progress(p)
			once.Do(cancel)
		})
		if err == nil {
			return cluster.StageReport{}, errors.New("the link was expected to drop mid-way")
		}
		return cluster.StageReport{}, fmt.Errorf("ssh %s: connection reset by peer", alloc.Nodes[0])
	}
	_, beats1, err := r.stage(t, nil)
	app := appError(t, err)
	assert.Equal(t, "Transient", app.Type())
	assert.False(t, app.NonRetryable())
	require.GreaterOrEqual(t, len(beats1), 2, "a start beat and the progress sent with the failure")
	last := beats1[len(beats1)-1]
	listed := 0
	for _, done := range last.Done {
		listed += len(done)
	}
	require.Positive(t, listed, "the failed attempt's heartbeat lists the files it verified")
	require.Positive(t, last.BytesCopied)

	// Attempt 2 resumes from the last heartbeat of attempt 1.
	r.fake.stage = r.local.StageCheckpoint
	out, beats2, err := r.stage(t, &last)
	require.NoError(t, err)
	assert.Equal(t, last.Done, r.fake.lastResume())
	require.NotEmpty(t, beats2)
	assert.Equal(t, last.BytesCopied, beats2[0].BytesCopied, "progress continues from the failed attempt")
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
