package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// TestEmulatedPartition drives the backend against real Slurm daemons: the
// emulated 18-node GB200 partition of scripts/slurm-emu.sh.
func TestEmulatedPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the emulated Slurm partition")
	}
	part := slurmemu.Start(t)
	root, err := slurmemu.RepoRoot()
	require.NoError(t, err)
	tmp := t.TempDir()
	starter := filepath.Join(tmp, "starter")
	out, err := exec.Command("go", "build", "-o", starter, filepath.Join(root, "starter")).CombinedOutput()
	require.NoError(t, err, string(out))

	newBackend := func(t *testing.T, queueWait time.Duration) *slurm.Backend {
		b, err := slurm.New(slurm.Config{
			Partition: part.Name, SharedRoot: filepath.Join(tmp, "shared"), NodeLocalRoot: filepath.Join(tmp, "nvme", "%n"),
			RecipesRoot: filepath.Join(root, "configs"), QueueWait: queueWait, Poll: 200 * time.Millisecond, StarterBin: starter,
			JobPrefix: "sftest", Launch: emuLaunch(t, root, tmp),
		})
		require.NoError(t, err)
		return b
	}
	ctx := context.Background()
	noJobs := func(t *testing.T) {
		t.Helper()
		require.Eventually(t, func() bool { return len(part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
			"jobs left in squeue: %v", part.Squeue(t))
	}

	t.Run("staging", func(t *testing.T) {
		b := newBackend(t, 0)
		src := filepath.Join(tmp, "shared", "models", "ckpt")
		require.NoError(t, os.MkdirAll(src, 0o755))
		var total int64
		for i := range 3 {
			data := []byte(strings.Repeat(fmt.Sprintf("shard %d ", i), 20000+i))
			require.NoError(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("model-%d.safetensors", i)), data, 0o644))
			total += int64(len(data))
		}
		alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "stage", Nodes: 3})
		require.NoError(t, err)
		defer b.Teardown(ctx, alloc) //nolint:errcheck
		require.Len(t, alloc.Nodes, 3)
		dst := filepath.Join(tmp, "nvme", "%n", "models", "ckpt")

		var mu sync.Mutex
		seen := map[string]bool{}
		rep, err := b.StageCheckpoint(ctx, alloc, src, dst, nil, func(p cluster.StageProgress) {
			mu.Lock()
			seen[p.Node] = true
			mu.Unlock()
		})
		require.NoError(t, err)
		assert.Equal(t, 3*total, rep.BytesCopied, "every node gets a full copy")
		assert.Len(t, seen, 3, "progress from every node")
		for _, n := range alloc.Nodes {
			_, err := os.Stat(filepath.Join(tmp, "nvme", n, "models", "ckpt", "model-1.safetensors"))
			require.NoError(t, err, "node %s has its own node-local copy", n)
		}

		rep, err = b.StageCheckpoint(ctx, alloc, src, dst, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, int64(0), rep.BytesCopied, "a second run on the same nodes copies nothing")
		assert.Equal(t, 9, rep.FilesSkipped)

		// Same-size corruption on one node is found by the hash and recopied.
		bad := filepath.Join(tmp, "nvme", alloc.Nodes[1], "models", "ckpt", "model-2.safetensors")
		data, err := os.ReadFile(bad)
		require.NoError(t, err)
		data[100] ^= 0xff
		require.NoError(t, os.WriteFile(bad, data, 0o644))
		rep, err = b.StageCheckpoint(ctx, alloc, src, dst, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, rep.FilesCopied)
		assert.Equal(t, int64(len(data)), rep.BytesCopied)

		// A source file that no longer matches its manifest: not retryable.
		srcFile := filepath.Join(src, "model-0.safetensors")
		data, err = os.ReadFile(srcFile)
		require.NoError(t, err)
		data[10] ^= 0xff
		require.NoError(t, os.WriteFile(srcFile, data, 0o644))
		_, err = b.StageCheckpoint(ctx, alloc, src, filepath.Join(tmp, "nvme", "%n", "models", "fresh"), nil, nil)
		require.ErrorIs(t, err, cluster.ErrChecksum)

		_, err = b.StageCheckpoint(ctx, alloc, src, "/elsewhere/ckpt", nil, nil)
		require.ErrorIs(t, err, cluster.ErrBadConfig)
		require.NoError(t, b.Teardown(ctx, alloc))
		noJobs(t)
	})

	t.Run("queueing and queue wait", func(t *testing.T) {
		b := newBackend(t, 0)
		first, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "q1", Nodes: 12})
		require.NoError(t, err)
		// A retry of the same point finds its job instead of submitting again.
		again, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "q1", Nodes: 12})
		require.NoError(t, err)
		require.Equal(t, first.JobID, again.JobID)

		var (
			mu       sync.Mutex
			statuses []string
			second   cluster.Allocation
			done     = make(chan error, 1)
		)
		go func() {
			var err error
			second, err = b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "q2", Nodes: 12, Status: func(s string) {
				mu.Lock()
				statuses = append(statuses, s)
				mu.Unlock()
			}})
			done <- err
		}()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(statuses) > 0 && strings.Contains(statuses[len(statuses)-1], "PENDING (Resources)")
		}, 30*time.Second, 100*time.Millisecond, "the second 12-node job waits for Resources")

		// A third point with a short queue-wait limit gives up, cancels its
		// job and says so with a non-retryable class.
		short := newBackend(t, 2*time.Second)
		_, err = short.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "q3", Nodes: 12})
		require.ErrorIs(t, err, slurm.ErrQueueWait)
		require.ErrorIs(t, err, cluster.ErrBadConfig)
		for _, j := range part.Squeue(t) {
			require.NotContains(t, j, "q3", "the timed-out job was cancelled")
		}

		require.NoError(t, b.Teardown(ctx, first))
		require.NoError(t, b.Teardown(ctx, first), "teardown is idempotent")
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the second job did not start after the first was torn down")
		}
		require.Len(t, second.Nodes, 12)
		require.NoError(t, b.Teardown(ctx, second))
		noJobs(t)
	})

	t.Run("job states", func(t *testing.T) {
		b := newBackend(t, 0)
		alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "cancel", Nodes: 2})
		require.NoError(t, err)
		require.NoError(t, b.Check(ctx, alloc))
		part.Run(t, "scancel", alloc.JobID)
		require.Eventually(t, func() bool {
			err := b.Check(ctx, alloc)
			return err != nil && strings.Contains(err.Error(), "CANCELLED")
		}, 20*time.Second, 200*time.Millisecond)
		require.ErrorIs(t, b.Check(ctx, alloc), cluster.ErrAllocationLost)
		require.NoError(t, b.Teardown(ctx, alloc), "teardown of a cancelled job")

		alloc, err = b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "nodefail", Nodes: 2})
		require.NoError(t, err)
		part.Run(t, "scontrol", "update", "nodename="+alloc.Nodes[1], "state=down", "reason=sweepflow-test")
		t.Cleanup(func() { _ = exec.Command("scontrol", "update", "nodename="+alloc.Nodes[1], "state=resume").Run() })
		require.Eventually(t, func() bool {
			err := b.Check(ctx, alloc)
			return err != nil && strings.Contains(err.Error(), "NODE_FAIL")
		}, 20*time.Second, 200*time.Millisecond)
		nf := b.Check(ctx, alloc)
		require.ErrorIs(t, nf, cluster.ErrAllocationLost)
		f, ok := failure.Of(nf)
		require.True(t, ok, "%v", nf)
		assert.Equal(t, failure.NodeFail, f.Class)
		assert.Equal(t, []string{alloc.Nodes[1]}, f.Nodes, "sinfo names the node that went down: %s", f.Excerpt)
		assert.Contains(t, f.Excerpt, "node "+alloc.Nodes[1]+" down")
		assert.Contains(t, f.Excerpt, "sweepflow-test", "with the reason it was set down")
		require.NoError(t, b.Teardown(ctx, alloc))
		noJobs(t)
	})

	// Excluded nodes (package nodehealth) are never allocated: sbatch
	// --exclude; excluding so many that the request cannot be met is a
	// configuration error that says which nodes are excluded.
	t.Run("excluded nodes", func(t *testing.T) {
		b := newBackend(t, 0)
		first, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "plain", Nodes: 2})
		require.NoError(t, err)
		require.NoError(t, b.Teardown(ctx, first))
		noJobs(t)
		alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "excl", Nodes: 2, Exclude: first.Nodes})
		require.NoError(t, err)
		for _, n := range first.Nodes {
			assert.NotContains(t, alloc.Nodes, n, "excluded node allocated")
		}
		require.NoError(t, b.Teardown(ctx, alloc))
		noJobs(t)
		all := strings.Fields(part.Run(t, "sinfo", "-h", "-N", "-p", part.Name, "-o", "%N"))
		_, err = b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "toomany", Nodes: 2, Exclude: all[:len(all)-1]})
		require.ErrorIs(t, err, cluster.ErrBadConfig)
		assert.ErrorContains(t, err, "starter nodes clear")
		noJobs(t)
	})

	// A worker that dies of a CUDA OOM while the server comes up (the
	// simulator's injected crash): not retryable, class cuda-oom, the torch
	// line as the evidence.
	t.Run("worker dies of a CUDA OOM", func(t *testing.T) {
		slurmemu.RequireRoles(t)
		l := emuLaunch(t, root, tmp)
		l.SimEnv[simenv.EnvCrash] = "cuda-oom"
		b, err := slurm.New(slurm.Config{
			Partition: part.Name, SharedRoot: filepath.Join(tmp, "shared"), NodeLocalRoot: filepath.Join(tmp, "nvme", "%n"),
			RecipesRoot: filepath.Join(root, "configs"), Poll: 200 * time.Millisecond, StarterBin: starter, JobPrefix: "sftest", Launch: l,
		})
		require.NoError(t, err)
		alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "oom", Nodes: 2})
		require.NoError(t, err)
		defer b.Teardown(ctx, alloc) //nolint:errcheck
		const ref = "recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c1-dspark6-hicache.yaml"
		raw, err := os.ReadFile(filepath.Join(root, "configs", ref))
		require.NoError(t, err)
		// The crash may land before bring-up returns (a loaded host) or after:
		// either way it must surface as the OOM.
		srv, herr := b.BringUp(ctx, alloc, cluster.ServeSpec{Model: "m", GPUsPerNode: 4, SyntheticAL: 3.77, RecipePath: ref, RecipeDigest: config.RecipeDigest(raw)})
		if herr == nil {
			require.Eventually(t, func() bool {
				_, herr = b.Health(ctx, alloc, srv)
				return herr != nil && errors.Is(herr, cluster.ErrOOM)
			}, 60*time.Second, 200*time.Millisecond, "last: %v", herr)
		}
		require.ErrorIs(t, herr, cluster.ErrOOM)
		f, ok := failure.Of(herr)
		require.True(t, ok, "%v", herr)
		assert.Equal(t, failure.CUDAOOM, f.Class)
		assert.Contains(t, f.Excerpt, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
		t.Logf("class %s, evidence %q; error: %v", f.Class, f.Excerpt, herr)
		require.NoError(t, b.Teardown(ctx, alloc))
		noJobs(t)
	})

	t.Run("bring up", func(t *testing.T) {
		slurmemu.RequireRoles(t) // each rendered process is handed to one
		b := newBackend(t, 0)
		alloc, err := b.Allocate(ctx, cluster.AllocRequest{SweepID: "unit", PointID: "serve", Nodes: 2})
		require.NoError(t, err)
		const ref = "recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c1-dspark6-hicache.yaml"
		raw, err := os.ReadFile(filepath.Join(root, "configs", ref))
		require.NoError(t, err)
		spec := cluster.ServeSpec{Model: "m", GPUsPerNode: 4, SyntheticAL: 3.77,
			RecipePath: ref, RecipeDigest: config.RecipeDigest(raw)}
		srv, err := b.BringUp(ctx, alloc, spec)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			phase, err := b.Health(ctx, alloc, srv)
			return err == nil && strings.HasPrefix(phase, "ready")
		}, 60*time.Second, 200*time.Millisecond)
		steps := part.Run(t, "squeue", "-h", "-s", "-j", alloc.JobID, "-o", "%j %N")
		assert.Contains(t, steps, "sweepflow-serve-infra "+alloc.Nodes[0], "infra on the head node")
		assert.Contains(t, steps, "sweepflow-serve-"+alloc.Nodes[1]+"_agg_w0 "+alloc.Nodes[1])

		// A second bring-up (perf -> eval) replaces the workers only: infra
		// and the frontend keep their steps and discover the new workers.
		ids := func() map[string]string {
			m := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(part.Run(t, "squeue", "-h", "-s", "-j", alloc.JobID, "-o", "%i %j")), "\n") {
				if id, name, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
					m[name] = id
				}
			}
			return m
		}
		before := ids()
		spec.SyntheticAL = 0
		srv2, err := b.BringUp(ctx, alloc, spec)
		require.NoError(t, err)
		require.NotEqual(t, srv.Handle, srv2.Handle)
		require.Eventually(t, func() bool { _, err := b.Health(ctx, alloc, srv2); return err == nil }, 60*time.Second, 200*time.Millisecond)
		after := ids()
		assert.Equal(t, before["sweepflow-serve-infra"], after["sweepflow-serve-infra"], "infra kept running")
		assert.Equal(t, before["sweepflow-serve-"+alloc.Nodes[1]+"_frontend_0"], after["sweepflow-serve-"+alloc.Nodes[1]+"_frontend_0"], "the frontend kept running")
		w := "sweepflow-serve-" + alloc.Nodes[1] + "_agg_w0"
		assert.NotEmpty(t, after[w])
		assert.NotEqual(t, before[w], after[w], "the worker was restarted")
		state, err := os.ReadFile(filepath.Join(alloc.WorkDir, srv2.Handle, "launch.json"))
		require.NoError(t, err)
		assert.Contains(t, string(state), `"workers_only": true`)

		require.NoError(t, b.Teardown(ctx, alloc))
		_, err = b.Health(ctx, alloc, srv2)
		require.ErrorIs(t, err, cluster.ErrAllocationLost)
		noJobs(t)
	})
}

// emuLaunch is the emulated partition's launch setup (the entry points of
// configs/clusters/slurm-emu.yaml).
func emuLaunch(t *testing.T, root, tmp string) slurm.Launch {
	cl, err := config.LoadCluster(filepath.Join(root, "configs", "clusters", "slurm-emu.yaml"))
	require.NoError(t, err)
	return slurm.Launch{Runtime: config.RuntimeNone, SrtRoot: filepath.Join(tmp, "srt-slurm"), InfmaxWorkspace: filepath.Join(tmp, "infmax"),
		Models:      map[string]config.Model{"dsv4-pro-0813-nvme": {Path: filepath.Join(tmp, "nvme", "%n", "models", "DeepSeek-V4-Pro-0813")}},
		Entrypoints: cl.Emulation.Entrypoints, SimEnv: map[string]string{"SWEEPFLOW_SIM_TIME_SCALE": "0.05"}}
}
