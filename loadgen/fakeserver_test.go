package loadgen

import (
	"encoding/json"
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
)

// fakeServer is a small OpenAI-compatible streaming server for tests that
// must not depend on the simulator: fixed TTFT/ITL, k tokens per chunk, and
// injectable faults.
type fakeServer struct {
	ttft, itl       time.Duration
	tokensPerChunk  int
	continuousUsage bool
	completions     bool // serve /v1/completions shape
	// fault, if set, picks a behaviour for the n-th request (1-based):
	// "" normal, "http500", "stream_error", "empty", "no_usage", "comments",
	// "buffered" (nothing flushed before the stream ends, as a buffering
	// proxy delivers it), "pairs" (token chunks written two at a time, the
	// second right behind the first: a server behind its schedule),
	// "pairs_reported" (the same, and the usage chunk says so in
	// catch_up_gaps, as the simulator does).
	fault func(n int, body map[string]any) string

	srv      *httptest.Server
	n        atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	warmups  atomic.Int64 // requests marked with WarmupHeader
	mu       sync.Mutex
	bodies   []map[string]any
	raw      [][]byte // request bodies as received, in arrival order
	conns    map[string]bool
}

func newFakeServer(t *testing.T, f *fakeServer) *fakeServer {
	t.Helper()
	if f.tokensPerChunk == 0 {
		f.tokensPerChunk = 1
	}
	f.conns = map[string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("/v1/chat/completions", f.handle)
	mux.HandleFunc("/v1/completions", f.handle)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns[c.RemoteAddr().String()] = true
			f.mu.Unlock()
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) URL() string { return f.srv.URL }

func (f *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := int(f.n.Add(1))
	if r.Header.Get(WarmupHeader) != "" {
		f.warmups.Add(1)
	}
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxIn.Load()
		if cur <= m || f.maxIn.CompareAndSwap(m, cur) {
			break
		}
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.raw = append(f.raw, raw)
	f.mu.Unlock()
	mode := ""
	if f.fault != nil {
		mode = f.fault(n, body)
	}
	if mode == "http500" {
		http.Error(w, `{"error":{"message":"overloaded"}}`, 503)
		return
	}
	prompt := 0
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			prompt += CountTokens([]byte(m.(map[string]any)["content"].(string)))
		}
	} else if p, ok := body["prompt"].(string); ok {
		prompt = CountTokens([]byte(p))
	}
	maxTokens := int(body["max_tokens"].(float64))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set(SimulatedHeader, "true")
	fl := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-test-%d", n)
	pairs := mode == "pairs" || mode == "pairs_reported"
	held, catchUps := false, 0 // pairs: a token chunk written and not flushed
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		if mode != "buffered" && !held {
			fl.Flush()
		}
	}
	if mode == "comments" {
		fmt.Fprint(w, ": ping\n\n")
	}
	if !f.completions {
		send(fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, id))
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if !sleep(f.ttft) {
		return
	}
	if mode == "empty" {
		send("[DONE]")
		return
	}
	done := 0
	for done < maxTokens {
		if done > 0 && held {
			catchUps++
		} else if done > 0 && !sleep(f.itl) {
			return
		}
		held = pairs && !held
		k := min(f.tokensPerChunk, maxTokens-done)
		text := strings.Repeat(" tok", k)
		done += k
		usage := "null"
		if f.continuousUsage {
			usage = fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d}`, prompt, done)
		}
		if f.completions {
			send(fmt.Sprintf(`{"id":%q,"object":"text_completion","choices":[{"index":0,"text":%q}],"usage":%s}`, id, text, usage))
		} else {
			send(fmt.Sprintf(`{"id":%q,"choices":[{"index":0,"delta":{"content":%q}}],"usage":%s}`, id, text, usage))
		}
		if mode == "stream_error" && done >= 2 {
			send(`{"error":{"message":"engine died","type":"InternalServerError","code":504}}`)
			send("[DONE]")
			return
		}
	}
	held = false
	send(fmt.Sprintf(`{"id":%q,"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, id))
	reported := ""
	if mode == "pairs_reported" {
		reported = fmt.Sprintf(`,"catch_up_gaps":%d`, catchUps)
	}
	if mode != "no_usage" {
		send(fmt.Sprintf(`{"id":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}%s}`, id, prompt, done, reported))
	}
	send("[DONE]")
}

func (f *fakeServer) requestBodies() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func (f *fakeServer) rawBodies() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.raw...)
}

func (f *fakeServer) connCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}
