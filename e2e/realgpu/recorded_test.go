//go:build realgpu_fixtures

// This file reads the fixtures a real-GPU run writes (scripts/real-gpu.sh:
// $OUT/fixtures/c<conc>.json.gz, copied to testdata/). The one committed,
// c1 of the H100 smoke run of 2026-12-06, agrees on TTFT and ITL but is
// 2.28 % off on output throughput: the replay is a second run of an engine
// whose speed varies from request to request (docs/performance.md "Real
// GPU"). The build line stays until a run's replays agree.

package realgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/loadgen"
)

// recorded are the points of the real-GPU run whose request logs are
// committed (testdata/<point>.json.gz, written by `crosscheck --fixture` on
// the lent GPU; docs/performance.md "Real GPU" gives the run).
var recorded = []string{"c1"}

func loadRecorded(t *testing.T, point string) *Run {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", point+".json.gz"))
	require.NoError(t, err, "the real-GPU run's fixture")
	defer f.Close()
	r, err := ReadFixture(f)
	require.NoError(t, err)
	require.Equal(t, point, r.Point)
	return r
}

// On the request logs recorded against transformers' continuous batching
// on a real GPU, loadgen's figures, derived again from the raw chunk times
// by today's code, agree with the independent client's own within 2 %.
// A change to how loadgen times or counts (TTFT from the wrong chunk, ITL
// over the wrong gaps, throughput over the wrong span) fails here.
func TestRecordedRunsAgreeWithTheIndependentClient(t *testing.T) {
	t.Parallel()
	for _, point := range recorded {
		r := loadRecorded(t, point)
		require.Equal(t, r.Aggregate.NumPrompts, len(r.Requests), point)
		ours := r.Ours()
		// The fixture holds the run: what loadgen stored then is what it
		// derives now, to the fixture's resolution.
		assert.InEpsilon(t, r.Aggregate.MedianTTFT, ours.MedianTTFT, 1e-3, point)
		assert.InEpsilon(t, r.Aggregate.MeanITL, ours.MeanITL, 1e-3, point)
		assert.InEpsilon(t, r.Aggregate.OutputThroughput, ours.OutputThroughput, 1e-3, point)
		v := r.Check(Tolerance)
		assert.True(t, v.Agree, "%s: %s", point, v.Reason)
	}
}

// The same logs with the figures pushed apart fail the cross-check: it can
// tell a wrong figure from a right one on real data.
func TestRecordedRunsCatchDivergence(t *testing.T) {
	t.Parallel()
	for _, point := range recorded {
		for name, distort := range map[string]func(*loadgen.RequestRecord){
			// Each request timed from 5 % of its TTFT earlier.
			"ttft": func(rec *loadgen.RequestRecord) { rec.SendNs -= (rec.ChunkNs[0] - rec.SendNs) * 5 / 100 },
			// Every gap 5 % longer.
			"itl": func(rec *loadgen.RequestRecord) {
				first := rec.ChunkNs[0]
				for j := range rec.ChunkNs {
					rec.ChunkNs[j] = first + (rec.ChunkNs[j]-first)*105/100
				}
			},
			// Usage over-counted by 5 %.
			"throughput": func(rec *loadgen.RequestRecord) { rec.CompletionTokens = rec.CompletionTokens * 105 / 100 },
		} {
			r := loadRecorded(t, point)
			for i := range r.Requests {
				if rec := &r.Requests[i]; rec.Success {
					distort(rec)
					rec.Refinish()
				}
			}
			v := r.Check(Tolerance)
			assert.False(t, v.Agree, "%s %s: %s", point, name, v.Reason)
		}
	}
}
