package energy

import (
	"fmt"
	"math"
	"sort"
)

// Model is the simulator's board-power model of one GPU: idle draw, and the
// draw at full load in each role, linear in between. Load follows the
// requests the deployment is serving at the moment: a prefill GPU is fully
// loaded with one prompt in prefill per GPU (prefill is compute bound), a
// decode GPU with DecodeStreams streams per GPU (decode is memory bound and
// batches). An aggregated GPU adds both. Its figures are simulated and say
// so; the constants are round numbers in a GB200's range (a 1200 W board),
// not a measurement.
type Model struct {
	IdleW, PrefillW, DecodeW float64
	DecodeStreams            float64 // decode streams per GPU at full load
	BoardLimitW              float64
}

// SimulatedGB200 is the simulator's model of a GB200 GPU.
var SimulatedGB200 = Model{IdleW: 160, PrefillW: 1000, DecodeW: 780, DecodeStreams: 64, BoardLimitW: 1200}

// Load is how many requests a deployment is serving at one moment.
type Load struct {
	Prefilling, Decoding float64
}

// Power is one GPU's draw in role under load, for a deployment with
// prefillGPUs and decodeGPUs (aggregated: decodeGPUs only, role agg).
func (m Model) Power(role string, l Load, prefillGPUs, decodeGPUs int) float64 {
	util := func(n, capacity float64) float64 {
		if capacity <= 0 {
			return 0
		}
		return math.Min(1, n/capacity)
	}
	up := util(l.Prefilling, float64(prefillGPUs))
	ud := util(l.Decoding, m.DecodeStreams*float64(decodeGPUs))
	var w float64
	switch role {
	case RolePrefill:
		w = m.IdleW + (m.PrefillW-m.IdleW)*up
	case RoleDecode:
		w = m.IdleW + (m.DecodeW-m.IdleW)*ud
	default:
		up = util(l.Prefilling, float64(decodeGPUs))
		w = m.IdleW + (m.PrefillW-m.IdleW)*up + (m.DecodeW-m.IdleW)*ud
	}
	return math.Min(w, m.BoardLimitW)
}

// Busy is one request's timeline on the window's clock: in prefill from
// Start to FirstToken, decoding from FirstToken to End.
type Busy struct {
	Start, FirstToken, End float64
}

// SimDevices are a simulated deployment's GPUs: prefill GPUs first, then
// decode (or agg) GPUs, gpusPerNode to a node named after nodes (node-NN
// when there are too few names).
func SimDevices(prefillGPUs, decodeGPUs, gpus, gpusPerNode int, nodes []string) []Device {
	if prefillGPUs == 0 || decodeGPUs == 0 {
		prefillGPUs, decodeGPUs = 0, gpus
	}
	if gpusPerNode <= 0 {
		gpusPerNode = 4
	}
	var out []Device
	for i := 0; i < prefillGPUs+decodeGPUs; i++ {
		n := i / gpusPerNode
		host := fmt.Sprintf("node-%02d", n+1)
		if n < len(nodes) {
			host = nodes[n]
		}
		role := RolePrefill
		switch {
		case i >= prefillGPUs && prefillGPUs > 0:
			role = RoleDecode
		case prefillGPUs == 0:
			role = RoleAgg
		}
		out = append(out, Device{Hostname: host, GPUIndex: i % gpusPerNode, Role: role})
	}
	return out
}

// Simulate samples the model on each device every cadence seconds, from one
// cadence before the window to one after it, with the load the requests
// put on the deployment at each sample time. The samples are simulated.
func (m Model) Simulate(devices []Device, w Window, cadence float64, reqs []Busy) []Sample {
	if cadence <= 0 || w.End <= w.Start {
		return nil
	}
	t0 := w.Start - cadence
	n := int(math.Ceil((w.End+cadence-t0)/cadence)) + 1
	// Difference arrays over the sample times: a request counts at sample
	// k when its phase covers t0 + k·cadence.
	dp, dd := make([]float64, n+1), make([]float64, n+1)
	at := func(t float64) int { return min(max(int(math.Ceil((t-t0)/cadence-1e-9)), 0), n) }
	for _, r := range reqs {
		dp[at(r.Start)]++
		dp[at(r.FirstToken)]--
		dd[at(r.FirstToken)]++
		dd[at(r.End)]--
	}
	prefill, decode := 0, 0
	for _, d := range devices {
		switch d.Role {
		case RolePrefill:
			prefill++
		default:
			decode++
		}
	}
	var out []Sample
	var l Load
	for k := 0; k < n; k++ {
		l.Prefilling += dp[k]
		l.Decoding += dd[k]
		t := t0 + float64(k)*cadence
		for _, d := range devices {
			out = append(out, Sample{Timestamp: t, Seq: k, Hostname: d.Hostname, GPUIndex: d.GPUIndex,
				GPUUUID: fmt.Sprintf("GPU-sim-%s-%d", d.Hostname, d.GPUIndex), PowerW: m.Power(d.Role, l, prefill, decode)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}
