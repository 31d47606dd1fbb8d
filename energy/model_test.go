package energy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimulatedModelPinsOneTopology pins the simulator's GB200 model on a
// 1P1D deployment of 4 prefill and 8 decode GPUs: idle, half and full load
// in each role, and an aggregated GPU carrying both.
func TestSimulatedModelPinsOneTopology(t *testing.T) {
	m := SimulatedGB200
	assert.Equal(t, 160.0, m.Power(RolePrefill, Load{}, 4, 8))
	assert.Equal(t, 160.0, m.Power(RoleDecode, Load{}, 4, 8))
	half := Load{Prefilling: 2, Decoding: 256} // 2 of 4 prefill GPUs' prompts, 256 of 8 x 64 streams
	assert.Equal(t, 580.0, m.Power(RolePrefill, half, 4, 8), "160 + (1000-160) x 0.5")
	assert.Equal(t, 470.0, m.Power(RoleDecode, half, 4, 8), "160 + (780-160) x 0.5")
	full := Load{Prefilling: 40, Decoding: 4096}
	assert.Equal(t, 1000.0, m.Power(RolePrefill, full, 4, 8))
	assert.Equal(t, 780.0, m.Power(RoleDecode, full, 4, 8))
	assert.Equal(t, 1200.0, m.Power(RoleAgg, full, 0, 8), "an aggregated GPU at both loads stops at the board limit")

	devs := SimDevices(4, 8, 12, 4, []string{"gb200-01", "gb200-02", "gb200-03"})
	require.Len(t, devs, 12)
	assert.Equal(t, Device{Hostname: "gb200-01", GPUIndex: 3, Role: RolePrefill}, devs[3])
	assert.Equal(t, Device{Hostname: "gb200-02", GPUIndex: 0, Role: RoleDecode}, devs[4])
	assert.Equal(t, RoleAgg, SimDevices(0, 0, 4, 4, nil)[0].Role)
}

// TestSimulatedSamplesFollowLoad: one request in prefill over [1, 3) and
// decoding over [3, 7) raises the prefill GPU's draw at samples 1 and 2 and
// the decode GPU's at 3 to 6; the window's figures come out valid and
// simulated samples integrate as the model says.
func TestSimulatedSamplesFollowLoad(t *testing.T) {
	m := SimulatedGB200
	devs := SimDevices(1, 1, 2, 4, []string{"n1"})
	w := Window{Start: 0, End: 10}
	rows := m.Simulate(devs, w, 1, []Busy{{Start: 1, FirstToken: 3, End: 7}})
	require.Len(t, rows, 2*13, "t = -1 .. 11")
	byT := map[float64][2]float64{}
	for _, r := range rows {
		v := byT[r.Timestamp]
		v[r.GPUIndex] = r.PowerW
		byT[r.Timestamp] = v
	}
	assert.Equal(t, [2]float64{160, 160}, byT[0])
	assert.Equal(t, [2]float64{1000, 160}, byT[1])
	assert.Equal(t, [2]float64{1000, 160}, byT[2])
	assert.Equal(t, [2]float64{160, 160 + 620.0/64}, byT[3])
	assert.Equal(t, [2]float64{160, 160 + 620.0/64}, byT[6])
	assert.Equal(t, [2]float64{160, 160}, byT[7])
	f := Compute(SourceSimulated, rows, devs, w, Tokens{Completed: 1, InputTokens: 100, OutputTokens: 40}, Rule{BoardLimitW: m.BoardLimitW})
	require.True(t, f.Valid, f.Reason())
	// Prefill GPU: 160 W x 10 s + 840 W over the trapezoids around 1..2
	// (0.5 + 1 + 0.5 s) = 1600 + 1680; decode: 1600 + 9.6875 W x 4 s.
	assert.InDelta(t, 1600+840*2+1600+620.0/64*4, f.TotalGPUEnergyJ, 1e-9)
}
