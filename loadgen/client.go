package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sweepflow/sweepflow/loadgen/sse"
)

// SimulatedHeader and SimulatedFingerprint are how the sweepflow simulator
// marks its responses; results derived from them are flagged "simulated".
const (
	SimulatedHeader      = "X-Sweepflow-Simulated"
	SimulatedFingerprint = "sweepflow-simulated"
)

// WarmupHeader marks warmup requests (excluded from every figure). A real
// engine ignores it; the sweepflow simulator serves them on a compressed
// clock, since nothing measures them (sim.WarmupHeader).
const WarmupHeader = "X-Sweepflow-Warmup"

// idleConnTimeout stays below common server keep-alives (uvicorn: 5 s) so the
// client never reuses a connection the server is about to close.
const idleConnTimeout = 4 * time.Second

// newTransport returns the one transport a run shares: sized to the
// concurrency so no request ever waits for a connection and every connection
// is reused, HTTP/1.1, no compression, no proxy (a benchmark must measure the
// server, not a proxy), and no client-wide timeout (per-request contexts
// bound each request instead).
func newTransport(concurrency int) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          concurrency,
		MaxIdleConnsPerHost:   concurrency,
		MaxConnsPerHost:       concurrency,
		IdleConnTimeout:       idleConnTimeout,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		ReadBufferSize:        32 << 10,
		WriteBufferSize:       32 << 10,
		ResponseHeaderTimeout: 0,
	}
}

// errStreamCut is how a cut stream's read fails (Options.CutStreamsAfter).
var errStreamCut = errors.New("read: connection reset by peer (stream cut by a chaos run)")

// cutTransport cuts every response stream that starts after from: its body
// fails after the first read (Options.CutStreamsAfter).
type cutTransport struct {
	next http.RoundTripper
	from time.Time
}

func (t *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && time.Now().After(t.from) {
		resp.Body = &cutBody{ReadCloser: resp.Body}
	}
	return resp, err
}

type cutBody struct {
	io.ReadCloser
	read bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.read {
		return 0, errStreamCut
	}
	b.read = true
	return b.ReadCloser.Read(p)
}

// client issues streaming completion requests and measures them.
type client struct {
	hc      *http.Client
	url     string
	timeout time.Duration
	epoch   time.Time // phase start; all record times are relative to it
}

func (c *client) now() int64 { return int64(time.Since(c.epoch)) }

// conn is a worker's reusable per-stream state, so the hot path allocates
// nothing per chunk.
type conn struct {
	rd     *sse.Reader
	p      sse.Parser
	ch     sse.Chunk
	body   []byte
	text   []byte
	cum    []int32 // cumulative usage.completion_tokens per token chunk
	errBuf [512]byte
}

func (c *client) newConn() *conn {
	return &conn{rd: sse.NewReader(nil, time.Time{})}
}

// reqTrace is one request's httptrace hooks. The transport's write loop
// reports the write, possibly after Do has returned (a timeout, a server
// that answers before reading the whole body), so each request has its
// own, its figures are atomics and do copies them into the record when the
// request is over.
//
// It also tells when the transport is done with the request body. The
// transport reads the body only while it writes the request on a
// connection it got (GotConn), and reports the end of every such write,
// complete or failed (WroteRequest); a retry or redirect inside Do takes
// another connection and writes again. So holds counts Do plus the writes
// under way, and sent runs when it drops to zero: after Do has returned
// and the last write ended. A connection handed out but never written on
// keeps its hold, and the body is then left to the garbage collector.
type reqTrace struct {
	ct      httptrace.ClientTrace
	newConn atomic.Bool
	written atomic.Int64
	holds   atomic.Int64
	sent    func()
}

func (c *client) newTrace(sent func()) *reqTrace {
	t := &reqTrace{sent: sent}
	t.holds.Store(1) // Do's
	t.ct = httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			t.holds.Add(1)
			t.newConn.Store(!info.Reused)
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			t.written.Store(c.now())
			t.drop()
		},
	}
	return t
}

func (t *reqTrace) drop() {
	if t.holds.Add(-1) == 0 && t.sent != nil {
		t.sent()
	}
}

// do sends one request and fills rec. runCtx is the run's context: its
// cancellation marks the request "canceled" rather than "timeout". sent,
// if set, is called once the transport is done with body (see reqTrace),
// usually before the first token, possibly from the transport's goroutine
// and possibly after do returns; the caller may reuse body from then on.
func (c *client) do(runCtx context.Context, w *conn, body []byte, rec *RequestRecord, sent func()) {
	rec.FirstTokenNs, rec.LastTokenNs = -1, -1
	ctx, cancel := context.WithTimeout(runCtx, c.timeout)
	defer cancel()
	// The trace splits client-side send overhead (pool wait, write) from
	// the server's time, notes whether a pooled connection was reused and
	// tells when body is free.
	tr := c.newTrace(sent)
	defer func() {
		rec.NewConnection, rec.WrittenNs = tr.newConn.Load(), tr.written.Load()
		rec.EndNs = c.now()
		rec.finish()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		tr.drop()
		rec.ErrorKind, rec.Error = ErrKindTransport, err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if rec.Warmup {
		req.Header.Set(WarmupHeader, "1")
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, &tr.ct))
	rec.SendNs = c.now()
	resp, err := c.hc.Do(req)
	tr.drop()
	if err != nil {
		c.fail(runCtx, ctx, rec, err)
		return
	}
	rec.Status = resp.StatusCode
	if v := resp.Header.Get(SimulatedHeader); v != "" && v != "false" && v != "0" {
		rec.Simulated = true
	}
	if resp.StatusCode != http.StatusOK {
		n, _ := io.ReadFull(resp.Body, w.errBuf[:])
		rec.ErrorKind = ErrKindHTTP
		rec.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, oneLine(w.errBuf[:n]))
		drain(resp.Body)
		return
	}
	c.stream(runCtx, ctx, w, resp.Body, rec)
	drain(resp.Body)
}

// stream reads the SSE body. Each chunk's time is when the Read that
// completed it returned, taken before any parsing.
func (c *client) stream(runCtx, ctx context.Context, w *conn, body io.Reader, rec *RequestRecord) {
	w.rd.Reset(body, c.epoch)
	w.cum = w.cum[:0]
	allUsage := true
	var lastTokenRead uint64
	for {
		ev, err := w.rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			c.fail(runCtx, ctx, rec, err)
			break
		}
		d := ev.Data
		if len(d) == 6 && string(d) == "[DONE]" {
			break
		}
		ch := &w.ch
		if perr := w.p.Parse(d, ch); perr != nil {
			rec.ErrorKind = ErrKindBadChunk
			rec.Error = fmt.Sprintf("%v in %q", perr, clip(d, 200))
			break
		}
		if ch.IsError || string(ev.Type) == "error" {
			rec.ErrorKind = ErrKindStreamError
			msg := ch.Error
			if len(msg) == 0 {
				msg = d
			}
			rec.Error = oneLine(clip(msg, 500))
			break
		}
		if rec.ResponseID == "" && len(ch.ID) > 0 {
			rec.ResponseID = string(ch.ID)
		}
		if !rec.Simulated && string(ch.SystemFingerprint) == SimulatedFingerprint {
			rec.Simulated = true
		}
		if ch.HasToken() {
			if len(rec.ChunkNs) > 0 && ev.Read == lastTokenRead {
				rec.UnseenGaps++
			}
			lastTokenRead = ev.Read
			rec.ChunkNs = append(rec.ChunkNs, ev.At)
			k := CountTokens(ch.Content) + CountTokens(ch.Reasoning)
			rec.ChunkTokens = append(rec.ChunkTokens, int32(max(k, 1)))
			if ch.HasUsage {
				w.cum = append(w.cum, int32(ch.CompletionTokens))
			} else {
				allUsage = false
			}
		}
		if ch.CatchUpGaps > 0 {
			rec.CatchUpGaps = ch.CatchUpGaps
		}
		if ch.HasUsage {
			rec.usageSeen = true
			rec.PromptTokens = ch.PromptTokens
			rec.CompletionTokens = ch.CompletionTokens
			rec.CachedTokens = ch.CachedTokens
		}
	}
	n := len(rec.ChunkNs)
	if n == 0 {
		return
	}
	rec.FirstTokenNs, rec.LastTokenNs = rec.ChunkNs[0], rec.ChunkNs[n-1]
	rec.TokenCountSource = "text"
	// Cumulative usage on every token chunk (vLLM continuous_usage_stats)
	// gives exact per-chunk counts; use it when it is present and monotonic.
	if allUsage && len(w.cum) == n {
		prev := int32(0)
		ok := true
		for _, v := range w.cum {
			if v <= prev {
				ok = false
				break
			}
			prev = v
		}
		if ok {
			prev = 0
			for i, v := range w.cum {
				rec.ChunkTokens[i] = v - prev
				prev = v
			}
			rec.TokenCountSource = "usage"
		}
	}
}

// fail classifies a transport-level error.
func (c *client) fail(runCtx, ctx context.Context, rec *RequestRecord, err error) {
	switch {
	case runCtx.Err() != nil:
		rec.ErrorKind = ErrKindCanceled
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		rec.ErrorKind = ErrKindTimeout
	default:
		rec.ErrorKind = ErrKindTransport
	}
	rec.Error = err.Error()
}

// drain reads what is left of a body (bounded) and closes it, so the
// connection goes back to the pool.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<20))
	_ = body.Close()
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func oneLine(b []byte) string {
	return strings.Join(strings.Fields(string(b)), " ")
}
