package sim

import (
	"net/http"
	"strconv"

	"github.com/sweepflow/sweepflow/internal/jsonesc"
)

// sseWriter writes one request's SSE stream. The constant head of every
// chunk is encoded once per request and each chunk is assembled in a reused
// buffer, so a chunk costs one Write and one Flush (one syscall) and no
// allocation.
type sseWriter struct {
	w          http.ResponseWriter
	fl         http.Flusher
	chat       bool
	head       []byte // `data: {"id":…,"system_fingerprint":"sweepflow-simulated"`
	buf        []byte
	prompt     int
	continuous bool
	sent       int // tokens sent so far
	// zeroCompletion reports 0 completion tokens in usage (Faults.ZeroUsage).
	zeroCompletion bool
}

func newSSEWriter(w http.ResponseWriter, id, object string, created int64, model string, chat bool, prompt int, continuous bool) *sseWriter {
	fl, _ := w.(http.Flusher)
	h := make([]byte, 0, 160+len(model))
	h = append(h, `data: {"id":"`...)
	h = appendEscaped(h, id)
	h = append(h, `","object":"`...)
	h = append(h, object...)
	h = append(h, `","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":"`...)
	h = appendEscaped(h, model)
	h = append(h, `","system_fingerprint":"`+Fingerprint+`"`...)
	return &sseWriter{w: w, fl: fl, chat: chat, head: h, buf: make([]byte, 0, 512), prompt: prompt, continuous: continuous}
}

func (s *sseWriter) flush() {
	if s.fl != nil {
		s.fl.Flush()
	}
}

// send writes buf and flushes it to the socket.
func (s *sseWriter) send() error {
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	s.flush()
	return nil
}

func (s *sseWriter) raw(text string) error {
	s.buf = append(s.buf[:0], text...)
	return s.send()
}

// tokens sends pieces[i:i+k] as one chunk. The first chunk also carries the
// role and the last the finish_reason, so every chunk has tokens and the
// TTFT definitions of vLLM (first chunk) and SGLang (first text) agree.
func (s *sseWriter) tokens(plan outputPlan, i, k int, last bool) error {
	b := append(s.buf[:0], s.head...)
	b = append(b, `,"choices":[{"index":0,`...)
	if s.chat {
		b = append(b, `"delta":{`...)
		if i == 0 {
			b = append(b, `"role":"assistant",`...)
		}
		r := min(max(plan.reasoning-i, 0), k) // reasoning tokens in this chunk
		if r > 0 {
			b = append(b, `"reasoning_content":"`...)
			for _, p := range plan.pieces[i : i+r] {
				b = appendEscaped(b, p)
			}
			b = append(b, '"')
			if r < k {
				b = append(b, ',')
			}
		}
		if r < k || k == 0 {
			b = append(b, `"content":"`...)
			for _, p := range plan.pieces[i+r : i+k] {
				b = appendEscaped(b, p)
			}
			b = append(b, '"')
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `"text":"`...)
		for _, p := range plan.pieces[i : i+k] {
			b = appendEscaped(b, p)
		}
		b = append(b, `","logprobs":null,"finish_reason":`...)
	}
	if last {
		b = append(b, '"')
		b = append(b, plan.finish...)
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `}],"usage":`...)
	s.sent += k
	if s.continuous {
		counted := s.sent
		if s.zeroCompletion {
			counted = 0
		}
		b = appendUsage(b, s.prompt, counted, -1)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}\n\n"...)
	s.buf = b
	return s.send()
}

// finish sends the usage chunk (choices: []) when asked for, then [DONE].
// The usage chunk also says how many chunk gaps the stream wrote as a
// catch-up (catch_up_gaps), so a client can tell the simulator's lag from
// its own.
func (s *sseWriter) finish(u usageBlock, catchUps int, includeUsage bool) error {
	b := s.buf[:0]
	if includeUsage {
		b = append(b, s.head...)
		b = append(b, `,"choices":[],"usage":`...)
		b = appendUsage(b, u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens)
		b = append(b, `,"catch_up_gaps":`...)
		b = strconv.AppendInt(b, int64(catchUps), 10)
		b = append(b, `,"simulated":true}`+"\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	s.buf = b
	return s.send()
}

// appendUsage writes a usage object; cached < 0 leaves out the details.
func appendUsage(b []byte, prompt, completion, cached int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	if cached >= 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendEscaped appends s as the inside of a JSON string.
func appendEscaped(b []byte, s string) []byte { return jsonesc.Append(b, s) }
