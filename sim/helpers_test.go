package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
)

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
