package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/loadgen"
)

func TestBenchTraceGenDeterministic(t *testing.T) {
	t.Parallel()
	var a, b bytes.Buffer
	require.NoError(t, runTraceGen(func(g *TraceGen) { g.Traces, g.Shape.MainCalls, g.Seed = 3, 2, 9 }, &a))
	require.NoError(t, runTraceGen(func(g *TraceGen) { g.Traces, g.Shape.MainCalls, g.Seed = 3, 2, 9 }, &b))
	assert.Equal(t, a.String(), b.String())
	assert.Len(t, strings.Split(strings.TrimSpace(a.String()), "\n"), 3)
	var none bytes.Buffer
	require.NoError(t, runTraceGen(func(g *TraceGen) { g.Traces, g.Shape.MainCalls, g.Shape.SubagentEvery = 1, 3, 0 }, &none))
	s, err := loadgen.ParseTrace(&none, "stdin")
	require.NoError(t, err)
	require.Len(t, s[0].Requests, 3, "no subagents")
	assert.Equal(t, 64, s[0].BlockSize)
	assert.Equal(t, s[0].Requests[0].HashIDs[:10], s[0].Requests[1].HashIDs[:10], "calls resend the session's prefix")
}

func TestCapacityPointsParse(t *testing.T) {
	t.Parallel()
	pts, err := parseCapacityPoints("1280:10ms:capacity, 256:20ms:accuracy,64:1ms")
	require.NoError(t, err)
	assert.Equal(t, []capacitySpec{{1280, 10e6, "capacity"}, {256, 20e6, "accuracy"}, {64, 1e6, "none"}}, pts)
	for _, bad := range []string{"", "x:10ms", "10", "10:-1ms", "10:1ms:fast"} {
		_, err := parseCapacityPoints(bad)
		assert.Error(t, err, bad)
	}
}

func TestBenchCapacitySmall(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	o := Capacity{Points: "16:2ms:none", TTFT: 50 * time.Millisecond, OSL: 20, ISL: 128, Waves: 1, RangeRatio: 0.8, JSON: true}
	require.NoError(t, o.Validate())
	err := o.Run(context.Background(), &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var pts []capacityPoint
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &pts))
	require.Len(t, pts, 1)
	p := pts[0]
	assert.Equal(t, 16, p.Requests)
	assert.Zero(t, p.Unmatched)
	assert.Greater(t, p.ChunksPerSec, 0.0)
	assert.Greater(t, p.Chunks, 16*15)
	assert.Greater(t, p.ChunkLagP50ms, -1.0, "a chunk is not read long before the server sent it")
	// How close to the send the client reads a chunk is a performance
	// figure: `starter bench capacity` measures it; a loaded test host
	// cannot bound it.
}

// runTraceGen runs the trace generator with the defaults of `starter bench
// trace-gen` changed by set.
func runTraceGen(set func(*TraceGen), stdout io.Writer) error {
	g := NewTraceGen()
	set(&g)
	if err := g.Validate(); err != nil {
		return err
	}
	return g.Run(stdout, io.Discard)
}
