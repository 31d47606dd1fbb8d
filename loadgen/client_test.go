package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server may answer before it has read the whole request body, so Do
// returns while the transport still writes it. do hands the body back
// only when that write is over: the server receives every byte of the
// request and none of what the caller puts in the buffer afterwards. Not
// parallel: it moves 16 MB, which would slow timing-sensitive tests.
func TestClientBodyHandedBackAfterTheWrite(t *testing.T) {
	type received struct {
		n     int
		stale bool // bytes written into the buffer after it was handed back
	}
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			panic(err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond) // Do has returned by now
		b, _ := io.ReadAll(r.Body)
		got <- received{n: len(b), stale: bytes.IndexByte(b, 'X') >= 0}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)

	// Larger than the loopback socket buffers: the write is still under
	// way when the response headers arrive.
	body := bytes.Repeat([]byte("a"), 16<<20)
	c := &client{hc: &http.Client{Transport: newTransport(1)}, url: srv.URL, timeout: time.Minute, epoch: time.Now()}
	var sent atomic.Int32
	var rec RequestRecord
	c.do(context.Background(), c.newConn(), body, &rec, func() {
		sent.Add(1)
		for i := range body {
			body[i] = 'X' // the next request's body
		}
	})
	r := <-got
	assert.Equal(t, int32(1), sent.Load())
	assert.False(t, r.stale, "the transport sent bytes of the reused buffer")
	assert.Equal(t, len(body), r.n, "the whole body arrived")
	assert.Equal(t, http.StatusOK, rec.Status)
	assert.Positive(t, rec.WrittenNs)
}

// Every way a request ends hands its body back exactly once: a refused
// connection, an HTTP error and a success.
func TestClientBodyHandedBackOnce(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, &fakeServer{fault: func(n int, _ map[string]any) string {
		if n == 1 {
			return "http500"
		}
		return ""
	}})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`)
	for _, tc := range []struct {
		url  string
		kind string
	}{
		{"http://127.0.0.1:1/v1/chat/completions", ErrKindTransport},
		{srv.URL() + "/v1/chat/completions", ErrKindHTTP},
		{srv.URL() + "/v1/chat/completions", ""},
	} {
		c := &client{hc: &http.Client{Transport: newTransport(1)}, url: tc.url, timeout: time.Minute, epoch: time.Now()}
		var sent atomic.Int32
		var rec RequestRecord
		c.do(context.Background(), c.newConn(), body, &rec, func() { sent.Add(1) })
		require.Equal(t, tc.kind, rec.ErrorKind, rec.Error)
		assert.Eventually(t, func() bool { return sent.Load() == 1 }, time.Second, time.Millisecond, tc.url)
		time.Sleep(10 * time.Millisecond)
		assert.Equal(t, int32(1), sent.Load(), "handed back once")
	}
}
