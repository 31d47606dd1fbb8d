package gsm8k

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
	"github.com/sweepflow/sweepflow/sim"
)

// startSim serves sweepflow's simulator over real HTTP on 127.0.0.1.
func startSim(t testing.TB, cfg sim.Config) *httptest.Server {
	t.Helper()
	if cfg.GSM8KPath == "" {
		cfg.GSM8KPath = testSplit
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	cfg.Model = "sim"
	if !cfg.FastMode && cfg.FixedTTFT == 0 && cfg.FixedITL == 0 {
		cfg.FastMode = true
	}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// acceptance is the acceptance check on the splits given: a full
// run reports em_strict inside the sampling band (4 standard errors of a
// binomial proportion at n) of the simulator's accuracy, and the dsv4 floor
// (0.91) passes at accuracy 0.95 and fails at 0.85.
func acceptance(t *testing.T, testPath, trainPath string, n int, th *Thresholds) {
	floor, ok := th.Floor("gsm8k", "dsv4")
	require.True(t, ok)
	require.Equal(t, 0.91, floor)

	cases := []struct {
		name      string
		mode      Mode
		accuracy  float64
		reasoning bool
		pass      bool
	}{
		{"inferencex 0.95", ModeInferenceX, 0.95, false, true},
		{"inferencex 0.95 reasoning", ModeInferenceX, 0.95, true, true},
		{"inferencex 0.85", ModeInferenceX, 0.85, false, false},
		{"lm-eval 0.95", ModeLMEval, 0.95, false, true},
		{"lm-eval 0.85", ModeLMEval, 0.85, false, false},
		{"cot 0.95", ModeCoT, 0.95, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startSim(t, sim.Config{Accuracy: tc.accuracy, Reasoning: tc.reasoning, GSM8KPath: testPath})
			res, err := Run(context.Background(), Options{
				BaseURL: srv.URL, Model: "sim", Mode: tc.mode, Concurrency: 64,
				TestPath: testPath, TrainPath: trainPath,
			})
			require.NoError(t, err)
			s := res.Summary
			require.Equal(t, n, s.NEff)
			assert.Zero(t, s.FailedRequests)
			assert.True(t, res.Simulated, "the simulator marks its responses")
			band := 4 * math.Sqrt(tc.accuracy*(1-tc.accuracy)/float64(n))
			t.Logf("n=%d em_strict %.4f em_flexible %.4f (accuracy %.2f, band ±%.4f)", n, s.EMStrict, s.EMFlexible, tc.accuracy, band)
			assert.InDelta(t, tc.accuracy, s.EMStrict, band, "em_strict")
			assert.InDelta(t, tc.accuracy, s.EMFlexible, band, "em_flexible")
			assert.InDelta(t, math.Sqrt(s.EMStrict*(1-s.EMStrict)/float64(n-1)), s.EMStrictSE, 1e-12)
			assert.Zero(t, s.InvalidRate, "the simulator always answers in the prompted format")
			v := Gate(s, floor)
			assert.Equal(t, tc.pass, v.Passed, v.Reason)
			if tc.reasoning {
				assert.Contains(t, res.Samples[0].Response, "#### ")
			}
		})
	}
}

// TestAcceptanceRunAgainstSim runs the acceptance check on 600 generated
// problems and the fixture floors, so it needs nothing beside the repository.
func TestAcceptanceRunAgainstSim(t *testing.T) {
	t.Parallel()
	th, err := LoadThresholds(filepath.Join("testdata", "thresholds.yaml"))
	require.NoError(t, err)
	path, _ := synthSplit(t, 600)
	acceptance(t, path, trainSplit, 600, th)
}

// TestAcceptanceFullRunAgainstSim is the acceptance check on the full
// 1,319-question split and InferenceX's thresholds.yaml (reference test).
func TestAcceptanceFullRunAgainstSim(t *testing.T) {
	t.Parallel()
	_, _, testPath, trainPath := realSplits(t)
	th, err := LoadThresholds(filepath.Join(reftest.InferenceX(t, "thresholds.yaml"), "thresholds.yaml"))
	require.NoError(t, err)
	acceptance(t, testPath, trainPath, 1319, th)
}

func TestRunRetriesSimFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		faults sim.Faults
	}{
		{"every 7th request 503", sim.Faults{ErrorEvery: 7, ErrorStatus: http.StatusServiceUnavailable}},
		{"burst of 500s", sim.Faults{ErrorBurstStart: 10, ErrorBurstLen: 30, ErrorStatus: http.StatusInternalServerError}},
	}
	path, _ := synthSplit(t, 200) // enough requests for the fault patterns
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startSim(t, sim.Config{Accuracy: 1, Faults: tc.faults, GSM8KPath: path})
			res, err := Run(context.Background(), Options{
				BaseURL: srv.URL, Model: "sim", Mode: ModeInferenceX, Limit: 200, Concurrency: 16,
				TestPath: path, TrainPath: trainSplit, RetryBackoff: time.Millisecond,
			})
			require.NoError(t, err)
			assert.Equal(t, 200, res.Summary.NEff)
			assert.Equal(t, 1.0, res.Summary.EMStrict)
			retried := 0
			for _, s := range res.Samples {
				if s.Attempts > 1 {
					retried++
				}
			}
			assert.Positive(t, retried, "some requests were retried")
		})
	}
}

func TestRunSimDiesIsRetryableStageError(t *testing.T) {
	t.Parallel()
	path, _ := synthSplit(t, 300) // the engine dies a third of the way in
	srv := startSim(t, sim.Config{Accuracy: 1, Faults: sim.Faults{DieAfter: 100}, GSM8KPath: path})
	res, err := Run(context.Background(), Options{
		BaseURL: srv.URL, Model: "sim", Mode: ModeLMEval, Concurrency: 8, Retries: 2,
		TestPath: path, TrainPath: trainSplit, RetryBackoff: time.Millisecond,
	})
	var fre *FailedRequestsError
	require.True(t, errors.As(err, &fre), "got %v", err)
	assert.True(t, fre.Retryable())
	assert.True(t, fre.Aborted)
	assert.NotContains(t, fre.Last, "HTTP 4", "failures come from the dead engine, not a bad request")
	require.NotNil(t, res)
	assert.LessOrEqual(t, res.Summary.NEff, 100)
}

// BenchmarkRunSimFast measures the client alone: 1,319 generated questions at
// concurrency 256 against the simulator's fast mode (zero latency), so the
// figure is the client's (plus loopback HTTP's) ceiling.
//
//	go test ./gsm8k -run '^$' -bench RunSimFast -benchtime 3x
func BenchmarkRunSimFast(b *testing.B) {
	path, _ := synthSplit(b, 1319)
	for _, mode := range []Mode{ModeLMEval, ModeInferenceX} {
		b.Run(string(mode), func(b *testing.B) {
			srv := startSim(b, sim.Config{Accuracy: 0.95, GSM8KPath: path})
			opts := Options{BaseURL: srv.URL, Model: "sim", Mode: mode, Concurrency: 256,
				TestPath: path, TrainPath: trainSplit}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				res, err := Run(context.Background(), opts)
				if err != nil || res.Summary.NEff != 1319 {
					b.Fatalf("run: %v (n_eff %d)", err, res.Summary.NEff)
				}
			}
			el := time.Since(start)
			b.ReportMetric(el.Seconds()/float64(b.N), "s/run")
			b.ReportMetric(float64(1319*b.N)/el.Seconds(), "q/s")
		})
	}
}
