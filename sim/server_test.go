package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func fastConfig() Config {
	return Config{FastMode: true, FixedTTFT: 2 * time.Millisecond, FixedITL: 200 * time.Microsecond, Seed: 7}
}

func TestStreamFormat(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, fastConfig())
	tests := []struct {
		name     string
		endpoint string
		body     map[string]any
		wantText string // delta field or "text"
	}{
		{"chat", "/v1/chat/completions", chatBody(words(40, ""), 17, true), "content"},
		{"completions", "/v1/completions", map[string]any{
			"model": DefaultModel, "prompt": words(40, ""), "max_tokens": 17, "stream": true, "ignore_eos": true,
			"stream_options": map[string]any{"include_usage": true},
		}, "text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := post(t, url+tc.endpoint, tc.body)
			require.NoError(t, res.readErr)
			require.Equal(t, http.StatusOK, res.status)
			assert.Equal(t, "true", res.header.Get("X-Sweepflow-Simulated"))
			assert.Equal(t, "text/event-stream", res.header.Get("Content-Type"))
			ev := res.events
			require.GreaterOrEqual(t, len(ev), 3)
			assert.Equal(t, "[DONE]", ev[len(ev)-1].data, "stream ends with [DONE]")
			usage := ev[len(ev)-2].json
			assert.Equal(t, []any{}, usage["choices"], "usage chunk has choices: []")
			u := usage["usage"].(map[string]any)
			assert.EqualValues(t, 40, u["prompt_tokens"])
			assert.EqualValues(t, 17, u["completion_tokens"])
			assert.EqualValues(t, 57, u["total_tokens"])
			assert.Equal(t, true, usage["simulated"])
			id := ev[0].json["id"].(string)
			var text strings.Builder
			toks := 0
			for i, e := range ev[:len(ev)-2] {
				assert.Equal(t, id, e.json["id"])
				assert.Equal(t, Fingerprint, e.json["system_fingerprint"])
				assert.Nil(t, e.json["usage"], "token chunks carry usage: null")
				ch := e.json["choices"].([]any)[0].(map[string]any)
				if tc.wantText == "content" {
					d := ch["delta"].(map[string]any)
					if i == 0 {
						assert.Equal(t, "assistant", d["role"], "role rides on the first token chunk")
					}
					text.WriteString(d["content"].(string))
				} else {
					text.WriteString(ch["text"].(string))
				}
				if i == len(ev)-3 {
					assert.Equal(t, "length", ch["finish_reason"])
				} else {
					assert.Nil(t, ch["finish_reason"])
				}
				toks += e.tokens()
			}
			assert.Equal(t, 17, toks)
			assert.Equal(t, 17, CountTokens(text.String()), "re-counting the text gives completion_tokens")
			if tc.endpoint == "/v1/chat/completions" {
				assert.True(t, strings.HasPrefix(id, "chatcmpl-sim-"), id)
				assert.Equal(t, "chat.completion.chunk", ev[0].json["object"])
			} else {
				assert.True(t, strings.HasPrefix(id, "cmpl-sim-"), id)
				assert.Equal(t, "text_completion", ev[0].json["object"])
			}
			tl, ok := s.Timeline(id)
			require.True(t, ok)
			assert.Len(t, tl.ChunkNs, 17)
			assert.Equal(t, 17, tl.CompletionTokens)
		})
	}
}

func TestStreamWithoutUsageAndContinuousUsage(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, fastConfig())
	body := chatBody(words(10, ""), 5, true)
	delete(body, "stream_options")
	res := post(t, url+"/v1/chat/completions", body)
	require.NoError(t, res.readErr)
	require.Len(t, res.events, 6, "5 token chunks + [DONE], no usage chunk")
	assert.Equal(t, "[DONE]", res.events[5].data)

	body["stream_options"] = map[string]any{"include_usage": true, "continuous_usage_stats": true}
	res = post(t, url+"/v1/chat/completions", body)
	require.Len(t, res.events, 7)
	for i, e := range res.events[:5] {
		u := e.json["usage"].(map[string]any)
		assert.EqualValues(t, i+1, u["completion_tokens"], "continuous usage is cumulative")
	}
}

func TestNonStream(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, fastConfig())
	for _, tc := range []struct {
		endpoint string
		body     map[string]any
	}{
		{"/v1/chat/completions", chatBody(words(30, ""), 25, false)},
		{"/v1/completions", map[string]any{"prompt": words(30, ""), "max_tokens": 25, "ignore_eos": true}},
		{"/v1/completions", map[string]any{"prompt": make([]int, 30), "max_tokens": 25, "ignore_eos": true}},
	} {
		status, m, h := postJSON(t, url+tc.endpoint, tc.body)
		require.Equal(t, http.StatusOK, status, m)
		assert.Equal(t, "true", h.Get("X-Sweepflow-Simulated"))
		assert.Equal(t, true, m["simulated"])
		assert.Equal(t, Fingerprint, m["system_fingerprint"])
		u := m["usage"].(map[string]any)
		assert.EqualValues(t, 30, u["prompt_tokens"])
		assert.EqualValues(t, 25, u["completion_tokens"])
		ch := m["choices"].([]any)[0].(map[string]any)
		assert.Equal(t, "length", ch["finish_reason"])
		var text string
		if msg, ok := ch["message"].(map[string]any); ok {
			text = msg["content"].(string)
			assert.Equal(t, "chat.completion", m["object"])
		} else {
			text = ch["text"].(string)
			assert.Equal(t, "text_completion", m["object"])
		}
		assert.Equal(t, 25, CountTokens(text))
		tl, ok := s.Timeline(m["id"].(string))
		require.True(t, ok)
		assert.Equal(t, []int{25}, tl.ChunkTokens, "a non-streaming reply is one chunk")
		assert.False(t, tl.Stream)
	}
}

func TestMaxTokensAndIgnoreEOS(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, fastConfig())
	tests := []struct {
		name       string
		body       map[string]any
		wantExact  int // 0: check range instead
		wantMin    int
		wantMax    int
		wantFinish string
	}{
		{"ignore_eos gives exactly max_tokens", map[string]any{"max_tokens": 64, "ignore_eos": true}, 64, 0, 0, "length"},
		{"max_completion_tokens wins", map[string]any{"max_tokens": 10, "max_completion_tokens": 33, "ignore_eos": true}, 33, 0, 0, "length"},
		{"without ignore_eos stops early within (max/2, max]", map[string]any{"max_tokens": 64, "seed": 1}, 0, 33, 64, ""},
		{"min_tokens raises the early stop", map[string]any{"max_tokens": 64, "min_tokens": 64, "seed": 1}, 64, 0, 0, ""},
		{"no max_tokens uses the default cap", map[string]any{"ignore_eos": true}, 1024, 0, 0, "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["messages"] = []map[string]any{{"role": "user", "content": "hello there"}}
			status, m, _ := postJSON(t, url+"/v1/chat/completions", tc.body)
			require.Equal(t, http.StatusOK, status, m)
			got := int(m["usage"].(map[string]any)["completion_tokens"].(float64))
			if tc.wantExact > 0 {
				assert.Equal(t, tc.wantExact, got)
			} else {
				assert.GreaterOrEqual(t, got, tc.wantMin)
				assert.LessOrEqual(t, got, tc.wantMax)
			}
			if tc.wantFinish != "" {
				assert.Equal(t, tc.wantFinish, m["choices"].([]any)[0].(map[string]any)["finish_reason"])
			}
		})
	}
	// early stop is reproducible for a given seed and varies across seeds
	lengths := map[int]bool{}
	for seed := range 12 {
		body := map[string]any{"max_tokens": 200, "seed": seed, "messages": []map[string]any{{"role": "user", "content": "same prompt"}}}
		_, a, _ := postJSON(t, url+"/v1/chat/completions", body)
		_, b, _ := postJSON(t, url+"/v1/chat/completions", body)
		assert.Equal(t, a["usage"], b["usage"])
		lengths[int(a["usage"].(map[string]any)["completion_tokens"].(float64))] = true
		assert.Equal(t, "stop", a["choices"].([]any)[0].(map[string]any)["finish_reason"].(string)[:4])
	}
	assert.Greater(t, len(lengths), 3, "different seeds stop at different lengths")
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{FastMode: true, ContextLength: 1000})
	tests := []struct {
		name, endpoint string
		body           any
		status         int
		msg            string
	}{
		{"wrong model", "/v1/chat/completions", map[string]any{"model": "other/model", "messages": []any{map[string]any{"role": "user", "content": "x"}}}, 404, "does not exist"},
		{"no messages", "/v1/chat/completions", map[string]any{"max_tokens": 3}, 400, "messages"},
		{"no prompt", "/v1/completions", map[string]any{"max_tokens": 3}, 400, "prompt"},
		{"max_tokens 0", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 0}, 400, "max_tokens"},
		{"n 2", "/v1/completions", map[string]any{"prompt": "a", "n": 2}, 400, "n=1"},
		{"context overflow", "/v1/completions", map[string]any{"prompt": words(900, ""), "max_tokens": 200}, 400, "context length"},
		{"bad stop", "/v1/completions", map[string]any{"prompt": "a", "stop": 3}, 400, "stop"},
		{"bad json", "/v1/completions", json.RawMessage(`{"prompt":`), 400, "invalid JSON"},
		{"batch prompt", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}}, 400, "one prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var res streamResult
			if raw, ok := tc.body.(json.RawMessage); ok {
				resp, err := http.Post(url+tc.endpoint, "application/json", strings.NewReader(string(raw)))
				require.NoError(t, err)
				res.status = resp.StatusCode
				res.body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			} else {
				res = post(t, url+tc.endpoint, tc.body)
			}
			assert.Equal(t, tc.status, res.status)
			var m map[string]any
			require.NoError(t, json.Unmarshal(res.body, &m))
			assert.Contains(t, m["error"].(map[string]any)["message"], tc.msg)
			assert.Equal(t, true, m["simulated"])
		})
	}
}

func TestHealthModelsMetricsInfo(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{TimeScale: 0.001, AcceptanceLength: 2.5, Seed: 1})
	// one request so the counters move, with a repeated prefix to hit the cache
	prompt := words(300, "")
	for range 2 {
		res := post(t, url+"/v1/chat/completions", chatBody(prompt, 20, true))
		require.Equal(t, 200, res.status)
	}
	get := func(path string) (int, string, http.Header) {
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, h := get("/health")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"simulated":true`)
	assert.Equal(t, "true", h.Get("X-Sweepflow-Simulated"))

	code, body, _ = get("/v1/models")
	assert.Equal(t, 200, code)
	var models struct {
		Data []struct {
			ID        string `json:"id"`
			Simulated bool   `json:"simulated"`
			OwnedBy   string `json:"owned_by"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &models))
	require.Len(t, models.Data, 1)
	assert.Equal(t, DefaultModel, models.Data[0].ID)
	assert.True(t, models.Data[0].Simulated)

	code, body, _ = get("/metrics")
	assert.Equal(t, 200, code)
	metrics := parseProm(t, body)
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:cache_hit_rate",
		"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:spec_accept_length", "sweepflow_simulated",
		"sweepflow_sim_late_chunks_total", "sweepflow_sim_max_schedule_lag_seconds"} {
		_, ok := metrics[name]
		assert.True(t, ok, "metric %s present", name)
	}
	assert.Equal(t, 600.0, metrics["sglang:prompt_tokens_total"])
	assert.Equal(t, 40.0, metrics["sglang:generation_tokens_total"])
	assert.Equal(t, 256.0, metrics["sglang:cached_tokens_total"], "second request hits 4 pages of 64")
	assert.InDelta(t, 256.0/600, metrics["sglang:cache_hit_rate"], 1e-9)
	assert.Equal(t, 0.0, metrics["sglang:num_running_reqs"])
	assert.Equal(t, 1.0, metrics["sweepflow_simulated"])
	assert.InDelta(t, 2.5, metrics["sglang:spec_accept_length"], 0.6)
	assert.Equal(t, 2.0, metrics["sglang:time_to_first_token_seconds_count"])
	assert.Greater(t, metrics["sweepflow_sim_chunks_total"], 10.0)
	assert.Less(t, metrics["sweepflow_sim_chunks_total"], 30.0, "AL 2.5: fewer chunks than the 40 tokens")

	code, body, _ = get("/sim/info")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"deployment":"2P1D DEP16/DEP32"`)
	assert.Contains(t, body, `"simulated":true`)
}

// parseProm reads "name{labels} value" lines (last sample of a name wins) and
// checks the text format is well formed.
func parseProm(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		require.Positive(t, sp, "sample line %q", line)
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			require.True(t, strings.HasSuffix(name, "}"), "labels closed in %q", line)
			name = name[:i]
		}
		var v float64
		_, err := fmt.Sscan(line[sp+1:], &v)
		if line[sp+1:] == "+Inf" {
			err = nil
		}
		require.NoError(t, err, "value in %q", line)
		out[name] = v
	}
	return out
}

func TestTimelineEndpoint(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, Config{FastMode: true, FixedTTFT: 3 * time.Millisecond, FixedITL: time.Millisecond, TimelineCapacity: 3})
	var ids []string
	for range 5 {
		res := post(t, url+"/v1/chat/completions", chatBody("hi", 8, true))
		require.Equal(t, 200, res.status)
		ids = append(ids, res.events[0].json["id"].(string))
		// the client reads each chunk about when the server's Flush returned
		// (the server stamps after Flush, so it may be a little later; a
		// loaded 2-core CI machine can delay the read by tens of ms)
		tl, ok := s.Timeline(ids[len(ids)-1])
		require.True(t, ok)
		require.Len(t, tl.ChunkNs, 8)
		assert.Equal(t, 1, tl.PromptTokens)
		for i, e := range res.events[:8] {
			assert.InDelta(t, e.at.UnixNano(), tl.ChunkNs[i], float64(150*time.Millisecond), "chunk %d", i)
		}
		assert.GreaterOrEqual(t, tl.ChunkNs[0]-tl.ArrivalNs, int64(3*time.Millisecond), "TTFT honoured")
	}
	// ring keeps the last 3
	_, ok := s.Timeline(ids[0])
	assert.False(t, ok, "evicted")
	resp, err := http.Get(url + "/sim/timeline?id=" + ids[4])
	require.NoError(t, err)
	var tl Timeline
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tl))
	resp.Body.Close()
	assert.Equal(t, ids[4], tl.ID)
	assert.True(t, tl.Simulated)
	assert.Equal(t, []int{1, 1, 1, 1, 1, 1, 1, 1}, tl.ChunkTokens)
	resp, err = http.Get(url + "/sim/timeline?id=chatcmpl-sim-999")
	require.NoError(t, err)
	assert.Equal(t, 404, resp.StatusCode)
	resp.Body.Close()
	resp, err = http.Get(url + "/sim/timelines")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Len(t, strings.Split(strings.TrimSpace(string(b)), "\n"), 3)
}

func TestStopStrings(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, fastConfig())
	body := map[string]any{"prompt": "x", "max_tokens": 50, "ignore_eos": true, "seed": 3}
	_, full, _ := postJSON(t, url+"/v1/completions", body)
	text := full["choices"].([]any)[0].(map[string]any)["text"].(string)
	ws := strings.Fields(text)
	stop := " " + ws[10] + " " + ws[11]
	want := text[:strings.Index(text, stop)]
	body["stop"] = []string{"never-appears", stop}
	_, cut, _ := postJSON(t, url+"/v1/completions", body)
	ch := cut["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, want, ch["text"])
	assert.Equal(t, "stop", ch["finish_reason"])
	assert.EqualValues(t, CountTokens(want), cut["usage"].(map[string]any)["completion_tokens"])
}

func TestScheduleLagIsReportedAndWarned(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	s, err := New(Config{FastMode: true, Logger: zap.New(core)})
	require.NoError(t, err)
	s.noteLag(int64(time.Millisecond)) // timer granularity: fine
	assert.Zero(t, logs.Len())
	s.noteLag(int64(40 * time.Millisecond))
	s.noteLag(int64(60 * time.Millisecond))
	assert.Equal(t, 1, logs.FilterMessageSnippet("behind its latency schedule").Len(), "warned once, rate-limited")
	rec := httptest.NewRecorder()
	s.handleMetrics(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := parseProm(t, rec.Body.String())
	assert.Equal(t, 3.0, m["sweepflow_sim_chunks_total"])
	assert.Equal(t, 2.0, m["sweepflow_sim_late_chunks_total"])
	assert.InDelta(t, 0.06, m["sweepflow_sim_max_schedule_lag_seconds"], 1e-9)
}

func TestSamplingDeterminism(t *testing.T) {
	t.Parallel()
	test := readGSM(t, gsm8kTestPath)
	_, url := startServer(t, Config{FastMode: true, GSM8KPath: gsm8kTestPath, Accuracy: 0.5, Seed: 3})
	answers := func(body map[string]any, n int) map[string]int {
		out := map[string]int{}
		for range n {
			_, m, _ := postJSON(t, url+"/v1/chat/completions", body)
			ch := m["choices"].([]any)[0].(map[string]any)
			out[ch["message"].(map[string]any)["content"].(string)]++
		}
		return out
	}
	q := func(temp any, seed any) map[string]any {
		b := map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Question: " + test[3].Question + "\nAnswer:"}}}}}
		if temp != nil {
			b["temperature"] = temp
		}
		if seed != nil {
			b["seed"] = seed
		}
		return b
	}
	assert.Len(t, answers(q(0, nil), 6), 1, "greedy decoding repeats itself")
	assert.Len(t, answers(q(0.8, 5), 6), 1, "a request seed makes sampling reproducible")
	right, wrong := 0, 0
	for text, n := range answers(q(0.8, nil), 16) {
		if strictOf(text) == gold(test[3]) {
			right += n
		} else {
			wrong += n
		}
	}
	assert.True(t, right > 0 && wrong > 0, "unseeded sampling at accuracy 0.5 is sometimes right (%d), sometimes wrong (%d)", right, wrong)
}

func FuzzCompletionBody(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"prompt":[1,2,3],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"Question: x\nAnswer:","stop":["a","b"],"ignore_eos":true,"max_tokens":4}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"n":1,"seed":-1,"temperature":2}`,
		`{"prompt":[[1]],"max_completion_tokens":1,"min_tokens":9}`,
		`{"prompt":null}`, `[]`, `{"messages":"x"}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	s, err := New(Config{FastMode: true, GSM8KPath: gsm8kTestPath, Accuracy: 0.9, DefaultMaxTokens: 16, ContextLength: 4096})
	require.NoError(f, err)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(body)))
		require.Contains(t, []int{200, 400, 404}, rec.Code, rec.Body.String())
		if rec.Code == 200 && !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			require.True(t, json.Valid(rec.Body.Bytes()))
		}
	})
}

// TestCatchUpGapsReported: the usage chunk says how many chunk gaps the
// stream wrote back to back because it was behind its schedule. On a 50 ms
// schedule none are; on a 1 µs one (shorter than a write) nearly every
// step is already due when the stream gets to it.
func TestCatchUpGapsReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		itl     time.Duration
		tokens  int
		atLeast float64 // fraction of the gaps
		atMost  float64
	}{
		{"on schedule", 50 * time.Millisecond, 6, 0, 0},
		{"behind", time.Microsecond, 200, 0.9, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url := startServer(t, Config{FastMode: true, FixedTTFT: 2 * time.Millisecond, FixedITL: tc.itl, Seed: 7})
			res := post(t, url+"/v1/chat/completions", chatBody(words(20, ""), tc.tokens, true))
			require.NoError(t, res.readErr)
			require.GreaterOrEqual(t, len(res.events), 3)
			usage := res.events[len(res.events)-2].json
			require.Contains(t, usage, "catch_up_gaps")
			got := usage["catch_up_gaps"].(float64)
			gaps := float64(tc.tokens - 1)
			assert.GreaterOrEqual(t, got, tc.atLeast*gaps)
			assert.LessOrEqual(t, got, tc.atMost*gaps)
		})
	}
}

// BenchmarkFastModeChunks measures how many SSE chunks per second the
// simulator's fast mode pushes over 127.0.0.1 to a minimal raw-TCP client
// that only counts events (so the figure is the server's, sharing the CPU
// with the cheapest possible reader). One op is one chunk (one token).
//
//	go test ./sim -run '^$' -bench FastModeChunks -benchtime 200000x
//
// The "paced" cases use a 10 ms ITL: at c1280 that is a target of 128k
// chunks/s, the load-generator capacity scenario.
func BenchmarkFastModeChunks(b *testing.B) {
	for _, bc := range []struct {
		name string
		conc int
		itl  time.Duration
	}{
		{"unpaced/c64", 64, 0},
		{"unpaced/c1280", 1280, 0},
		{"paced-10ms/c1280", 1280, 10 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := New(Config{FastMode: true, FixedITL: bc.itl, TimelineCapacity: 2 * bc.conc})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			addrc := make(chan string, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addrc <- a })
			}()
			addr := <-addrc
			defer func() { cancel(); <-done }()

			perStream := max(b.N/bc.conc, 1)
			body := fmt.Sprintf(`{"model":%q,"prompt":"bench","max_tokens":%d,"ignore_eos":true,"stream":true}`, DefaultModel, perStream)
			req := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", addr, len(body), body)
			var events atomic.Int64
			var wg sync.WaitGroup
			conns := make([]net.Conn, bc.conc)
			for i := range conns { // connect first so setup stays out of the timing
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				conns[i] = c
			}
			b.ResetTimer()
			start := time.Now()
			for _, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					if _, err := io.WriteString(c, req); err != nil {
						b.Error(err)
						return
					}
					events.Add(countEvents(bufio.NewReaderSize(c, 64<<10)) - 1) // minus [DONE]
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			got := events.Load()
			if want := int64(perStream * bc.conc); got != want {
				b.Fatalf("counted %d chunks, want %d", got, want)
			}
			b.ReportMetric(float64(got)/elapsed.Seconds(), "chunks/s")
		})
	}
}

// countEvents counts "data: " event starts in a raw HTTP response (the
// pattern does not overlap itself, so a one-index matcher works across reads).
func countEvents(r io.Reader) int64 {
	const pat = "data: "
	buf := make([]byte, 64<<10)
	var n int64
	j := 0
	for {
		k, err := r.Read(buf)
		for _, c := range buf[:k] {
			switch {
			case c == pat[j]:
				j++
				if j == len(pat) {
					n++
					j = 0
				}
			case c == pat[0]:
				j = 1
			default:
				j = 0
			}
		}
		if err != nil {
			return n
		}
	}
}

func TestFaultHealthFailWindow(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{FastMode: true, Faults: Faults{HealthFailFor: 300 * time.Millisecond}})
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	res := post(t, url+"/v1/chat/completions", chatBody("hi", 2, true))
	assert.Equal(t, 503, res.status, "completions refused while not ready")
	time.Sleep(350 * time.Millisecond)
	resp, err = http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 200, post(t, url+"/v1/chat/completions", chatBody("hi", 2, true)).status)
}

func TestFaultErrorStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		faults  Faults
		failing map[int]bool // 1-based request numbers
		status  int
	}{
		{"429 every 3rd", Faults{ErrorStatus: 429, ErrorEvery: 3}, map[int]bool{3: true, 6: true, 9: true}, 429},
		{"503 burst of 3 from request 2", Faults{ErrorBurstStart: 2, ErrorBurstLen: 3}, map[int]bool{2: true, 3: true, 4: true}, 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startServer(t, Config{FastMode: true, Faults: tc.faults})
			for n := 1; n <= 9; n++ {
				res := post(t, url+"/v1/chat/completions", chatBody("hi", 2, true))
				require.NoError(t, res.readErr)
				if tc.failing[n] {
					assert.Equal(t, tc.status, res.status, "request %d", n)
					assert.Contains(t, string(res.body), "fault injection")
					if tc.status == 429 {
						assert.Equal(t, "1", res.header.Get("Retry-After"))
					}
				} else {
					assert.Equal(t, 200, res.status, "request %d", n)
				}
			}
		})
	}
}

func TestFaultMidStreamError(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, Config{FastMode: true, Faults: Faults{MidStreamErrorEvery: 2}})
	ok := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	require.Equal(t, 200, ok.status)
	assert.Len(t, ok.events, 22)

	bad := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	require.NoError(t, bad.readErr)
	require.Equal(t, 200, bad.status, "the error arrives inside a 200 stream")
	n := len(bad.events)
	require.GreaterOrEqual(t, n, 3)
	assert.Equal(t, "[DONE]", bad.events[n-1].data)
	errEv := bad.events[n-2].json
	require.Contains(t, errEv, "error")
	assert.EqualValues(t, 500, errEv["error"].(map[string]any)["code"])
	tokens := 0
	for _, e := range bad.events[:n-2] {
		require.NotContains(t, e.json, "error")
		tokens += e.tokens()
	}
	assert.Equal(t, 10, tokens, "about half the reply came before the error")
	tl, found := s.Timeline(bad.events[0].json["id"].(string))
	require.True(t, found)
	assert.Contains(t, tl.Error, "fault injection")

	post(t, url+"/v1/chat/completions", chatBody("hi", 20, true)) // request 3
	status, m, _ := postJSON(t, url+"/v1/chat/completions", chatBody("hi", 20, false))
	assert.Equal(t, 500, status, "non-streaming request 4 fails with a 500")
	assert.Contains(t, m["error"].(map[string]any)["message"], "fault injection")
}

func TestFaultCutStream(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{FastMode: true, Faults: Faults{CutStreamEvery: 2}})
	ok := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	require.NoError(t, ok.readErr)
	require.Equal(t, 200, ok.status)
	assert.Len(t, ok.events, 22)

	cut := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	require.Equal(t, 200, cut.status, "the cut arrives inside a 200 stream")
	require.Error(t, cut.readErr, "the stream ends with a reset, not [DONE]")
	require.NotEmpty(t, cut.events, "about half the reply came before the cut")
	tokens := 0
	for _, e := range cut.events {
		assert.NotEqual(t, "[DONE]", e.data)
		require.NotContains(t, e.json, "error")
		tokens += e.tokens()
	}
	assert.Equal(t, 10, tokens, "about half the reply came before the cut")

	post(t, url+"/v1/chat/completions", chatBody("hi", 20, true)) // request 3
	body, err := json.Marshal(chatBody("hi", 20, false))
	require.NoError(t, err)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "non-streaming request 4 is reset before its body")
}

func TestFaultStall(t *testing.T) {
	t.Parallel()
	const stall = 150 * time.Millisecond
	s, url := startServer(t, Config{FastMode: true, FixedITL: time.Millisecond, TimeScale: 1, Faults: Faults{StallEvery: 2, StallFor: stall}})
	maxGap := func(res streamResult) time.Duration {
		tl, ok := s.Timeline(res.events[0].json["id"].(string))
		require.True(t, ok)
		var g time.Duration
		for i := 1; i < len(tl.ChunkNs); i++ {
			g = max(g, time.Duration(tl.ChunkNs[i]-tl.ChunkNs[i-1]))
		}
		return g
	}
	first := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	second := post(t, url+"/v1/chat/completions", chatBody("hi", 20, true))
	assert.Less(t, maxGap(first), stall/3)
	assert.GreaterOrEqual(t, maxGap(second), stall)
	assert.Len(t, second.events, 22, "a stalled stream still completes")
}

func TestFaultDieAfterResetsConnections(t *testing.T) {
	t.Parallel()
	s, url := startServer(t, Config{FastMode: true, FixedITL: 5 * time.Millisecond, Faults: Faults{DieAfter: 3}})
	for range 2 {
		assert.Equal(t, 200, post(t, url+"/v1/chat/completions", chatBody("hi", 2, true)).status)
	}
	// request 3 is a long stream still running when request 4 arrives
	long := make(chan streamResult, 1)
	go func() { long <- post(t, url+"/v1/chat/completions", chatBody("hi", 2000, true)) }()
	time.Sleep(50 * time.Millisecond)
	crash := post(t, url+"/v1/chat/completions", chatBody("hi", 2, true))
	require.Error(t, crash.readErr, "request 4 finds the engine gone")
	cut := <-long
	require.Error(t, cut.readErr, "the in-flight stream is cut")
	assert.Less(t, len(cut.events), 2000)
	select {
	case <-s.Dead():
	default:
		t.Fatal("Dead() not closed")
	}
	_, err := http.Get(url + "/health")
	assert.Error(t, err, "nothing is served after the crash")
}

func TestListenAndServeDieAndShutdown(t *testing.T) {
	t.Parallel()
	t.Run("die after returns ErrDied", func(t *testing.T) {
		s, err := New(Config{FastMode: true, Faults: Faults{DieAfter: 1}})
		require.NoError(t, err)
		addrc := make(chan string, 1)
		errc := make(chan error, 1)
		go func() { errc <- s.ListenAndServe(context.Background(), "127.0.0.1:0", func(a string) { addrc <- a }) }()
		url := "http://" + <-addrc
		assert.Equal(t, 200, post(t, url+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2}).status)
		assert.Error(t, post(t, url+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2}).readErr)
		select {
		case err := <-errc:
			assert.True(t, errors.Is(err, ErrDied), "got %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("ListenAndServe did not return")
		}
		_, err = http.Get(url + "/health")
		assert.Error(t, err, "listener closed")
	})
	t.Run("context cancel shuts down gracefully", func(t *testing.T) {
		s, err := New(Config{FastMode: true, FixedITL: 2 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		addrc := make(chan string, 1)
		errc := make(chan error, 1)
		go func() { errc <- s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addrc <- a }) }()
		url := "http://" + <-addrc
		inflight := make(chan streamResult, 1)
		go func() { inflight <- post(t, url+"/v1/chat/completions", chatBody("hi", 100, true)) }()
		time.Sleep(30 * time.Millisecond)
		cancel()
		res := <-inflight
		require.NoError(t, res.readErr, "the open stream finishes during shutdown")
		assert.Len(t, res.events, 102)
		require.NoError(t, <-errc)
		resp, err := http.Get(url + "/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("still serving after shutdown: %s", strings.TrimSpace(string(b)))
		}
	})
	t.Run("a connection without a request does not hold shutdown", func(t *testing.T) {
		s, err := New(Config{FastMode: true})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		addrc := make(chan string, 1)
		errc := make(chan error, 1)
		go func() { errc <- s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addrc <- a }) }()
		// A client's spare connection: dialled, never used. net/http's
		// Shutdown alone would wait 5 s for it.
		conn, err := net.Dial("tcp", <-addrc)
		require.NoError(t, err)
		defer conn.Close()
		time.Sleep(50 * time.Millisecond) // let the server accept it
		cancel()
		select {
		case err := <-errc:
			require.NoError(t, err)
		case <-time.After(4 * time.Second):
			t.Fatal("shutdown waited for a connection that never sent a request")
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF, "the server closed the idle new connection")
	})
}

func TestFaultZeroUsage(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{FastMode: true, Faults: Faults{ZeroUsage: true}})
	body := chatBody("hi", 20, true)
	body["stream_options"] = map[string]any{"include_usage": true, "continuous_usage_stats": true}
	r := post(t, url+"/v1/chat/completions", body)
	require.NoError(t, r.readErr)
	require.Equal(t, 200, r.status)
	tokens, usages := 0, 0
	for _, e := range r.events {
		tokens += e.tokens()
		if u, ok := e.json["usage"].(map[string]any); ok {
			usages++
			assert.Equal(t, 0.0, u["completion_tokens"], "usage counts nothing: %s", e.data)
			assert.Greater(t, u["prompt_tokens"], 0.0)
		}
	}
	assert.Equal(t, 20, tokens, "the reply itself is whole")
	assert.Greater(t, usages, 20, "usage on every chunk and at the end")

	status, got, _ := postJSON(t, url+"/v1/chat/completions", chatBody("hi", 20, false))
	require.Equal(t, 200, status)
	assert.Equal(t, 0.0, got["usage"].(map[string]any)["completion_tokens"])

	_, plain := startServer(t, Config{FastMode: true})
	_, got, _ = postJSON(t, plain+"/v1/chat/completions", chatBody("hi", 20, false))
	assert.Equal(t, 20.0, got["usage"].(map[string]any)["completion_tokens"], "without the fault usage counts the reply")
}

// The GSM8K fixture: problems written for sweepflow in GSM8K's format (see
// ../gsm8k/testdata/gsm8k/README.md). Reference tests read the real split through
// reftest.GSM8K instead.
const (
	gsm8kTestPath  = "../gsm8k/testdata/gsm8k/test.jsonl"
	gsm8kTrainPath = "../gsm8k/testdata/gsm8k/train.jsonl"
)

// synthGSM8K writes n distinct generated problems (our own, in GSM8K's
// format) for tests that measure a rate and need more questions than the
// fixture has.
func synthGSM8K(t testing.TB, n int) string { return gsm8kfixture.Split(t, n) }

// startServer runs the simulator behind a real 127.0.0.1 listener.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// sseEvent is one parsed "data:" event and when the client read it.
type sseEvent struct {
	data string
	at   time.Time
	json map[string]any
}

type streamResult struct {
	status  int
	header  http.Header
	events  []sseEvent
	body    []byte // non-SSE bodies
	sent    time.Time
	readErr error
}

// tokens in a chunk event (content + reasoning + text) by the simulator's rule.
func (e sseEvent) tokens() int {
	choices, _ := e.json["choices"].([]any)
	n := 0
	for _, c := range choices {
		cm := c.(map[string]any)
		if d, ok := cm["delta"].(map[string]any); ok {
			for _, k := range []string{"content", "reasoning_content"} {
				if s, ok := d[k].(string); ok {
					n += CountTokens(s)
				}
			}
		}
		if s, ok := cm["text"].(string); ok {
			n += CountTokens(s)
		}
	}
	return n
}

var testClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, DisableCompression: true}}

// post sends body to url and parses an SSE stream if one comes back.
func post(t testing.TB, url string, body any) streamResult {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	res := streamResult{sent: time.Now()}
	resp, err := testClient.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		res.readErr = err
		return res
	}
	defer resp.Body.Close()
	res.status, res.header = resp.StatusCode, resp.Header
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res.body, res.readErr = io.ReadAll(resp.Body)
		return res
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err != io.EOF {
				res.readErr = err
			}
			return res
		}
		line = strings.TrimRight(line, "\r\n")
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		ev := sseEvent{data: strings.TrimPrefix(line, "data: "), at: time.Now()}
		if ev.data != "[DONE]" {
			require.NoError(t, json.Unmarshal([]byte(ev.data), &ev.json), "chunk is not JSON: %s", ev.data)
		}
		res.events = append(res.events, ev)
	}
}

// postJSON sends a non-streaming request and decodes the body.
func postJSON(t testing.TB, url string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	res := post(t, url, body)
	require.NoError(t, res.readErr)
	var m map[string]any
	require.NoError(t, json.Unmarshal(res.body, &m), "body: %s", res.body)
	return res.status, m, res.header
}

// words builds a prompt of n tokens.
func words(n int, salt string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(salt)
		b.WriteString(fillerWords[i%len(fillerWords)])
	}
	return b.String()
}

// runConcurrent sends n requests from c workers and returns the results.
func runConcurrent(t testing.TB, c, n int, mk func(i int) (string, any)) []streamResult {
	t.Helper()
	out := make([]streamResult, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				url, body := mk(i)
				out[i] = post(t, url, body)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func chatBody(prompt string, maxTokens int, stream bool) map[string]any {
	b := map[string]any{
		"model":      DefaultModel,
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
		"stream":     stream,
		"ignore_eos": true,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// postWarmup sends a non-streaming request marked as a warmup and returns
// the decoded body and how long it took.
func postWarmup(t *testing.T, url string, body any) (map[string]any, time.Duration) {
	return postMarked(t, url, WarmupHeader, body)
}

// postMarked sends a non-streaming request with header set to "1".
func postMarked(t *testing.T, url, header string, body any) (map[string]any, time.Duration) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, "1")
	t0 := time.Now()
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	took := time.Since(t0)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m, took
}

func usageOf(t *testing.T, m map[string]any) (completion, cached float64) {
	t.Helper()
	u := m["usage"].(map[string]any)
	return u["completion_tokens"].(float64), u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
}

// A warmup request (WarmupHeader) runs the same model on the compressed
// warmup clock: the same reply, a fraction of the time, and it leaves the
// prefix cache as a request on the server's clock would, so the measured
// request after it hits. It stays out of the latency histograms.
func TestWarmupRequestsRunOnTheWarmupClock(t *testing.T) {
	s, url := startServer(t, Config{Deployment: mustDeployment(t, "TP8 agg"), Seed: 7})
	assert.Equal(t, DefaultWarmupTimeScale, s.Config().WarmupTimeScale)
	prompt := words(40_000, "w")
	// Model time: prefill 40k tokens at 8 GPUs x 25k x 0.8 (~0.3 s with the
	// quadratic term) plus 300 decode steps of ~8 ms: ~2.7 s.
	body := chatBody(prompt, 300, false)

	warm, took := postWarmup(t, url+"/v1/chat/completions", body)
	n, cached := usageOf(t, warm)
	assert.Equal(t, 300.0, n, "a warmup gets its whole reply")
	assert.Zero(t, cached)
	assert.Less(t, took, time.Second, "a warmup runs on the compressed clock (model ~2.7 s)")

	t0 := time.Now()
	status, meas, _ := postJSON(t, url+"/v1/chat/completions", body)
	measured := time.Since(t0)
	require.Equal(t, http.StatusOK, status)
	n, cached = usageOf(t, meas)
	assert.Equal(t, 300.0, n)
	assert.Greater(t, cached, 39_000.0, "the warmup left its prompt in the prefix cache")
	assert.Greater(t, measured, 2*time.Second, "a measured request stays on the server's clock")

	res, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	text, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(text), "sweepflow_sim_warmup_requests_total 1\n")
	assert.True(t, strings.Contains(string(text), `sglang:e2e_request_latency_seconds_count{model_name="`+DefaultModel+`"} 1`),
		"only the measured request is in the histogram:\n%s", text)
}

func TestWarmupTimeScaleIsChecked(t *testing.T) {
	_, err := New(Config{WarmupTimeScale: 2})
	require.Error(t, err)
	s, err := New(Config{WarmupTimeScale: 1})
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Config().WarmupTimeScale)
}

// An accuracy-eval request (EvalHeader, which the GSM8K client sends) gets
// the same reply on the warmup clock and stays out of the histograms.
func TestEvalRequestsRunOnTheWarmupClock(t *testing.T) {
	_, url := startServer(t, Config{Deployment: mustDeployment(t, "TP8 agg"), Seed: 7})
	body := chatBody(words(40_000, "w"), 300, false)
	ev, took := postMarked(t, url+"/v1/chat/completions", EvalHeader, body)
	n, _ := usageOf(t, ev)
	assert.Equal(t, 300.0, n, "an eval request gets its whole reply")
	assert.Less(t, took, time.Second, "an eval request runs on the compressed clock (model ~2.7 s)")

	res, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	text, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(text), "sweepflow_sim_eval_requests_total 1\n")
	assert.Contains(t, string(text), `sglang:e2e_request_latency_seconds_count{model_name="`+DefaultModel+`"} 0`,
		"the eval request is not in the latency histogram")
}
