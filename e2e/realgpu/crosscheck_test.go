package realgpu

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/loadgen"
)

func TestCompareJudgesEachFigure(t *testing.T) {
	t.Parallel()
	theirs := Figures{MedianTTFT: 0.100, MeanITL: 0.010, OutputThroughput: 1000, MeanE2EL: 10, Completed: 10}
	v := Compare(theirs, theirs, Tolerance)
	assert.True(t, v.Agree, v.Reason)

	ours := theirs
	ours.MedianTTFT = 0.1019 // +1.9 %
	ours.OutputThroughput = 981
	assert.True(t, Compare(ours, theirs, Tolerance).Agree)

	for name, mutate := range map[string]func(*Figures){
		"median_ttft":       func(f *Figures) { f.MedianTTFT = 0.1021 },
		"mean_itl":          func(f *Figures) { f.MeanITL = 0.0097 },
		"output_throughput": func(f *Figures) { f.OutputThroughput = 1030 },
		"completed":         func(f *Figures) { f.Completed = 9 },
		"zero":              func(f *Figures) { f.MeanITL = 0 },
	} {
		o := theirs
		mutate(&o)
		v := Compare(o, theirs, Tolerance)
		assert.False(t, v.Agree, name)
		assert.Contains(t, v.Reason, "outside", name)
	}
	// E2EL is reported, never judged.
	o := theirs
	o.MeanE2EL = 20
	assert.True(t, Compare(o, theirs, Tolerance).Agree)
}

// synthetic is a run of n streams of k chunks, itl apart, each first chunk
// ttft after its send, one stream after another.
func synthetic(n, k int, ttft, itl int64) *Run {
	r := &Run{Point: "synthetic", Aggregate: loadgen.Aggregate{ScenarioType: loadgen.ScenarioFixedSeqLen, Conc: 1, NumGPU: 1}}
	t := int64(1000)
	for i := 0; i < n; i++ {
		rec := loadgen.RequestRecord{Index: i, Status: 200, Success: true, DispatchNs: t, SendNs: t, WrittenNs: t + 10_000,
			PromptTokens: 100, RequestedPromptTokens: 100, CompletionTokens: k, MaxTokens: k}
		c := t + ttft
		for j := 0; j < k; j++ {
			rec.ChunkNs = append(rec.ChunkNs, c)
			rec.ChunkTokens = append(rec.ChunkTokens, 1)
			c += itl + int64(j%3)*1_000 // a little jitter
		}
		rec.EndNs = c
		rec.Refinish()
		r.Requests = append(r.Requests, rec)
		t = c + 5_000
	}
	return r
}

// The fixture form keeps every figure: chunk times move by less than 5 µs,
// far below the tolerance.
func TestFixtureRoundTrip(t *testing.T) {
	t.Parallel()
	r := synthetic(6, 50, 40_000_000, 7_000_123)
	want := r.Ours()
	var b bytes.Buffer
	require.NoError(t, WriteFixture(&b, r, DefaultTick))
	got, err := ReadFixture(&b)
	require.NoError(t, err)
	require.Len(t, got.Requests, 6)
	g := got.Ours()
	assert.Equal(t, want.Completed, g.Completed)
	assert.InDelta(t, want.MedianTTFT, g.MedianTTFT, 1e-5)
	assert.InDelta(t, want.MeanITL, g.MeanITL, 1e-5)
	assert.InEpsilon(t, want.OutputThroughput, g.OutputThroughput, 1e-5)
	assert.Len(t, got.Requests[0].ChunkNs, 50)
}
