package gsm8k

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeOpts runs against f on the fixture splits.
func fakeOpts(f *fakeServer, mode Mode, limit int) Options {
	return Options{
		BaseURL: f.URL, Model: "fake", Mode: mode, Limit: limit, Concurrency: 16,
		TestPath: testSplit, TrainPath: trainSplit, RetryBackoff: time.Millisecond,
	}
}

func TestRunModesAgainstFake(t *testing.T) {
	t.Parallel()
	test, train := fixtureSplits(t)
	cases := []struct {
		mode          Mode
		reasoningOnly bool
		path          string
	}{
		{ModeLMEval, false, "/v1/completions"},
		{ModeInferenceX, false, "/v1/chat/completions"},
		{ModeInferenceX, true, "/v1/chat/completions"},
		{ModeCoT, false, "/v1/completions"},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, test)
			f.reasoningOnly = tc.reasoningOnly
			f.wrong = func(id int) bool { return id%10 == 3 } // exactly 10 % of the first 10 wrong
			res, err := Run(context.Background(), fakeOpts(f, tc.mode, 10))
			require.NoError(t, err)
			s := res.Summary
			assert.Equal(t, tc.mode.Task(), s.Task)
			assert.Equal(t, 10, s.NEff)
			assert.InDelta(t, 0.90, s.EMStrict, 1e-12)
			assert.InDelta(t, 0.90, s.EMFlexible, 1e-12)
			assert.InDelta(t, 0.1, s.EMStrictSE, 1e-12) // sqrt(.9*.1/9)
			assert.Zero(t, s.InvalidRate)
			assert.Zero(t, res.FailedRequests)
			assert.False(t, res.Simulated)
			assert.Equal(t, 10, f.paths[tc.path])
			assert.Zero(t, f.unmarked.Load(), "every eval request carries "+EvalHeader)
			require.Len(t, res.Samples, 10)
			for i, smp := range res.Samples {
				assert.Equal(t, i, smp.DocID)
				assert.Equal(t, 1, smp.Attempts)
				assert.Equal(t, i%10 != 3, smp.Matches.Strict, "doc %d", i)
				assert.Equal(t, tc.reasoningOnly, smp.UsedReasoning)
				assert.Equal(t, test[i].Answer, smp.Gold)
			}
			// What went over the wire: lm-eval's request settings.
			body := f.bodies[7]
			want := BuildPrompts(tc.mode, test[:8], train, 0)[7]
			assert.Equal(t, "fake", body.Model)
			assert.Zero(t, body.Temperature)
			assert.Equal(t, int64(1234), body.Seed)
			assert.Equal(t, want.Stop, body.Stop)
			assert.Equal(t, want.MaxTokens, body.MaxTokens)
			assert.Equal(t, want.Text, body.Prompt)
			assert.Equal(t, want.Messages, body.Messages)
			assert.False(t, body.Stream)
			if tc.mode == ModeInferenceX {
				require.NotNil(t, body.TopP)
				assert.Equal(t, 1.0, *body.TopP)
			} else {
				assert.Nil(t, body.TopP)
			}
		})
	}
}

func TestRunRetriesTransientErrors(t *testing.T) {
	t.Parallel()
	test, _ := fixtureSplits(t)
	cases := []struct {
		name string
		code int
	}{
		{"429", http.StatusTooManyRequests},
		{"500", http.StatusInternalServerError},
		{"503", http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, test)
			f.fail = func(id, attempt int) int {
				if attempt <= 2 {
					return tc.code
				}
				return 0
			}
			res, err := Run(context.Background(), fakeOpts(f, ModeLMEval, 0))
			require.NoError(t, err)
			assert.Equal(t, fixtureTestLen, res.Summary.NEff)
			assert.Equal(t, 1.0, res.Summary.EMStrict)
			for _, s := range res.Samples {
				assert.Equal(t, 3, s.Attempts)
			}
		})
	}
}

func TestRunRetriesTimeouts(t *testing.T) {
	t.Parallel()
	test, _ := fixtureSplits(t)
	f := newFakeServer(t, test)
	f.delay = func(id, attempt int) time.Duration {
		if id%5 == 0 && attempt == 1 {
			return 2 * time.Second
		}
		return 0
	}
	opts := fakeOpts(f, ModeLMEval, 0)
	opts.RequestTimeout = 100 * time.Millisecond
	res, err := Run(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, fixtureTestLen, res.Summary.NEff)
	for _, s := range res.Samples {
		if s.DocID%5 == 0 {
			assert.Equal(t, 2, s.Attempts, "doc %d timed out once", s.DocID)
		}
	}
}

func TestRunFailedRequests(t *testing.T) {
	t.Parallel()
	// 200 documents, so that one failure is half a percent.
	path, test := synthSplit(t, 200)
	cases := []struct {
		name      string
		failing   func(id int) bool
		code      int
		wantErr   bool
		minFailed int
	}{
		// 1 of 200 = 0.5 %: scored without that doc, no stage error.
		{"half a percent", func(id int) bool { return id == 17 }, http.StatusBadGateway, false, 1},
		// 2 of 200 = exactly 1 %: still allowed.
		{"exactly one percent", func(id int) bool { return id == 17 || id == 99 }, http.StatusBadRequest, false, 2},
		// 3 of 200 > 1 %: retryable stage error.
		{"over one percent", func(id int) bool { return id%67 == 5 }, http.StatusBadRequest, true, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, test)
			f.fail = func(id, _ int) int {
				if tc.failing(id) {
					return tc.code
				}
				return 0
			}
			opts := fakeOpts(f, ModeLMEval, 200)
			opts.TestPath = path
			opts.Retries = 2
			res, err := Run(context.Background(), opts)
			require.NotNil(t, res)
			assert.GreaterOrEqual(t, res.FailedRequests, tc.minFailed)
			assert.Equal(t, res.FailedRequests, res.Summary.FailedRequests)
			if !tc.wantErr {
				require.NoError(t, err)
				assert.Equal(t, 200-tc.minFailed, res.Summary.NEff)
				assert.Equal(t, 1.0, res.Summary.EMStrict, "failed docs are not scored as wrong")
				for _, s := range res.Samples {
					if tc.failing(s.DocID) {
						assert.Contains(t, s.Error, "HTTP")
						want := 3
						if tc.code == http.StatusBadRequest {
							want = 1 // 4xx other than 429 is not retried
						}
						assert.Equal(t, want, s.Attempts)
					}
				}
				return
			}
			var fre *FailedRequestsError
			require.True(t, errors.As(err, &fre), "got %v", err)
			assert.True(t, fre.Retryable())
			assert.Equal(t, 200, fre.Total)
			assert.Contains(t, fre.Error(), "more than 1%")
			assert.Contains(t, fre.Last, "400")
		})
	}
}

func TestRunAbortsEarlyWhenServerIsDown(t *testing.T) {
	t.Parallel()
	path, test := synthSplit(t, 1319) // a full-size run, to show it stops early
	f := newFakeServer(t, test)
	url := f.URL
	f.Close() // connection refused for every request
	opts := Options{BaseURL: url, Model: "m", Mode: ModeLMEval, Limit: 1319, Concurrency: 4,
		TestPath: path, TrainPath: trainSplit, RetryBackoff: time.Millisecond, Retries: 1}
	start := time.Now()
	res, err := Run(context.Background(), opts)
	var fre *FailedRequestsError
	require.True(t, errors.As(err, &fre), "got %v", err)
	assert.True(t, fre.Aborted)
	assert.Less(t, fre.Failed, 100, "must stop soon after passing 1 %%")
	assert.Contains(t, fre.Last, "connection refused")
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, fre.Failed, res.FailedRequests)
	assert.Zero(t, res.Summary.NEff)
}

func TestRunSimulatedMarkers(t *testing.T) {
	t.Parallel()
	test, _ := fixtureSplits(t)
	for _, tc := range []struct {
		name        string
		header      bool
		fingerprint string
		want        bool
	}{
		{"none", false, "fp_abc", false},
		{"header", true, "", true},
		{"fingerprint", false, SimulatedFingerprint, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, test)
			f.simHeader, f.fingerprint = tc.header, tc.fingerprint
			res, err := Run(context.Background(), fakeOpts(f, ModeInferenceX, 5))
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Simulated)
		})
	}
}

func TestRunConcurrencyAndProgress(t *testing.T) {
	t.Parallel()
	path, test := synthSplit(t, 120)
	f := newFakeServer(t, test)
	f.delay = func(int, int) time.Duration { return 20 * time.Millisecond }
	var mu sync.Mutex
	var seen []int
	opts := fakeOpts(f, ModeLMEval, 120)
	opts.TestPath = path
	opts.Concurrency = 12
	opts.Progress = func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 120, total)
		seen = append(seen, done)
	}
	_, err := Run(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, seen, 120)
	for i, d := range seen {
		assert.Equal(t, i+1, d)
	}
	assert.Equal(t, int64(12), f.maxInFl.Load(), "exactly Concurrency requests in flight")
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	test, _ := fixtureSplits(t)
	f := newFakeServer(t, test)
	f.delay = func(int, int) time.Duration { return time.Second }
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, fakeOpts(f, ModeLMEval, 0))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "cancelled")
}

func TestRunBadOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		mut  func(*Options)
		want string
	}{
		{"no url", func(o *Options) { o.BaseURL = "" }, "BaseURL is required"},
		{"no model", func(o *Options) { o.Model = "" }, "Model is required"},
		{"bad mode", func(o *Options) { o.Mode = "x" }, "unknown mode"},
		{"negative limit", func(o *Options) { o.Limit = -1 }, "must not be negative"},
		{"missing split", func(o *Options) { o.TestPath = "/nonexistent/test.jsonl" }, "/nonexistent/test.jsonl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{BaseURL: "http://127.0.0.1:1", Model: "m", Mode: ModeLMEval, TestPath: testSplit, TrainPath: trainSplit}
			tc.mut(&o)
			_, err := Run(context.Background(), o)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSamplesLogRescoresIdentically(t *testing.T) {
	t.Parallel()
	// 150 documents, so that one failed request stays under 1 %.
	path, test := synthSplit(t, 150)
	for _, mode := range []Mode{ModeLMEval, ModeInferenceX, ModeCoT} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, test)
			f.wrong = func(id int) bool { return hashPick(id, 0.2, "w") }
			f.fail = func(id, _ int) int {
				if id == 11 {
					return http.StatusBadRequest
				}
				return 0
			}
			opts := fakeOpts(f, mode, 150)
			opts.TestPath = path
			res, err := Run(context.Background(), opts)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, WriteSamplesJSONL(&buf, res.Samples))
			assert.Equal(t, 150, strings.Count(buf.String(), "\n"))
			re, err := RescoreJSONL(&buf, "samples.jsonl", mode)
			require.NoError(t, err)
			assert.Equal(t, res.Summary, re.Full)
			assert.Equal(t, 149, re.Summary.NEff)
			assert.Equal(t, 1, re.Full.FailedRequests)
			require.Len(t, re.Samples, 149)
			assert.Equal(t, res.Summary.EMStrict, re.Summary.EMStrict)
			assert.Equal(t, res.Summary.EMFlexible, re.Summary.EMFlexible)
		})
	}
}
