package simrole

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
)

// TestBoardPowerFollowsLoad pins the simulated exporters' model on a 1P1D
// job, a prefill worker on gb200-01 and a decode worker on gb200-02 (4 GPUs
// each), with 2 requests in prefill and 128 decoding: the prefill GPUs run
// at half their 4-GPU prefill capacity (580 W), the decode GPUs at half of
// 4 x 64 streams (470 W); a node no worker holds and a card gone stale
// idle (160 W).
func TestBoardPowerFollowsLoad(t *testing.T) {
	board := t.TempDir()
	now := time.Now()
	card := func(name string, c powerCard) {
		data, err := json.Marshal(c)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(board, name), data, 0o644))
	}
	at := float64(now.UnixNano()) / 1e9
	card("gb200-01-1.json", powerCard{Node: "gb200-01", Role: energy.RolePrefill, GPUs: 4, UpdatedUnix: at})
	card("gb200-02-2.json", powerCard{Node: "gb200-02", Role: energy.RoleDecode, GPUs: 4, Prefilling: 2, Decoding: 128, UpdatedUnix: at})
	card("gb200-03-3.json", powerCard{Node: "gb200-03", Role: energy.RoleDecode, GPUs: 4, Decoding: 999, UpdatedUnix: at - 60})
	assert.Equal(t, []float64{580, 580, 580, 580}, boardPower(board, "gb200-01", 4, now))
	assert.Equal(t, []float64{470, 470, 470, 470}, boardPower(board, "gb200-02", 4, now))
	assert.Equal(t, []float64{160, 160, 160, 160}, boardPower(board, "gb200-03", 4, now), "a stale card")
	assert.Equal(t, []float64{160, 160}, boardPower("", "gb200-01", 2, now), "no board")
}

// TestPowerCardPosted: a worker process in a Slurm job keeps its card on
// the job's board while it runs and takes it down when it ends.
func TestPowerCardPosted(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	env := map[string]string{"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gb200-05", EnvGPUsPerNode: "4"}
	o := Options{Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { postPowerCard(ctx, o, "decode", func() (int64, int64) { return 1, 64 }); close(done) }()
	board := powerBoard(o.Getenv)
	require.Eventually(t, func() bool {
		w := boardPower(board, "gb200-05", 4, time.Now())
		return w[0] == 160+620*64.0/256
	}, 5*time.Second, 50*time.Millisecond)
	cancel()
	<-done
	files, _ := filepath.Glob(filepath.Join(board, "*.json"))
	assert.Empty(t, files, "the card is taken down")
}
