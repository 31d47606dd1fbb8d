package point

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPickCanaries(t *testing.T) {
	sp := func(id, image, backend string, nodes, conc int, nm float64) Spec {
		return Spec{PointID: id, Image: image, Framework: backend, Nodes: nodes, Conc: conc, NodeMinutes: nm}
	}
	pts := []Spec{
		sp("sg-c64", "sglang", "dynamo-sglang", 6, 64, 690),
		sp("sg-c4", "sglang", "dynamo-sglang", 2, 4, 170),
		sp("sg-c1", "sglang", "dynamo-sglang", 2, 1, 170), // ties with c4 on node-minutes: the lower conc wins
		sp("trt-c16", "trt", "dynamo-trt", 3, 16, 345),
		sp("trt-c8", "trt", "dynamo-trt", 3, 8, 255),
		// Same image, another backend: a group of its own.
		sp("router-c8", "sglang", "sglang-router", 2, 8, 170),
		// Cheapest in node-minutes, but it can never fit 18 nodes.
		sp("big-c1", "big", "dynamo-sglang", 20, 1, 50),
		sp("big-c2", "big", "dynamo-sglang", 16, 2, 900),
		// Fewer node-minutes win over fewer nodes.
		sp("v-wide", "vllm", "dynamo-vllm", 8, 32, 400),
		sp("v-narrow", "vllm", "dynamo-vllm", 2, 4, 410),
	}
	got := PickCanaries(pts, 18)
	type row struct {
		image, backend, id string
		points             int
		hours              float64
	}
	var rows []row
	for _, c := range got {
		require.Equal(t, CanaryPending, c.Verdict)
		rows = append(rows, row{c.Image, c.Backend, c.PointID, c.Points, c.NodeHours})
	}
	require.Equal(t, []row{
		{"sglang", "dynamo-sglang", "sg-c1", 3, 170.0 / 60},
		{"trt", "dynamo-trt", "trt-c8", 2, 255.0 / 60},
		{"sglang", "sglang-router", "router-c8", 1, 170.0 / 60},
		{"big", "dynamo-sglang", "big-c2", 2, 900.0 / 60},
		{"vllm", "dynamo-vllm", "v-wide", 2, 400.0 / 60},
	}, rows)
	require.NotEqual(t, CanaryKey(pts[0]), CanaryKey(pts[5]), "image and backend both decide the group")
}

func TestCanaryTexts(t *testing.T) {
	require.Equal(t, "p aborted at allocate: boom", CanaryReason("p", StatusAborted, "allocate", "boom"))
	require.Equal(t, "p failed: needs 40 nodes", CanaryReason("p", StatusFailed, "", "needs 40 nodes"))
	require.Equal(t, "canary failed: p failed", NotStartedReason(CanaryReason("p", StatusFailed, "", "")))
	cs := []Canary{{Verdict: CanaryPassed}, {Verdict: CanaryFailed, NotStarted: 2, SavedNodeHours: 14.5}, {Verdict: CanaryFailed, NotStarted: 1, SavedNodeHours: 0.25}}
	require.Equal(t, "3 canaries: 1 passed, 2 failed; 3 points not started, 14.75 node-hours saved", CanarySummary(cs))
	require.Equal(t, "2 canaries: 0 passed, 0 failed, 2 pending", CanarySummary([]Canary{{Verdict: CanaryPending}, {Verdict: CanaryPending}}))
}
