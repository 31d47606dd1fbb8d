package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
)

// TestPowerSamplerWithFakeSMI runs testdata/nvidia-smi (on PATH in place of
// the driver's) at a 100 ms loop on GPUs 0 and 1 through a 1 s window that
// starts as soon as the sampler has started and ends just before Stop, as
// the perf stage's does: every GPU reports through it, its readings
// bracket the window, and the figures integrate its 300 W and 310 W.
func TestPowerSamplerWithFakeSMI(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	require.True(t, HasNVIDIASMI())
	s, err := StartPowerSampler(context.Background(), []int{0, 1}, 100*time.Millisecond)
	require.NoError(t, err)
	start := float64(time.Now().UnixNano()) / 1e9
	time.Sleep(time.Second)
	end := float64(time.Now().UnixNano()) / 1e9
	rows, reasons := s.Stop()
	assert.Empty(t, reasons)
	require.GreaterOrEqual(t, len(rows), 2*8, "about 10 loops of 2 GPUs")
	host, _ := os.Hostname()
	assert.Equal(t, energy.Sample{Timestamp: rows[1].Timestamp, Seq: 0, Hostname: host, GPUIndex: 1, GPUUUID: "GPU-fake-0001", PowerW: 310}, rows[1])
	assert.Equal(t, 1, rows[2].Seq, "the next loop")
	devs := []energy.Device{{Hostname: host, GPUIndex: 0, Role: energy.RoleAgg}, {Hostname: host, GPUIndex: 1, Role: energy.RoleAgg}}
	f := energy.Compute(energy.SourceNVML, rows, devs, energy.Window{Start: start, End: end}, energy.Tokens{Completed: 1, InputTokens: 10, OutputTokens: 100}, energy.Rule{})
	require.True(t, f.Valid, f.Reason())
	assert.InDelta(t, 305, f.AvgPowerW, 1e-9)
	assert.InDelta(t, 610*(end-start)/100, f.JoulesPerOutputToken, 1e-9)
}

// TestPowerSamplerBracketsAtOneSecond: at the 1 s loop the perf stage uses,
// a short window that starts as soon as the sampler is up and ends just
// before Stop is still bracketed by readings of every GPU (the H100 run of
// 2026-12-06 found every window of nvidia-smi's unbracketed before Stop
// waited for a reading past it).
func TestPowerSamplerBracketsAtOneSecond(t *testing.T) {
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	s, err := StartPowerSampler(context.Background(), []int{0}, time.Second)
	require.NoError(t, err)
	start := float64(time.Now().UnixNano()) / 1e9
	time.Sleep(1500 * time.Millisecond)
	end := float64(time.Now().UnixNano()) / 1e9
	rows, reasons := s.Stop()
	assert.Empty(t, reasons)
	host, _ := os.Hostname()
	f := energy.Compute(energy.SourceNVML, rows, []energy.Device{{Hostname: host, GPUIndex: 0, Role: energy.RoleAgg}},
		energy.Window{Start: start, End: end}, energy.Tokens{Completed: 1, InputTokens: 10, OutputTokens: 100}, energy.Rule{})
	require.True(t, f.Valid, f.Reason())
	assert.InDelta(t, 300, f.AvgPowerW, 1e-9)
}

// TestParseSMIRow: a row as nvidia-smi writes it, and the refusals.
func TestParseSMIRow(t *testing.T) {
	r, err := ParseSMIRow("2026/12/06 04:30:18.125, 3, GPU-5a1b, 412.37", "h")
	require.NoError(t, err)
	want := time.Date(2026, 12, 6, 4, 30, 18, 125e6, time.Local)
	assert.Equal(t, energy.Sample{Timestamp: float64(want.UnixNano()) / 1e9, Hostname: "h", GPUIndex: 3, GPUUUID: "GPU-5a1b", PowerW: 412.37}, r)
	for _, bad := range []string{"2026/12/06 04:30:18.125, 3, GPU-5a1b, [N/A]", "2026/12/06 04:30:18.125, x, GPU-5a1b, 1", "yesterday, 3, GPU-5a1b, 1", "a, b"} {
		_, err := ParseSMIRow(bad, "h")
		assert.Error(t, err, bad)
	}
}
