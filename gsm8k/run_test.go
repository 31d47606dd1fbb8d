package gsm8k

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/reftest"
	"github.com/sweepflow/sweepflow/sim"
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

// fakeServer is a minimal OpenAI-compatible server that answers GSM8K test
// questions from the split it is given. It exists to drive failure paths (status
// codes, timeouts, malformed replies) that a well-behaved simulator never
// produces; accuracy tests run against the sweepflow simulator.
type fakeServer struct {
	*httptest.Server
	byQuestion map[string]Doc
	// wrong reports whether doc id should be answered wrongly.
	wrong func(id int) bool
	// fail returns a status code to send instead of answering attempt n
	// (1-based) for doc id, or 0 to answer.
	fail func(id, attempt int) int
	// delay returns how long to stall attempt n for doc id.
	delay func(id, attempt int) time.Duration
	// reasoningOnly puts chat answers in reasoning_content with empty content.
	reasoningOnly bool
	simHeader     bool
	fingerprint   string

	mu       sync.Mutex
	attempts map[int]int
	bodies   map[int]apiRequest
	paths    map[string]int
	inFlight atomic.Int64
	maxInFl  atomic.Int64
	unmarked atomic.Int64 // requests without EvalHeader
}

func newFakeServer(t testing.TB, test []Doc) *fakeServer {
	f := &fakeServer{byQuestion: map[string]Doc{}, attempts: map[int]int{}, bodies: map[int]apiRequest{}, paths: map[string]int{}}
	for _, d := range test {
		f.byQuestion[d.Question] = d
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(f.Close)
	return f
}

// lastQuestion extracts the final question from a lm-eval, cot or chat prompt.
func lastQuestion(text string) string {
	for _, m := range []string{"Question: ", "Q: "} {
		if i := strings.LastIndex(text, m); i >= 0 {
			q, _, _ := strings.Cut(text[i+len(m):], "\n")
			return q
		}
	}
	return ""
}

func (f *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFl.Load()
		if n <= m || f.maxInFl.CompareAndSwap(m, n) {
			break
		}
	}
	if r.Header.Get(EvalHeader) != "1" {
		f.unmarked.Add(1)
	}
	var req apiRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	text := req.Prompt
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	if chat && len(req.Messages) > 0 {
		text = req.Messages[len(req.Messages)-1].Content
	}
	d, ok := f.byQuestion[lastQuestion(text)]
	if !ok {
		http.Error(w, "unknown question", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.attempts[d.ID]++
	attempt := f.attempts[d.ID]
	f.bodies[d.ID] = req
	f.paths[r.URL.Path]++
	f.mu.Unlock()
	if f.delay != nil {
		if dl := f.delay(d.ID, attempt); dl > 0 {
			select {
			case <-time.After(dl):
			case <-r.Context().Done():
				return
			}
		}
	}
	if f.fail != nil {
		if code := f.fail(d.ID, attempt); code != 0 {
			http.Error(w, `{"error":"injected"}`, code)
			return
		}
	}
	num := d.Gold
	if f.wrong != nil && f.wrong(d.ID) {
		num += "1"
	}
	answer := "Let me work it out.\n#### " + num
	if strings.HasPrefix(text, "Q: ") || strings.Contains(text, "\nQ: ") {
		answer = "Working step by step. The answer is " + num + "."
	}
	resp := map[string]any{"id": "x", "object": "text_completion"}
	if f.fingerprint != "" {
		resp["system_fingerprint"] = f.fingerprint
	}
	if chat {
		msg := map[string]any{"role": "assistant", "content": answer}
		if f.reasoningOnly {
			msg = map[string]any{"role": "assistant", "content": "", "reasoning_content": "thinking...\n" + answer}
		}
		resp["choices"] = []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}
	} else {
		resp["choices"] = []any{map[string]any{"index": 0, "text": " " + answer, "finish_reason": "stop"}}
	}
	if f.simHeader {
		w.Header().Set(SimulatedHeader, "true")
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// hashPick deterministically selects about frac of doc ids.
func hashPick(id int, frac float64, salt string) bool {
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write([]byte{byte(id), byte(id >> 8), byte(id >> 16)})
	return float64(h.Sum64()%10000) < frac*10000
}

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
