package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
