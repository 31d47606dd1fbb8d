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
	"github.com/sweepflow/sweepflow/point"
)

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
