package gsm8k

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SimulatedHeader and SimulatedFingerprint are how sweepflow's simulator
// marks its responses; results built from them are flagged "simulated".
const (
	SimulatedHeader      = "X-Sweepflow-Simulated"
	SimulatedFingerprint = "sweepflow-simulated"
	// EvalHeader marks every eval request: sweepflow's simulator serves it
	// on its compressed warmup clock, since an answer does not depend on
	// time (sim.EvalHeader); a real engine ignores it.
	EvalHeader = "X-Sweepflow-Eval"
)

// maxBackoff caps the wait between retries (lm-eval's wait_exponential max).
const maxBackoff = 10 * time.Second

// endpoint joins a base URL and an OpenAI path. Accepts "http://h:p",
// "http://h:p/v1" or a full ".../completions" URL.
func endpoint(base string, chat bool) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/completions") {
		return base
	}
	p := "/completions"
	if chat {
		p = "/chat/completions"
	}
	if strings.HasSuffix(base, "/v1") {
		return base + p
	}
	return base + "/v1" + p
}

type apiRequest struct {
	Model       string    `json:"model"`
	Prompt      string    `json:"prompt,omitempty"`
	Messages    []Message `json:"messages,omitempty"`
	MaxTokens   int       `json:"max_tokens"`
	Temperature float64   `json:"temperature"`
	TopP        *float64  `json:"top_p,omitempty"`
	Stop        []string  `json:"stop,omitempty"`
	Seed        int64     `json:"seed"`
	Stream      bool      `json:"stream"`
}

type apiResponse struct {
	Choices []struct {
		Text    string `json:"text"`
		Message *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	SystemFingerprint string `json:"system_fingerprint"`
}

// reply is one successful generation.
type reply struct {
	text          string
	finishReason  string
	usedReasoning bool
	simulated     bool
}

// attemptError classifies a failed attempt as worth retrying or not.
type attemptError struct {
	err        error
	retryable  bool
	retryAfter time.Duration
}

func (e *attemptError) Error() string { return e.err.Error() }

type client struct {
	http      *http.Client
	model     string
	apiKey    string
	base      string
	seed      int64
	topP      *float64
	timeout   time.Duration
	retries   int
	backoff   time.Duration
	sleepFunc func(ctx context.Context, d time.Duration) error
}

// generate sends one prompt, retrying 429, 5xx, timeouts and network errors
// with exponential backoff. It returns the attempts made.
func (c *client) generate(ctx context.Context, p Prompt) (reply, int, error) {
	body := apiRequest{Model: c.model, MaxTokens: p.MaxTokens, Temperature: 0, TopP: c.topP, Stop: p.Stop, Seed: c.seed}
	if p.Chat() {
		body.Messages = p.Messages
	} else {
		body.Prompt = p.Text
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return reply{}, 0, err
	}
	url := endpoint(c.base, p.Chat())
	var last error
	for attempt := 0; ; attempt++ {
		r, err := c.once(ctx, url, buf, p.Chat())
		if err == nil {
			return r, attempt + 1, nil
		}
		last = err
		var ae *attemptError
		if ctx.Err() != nil || !errors.As(err, &ae) || !ae.retryable || attempt >= c.retries {
			return reply{}, attempt + 1, last
		}
		d := c.backoff << attempt
		if d > maxBackoff || d <= 0 {
			d = maxBackoff
		}
		d += time.Duration(rand.Int64N(int64(d)/5 + 1)) // jitter so retries do not arrive in lockstep
		if ae.retryAfter > d {
			d = min(ae.retryAfter, maxBackoff)
		}
		if err := c.sleepFunc(ctx, d); err != nil {
			return reply{}, attempt + 1, last
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *client) once(parent context.Context, url string, buf []byte, chat bool) (reply, error) {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		return reply{}, &attemptError{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(EvalHeader, "1")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Network errors and our own per-request timeout are transient; the
		// caller's cancellation is not (generate checks ctx first).
		return reply{}, &attemptError{err: err, retryable: true}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, &attemptError{err: fmt.Errorf("reading response: %w", err), retryable: true}
	}
	if resp.StatusCode != http.StatusOK {
		ae := &attemptError{err: fmt.Errorf("HTTP %s: %s", resp.Status, snippet(data))}
		ae.retryable = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ae.retryAfter = time.Duration(s) * time.Second
		}
		return reply{}, ae
	}
	var ar apiResponse
	if err := json.Unmarshal(data, &ar); err != nil {
		return reply{}, &attemptError{err: fmt.Errorf("bad response JSON: %v: %s", err, snippet(data))}
	}
	if len(ar.Choices) == 0 {
		return reply{}, &attemptError{err: fmt.Errorf("response has no choices: %s", snippet(data))}
	}
	ch := ar.Choices[0]
	r := reply{
		finishReason: ch.FinishReason,
		simulated:    strings.EqualFold(resp.Header.Get(SimulatedHeader), "true") || ar.SystemFingerprint == SimulatedFingerprint,
	}
	if !chat {
		r.text = ch.Text
		return r, nil
	}
	if ch.Message == nil {
		return reply{}, &attemptError{err: fmt.Errorf("chat response has no message: %s", snippet(data))}
	}
	if ch.Message.Content != nil {
		r.text = *ch.Message.Content
	}
	// InferenceX's sitecustomize patch: a thinking model whose final answer
	// stayed in the reasoning channel is scored on that text.
	if r.text == "" {
		for _, alt := range []*string{ch.Message.ReasoningContent, ch.Message.Reasoning} {
			if alt != nil && *alt != "" {
				r.text, r.usedReasoning = *alt, true
				break
			}
		}
	}
	return r, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
