package gsm8k

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
