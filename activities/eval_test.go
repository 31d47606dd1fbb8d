package activities

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim"
)

// TestEvalActivityVerdict runs the eval stage against sweepflow's simulator
// (in-process, over HTTP) on the 12-question GSM8K fixture. Below the floor
// is a verdict (Passed=false, a reason), not an activity error: the workflow
// marks the point eval_failed rather than retrying or gating it. A retry
// whose first completion was lost returns the recorded result without
// asking the server again, and the result and samples are stored under
// their content hash.
func TestEvalActivityVerdict(t *testing.T) {
	fixture := filepath.Join("..", "gsm8k", "testdata", "gsm8k")
	tests := []struct {
		name       string
		accuracy   float64
		wantPassed bool
		wantReason string
	}{
		{name: "above the floor", accuracy: 1, wantPassed: true, wantReason: "reach floor 0.90"},
		{name: "below the floor", accuracy: 0, wantPassed: false, wantReason: "below floor 0.90"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sim.New(sim.Config{Model: "sim", FastMode: true, Seed: 1, Accuracy: tc.accuracy,
				GSM8KPath: filepath.Join(fixture, "test.jsonl")})
			require.NoError(t, err)
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				s.Handler().ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)

			a := newLedgerActs(t)
			a.Simulated, a.Engine = true, "simulator"
			a.GSM8K = EvalConfig{TestPath: filepath.Join(fixture, "test.jsonl"), TrainPath: filepath.Join(fixture, "train.jsonl"),
				Limit: 12, Concurrency: 4, DefaultFloor: 0.9}
			p := testSpec("s1", "d", 4)
			p.Model = "sim"
			in := StageInput{Point: p, Endpoint: &cluster.Server{URL: srv.URL, Mode: "eval"}}

			env := newActivityEnv(a)
			hb := listen[evalProgress](t, env)
			val, err := env.ExecuteActivity(a.Eval, in)
			require.NoError(t, err, "a verdict either way, not an error")
			var got point.EvalSummary
			require.NoError(t, val.Get(&got))
			assert.Equal(t, tc.wantPassed, got.Passed)
			assert.Contains(t, got.Reason, tc.wantReason)
			assert.Equal(t, 12, got.NEff)
			assert.True(t, got.Simulated)
			// Beats start after one interval (a fifth of the heartbeat
			// timeout): an eval this short sends none, each being a write on
			// the server.
			assert.Empty(t, hb.all(), "a successful attempt shorter than a beat interval sends no heartbeat")
			asked := requests.Load()
			require.Positive(t, asked)

			// The attempt's completion is lost; the retry returns what it recorded.
			val, err = newActivityEnv(a).ExecuteActivity(a.Eval, in)
			require.NoError(t, err)
			var again point.EvalSummary
			require.NoError(t, val.Get(&again))
			assert.Equal(t, got, again)
			assert.Equal(t, asked, requests.Load(), "the retry does not evaluate again")

			for _, uri := range []string{got.ResultURI, got.SamplesURI} {
				assertContentAddressed(t, a, uri)
			}
		})
	}
}
