package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
