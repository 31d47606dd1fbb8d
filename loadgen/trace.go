package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Trace is one agentic session in the public AgentX corpus format
// (semianalysisai/cc-traces-weka-*, as replayed by aiperf's
// inferencex-agentx-mvp scenario): a recorded Claude Code session whose
// requests carry token counts and KV-block hash ids instead of text.
//
// Field meanings, from the corpus and aiperf's Weka loader:
//   - id: the session's name, unique in a file.
//   - models: the models the session used (informational; loadgen sends every
//     request to the one model it serves).
//   - block_size: tokens per hash_ids block (64 in the corpus).
//   - hash_id_scope: "local" (the corpus): hash ids are a per-session
//     namespace, so equal ids are equal text only inside one session;
//     "global": equal ids are equal text across sessions.
//   - system_tokens, tool_tokens: the declared system prompt and tool
//     definitions that open the first request (0 or absent: unknown).
//   - requests: the session's API calls in time order.
type Trace struct {
	ID           string    `json:"id"`
	Models       []string  `json:"models,omitempty"`
	BlockSize    int       `json:"block_size"`
	HashIDScope  string    `json:"hash_id_scope,omitempty"`
	SystemTokens int       `json:"system_tokens,omitempty"`
	ToolTokens   int       `json:"tool_tokens,omitempty"`
	Requests     []Request `json:"requests"`
}

// Request is one entry of Trace.Requests:
//   - t: when the call started, seconds from the session start (subagent
//     requests too: the published corpus stores absolute session times);
//   - type: "n" (a call) or "s" (a streaming call), replayed alike, or
//     "subagent": a nested helper conversation whose own calls are in
//     requests; the parent's next call waits for it;
//   - model: the recorded model (main agent or, e.g., a Haiku subagent);
//   - in: the call's whole prompt in tokens (context included); out: the
//     tokens it generated, sent as max_tokens with ignore_eos;
//   - hash_ids: one id per block_size tokens of the prompt, the last block
//     possibly partial: a prompt that shares its leading ids with an earlier
//     one shares that prefix, which is how the session's context reuse (and
//     a prefix cache's hits) are recorded;
//   - api_time: how long the recorded call took, seconds; think_time: the
//     recorded client-side wait before it (informational).
//
// Fields loadgen does not use (input_types, stop, ...) are ignored.
type Request struct {
	T         float64   `json:"t"`
	Type      string    `json:"type"`
	Model     string    `json:"model,omitempty"`
	In        int       `json:"in,omitempty"`
	Out       int       `json:"out,omitempty"`
	HashIDs   []int64   `json:"hash_ids,omitempty"`
	APITime   float64   `json:"api_time,omitempty"`
	ThinkTime float64   `json:"think_time,omitempty"`
	Requests  []Request `json:"requests,omitempty"`
}

// Request types.
const (
	ReqNormal    = "n"
	ReqStreaming = "s"
	ReqSubagent  = "subagent"
)

// CorpusBlockSize is the corpus's hash block: 64 tokens.
const CorpusBlockSize = 64

// IsCall reports whether r is an API call rather than a subagent entry.
func (r *Request) IsCall() bool { return r.Type != ReqSubagent }

// ParseTrace reads traces in the corpus format: JSONL (one trace per line,
// as the dataset's rows), or a file holding one trace object or a JSON array
// of them. Errors name the file, the line where the trace starts and the
// field (requests[3].hash_ids).
func ParseTrace(r io.Reader, name string) ([]Trace, error) {
	data, err := io.ReadAll(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	var out []Trace
	seen := map[string]int{}
	add := func(raw []byte, line int) error {
		var t Trace
		if err := json.Unmarshal(raw, &t); err != nil {
			var te *json.UnmarshalTypeError
			var se *json.SyntaxError
			switch {
			case errors.As(err, &te):
				return fmt.Errorf("%s:%d: field %s: expected %s, got JSON %s", name, line+lineOf(raw, te.Offset), te.Field, te.Type, te.Value)
			case errors.As(err, &se):
				return fmt.Errorf("%s:%d: %v", name, line+lineOf(raw, se.Offset), err)
			}
			return fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if err := t.validate(); err != nil {
			return fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if prev, dup := seen[t.ID]; dup {
			return fmt.Errorf("%s:%d: field id: %q already used on line %d", name, line, t.ID, prev)
		}
		seen[t.ID] = line
		out = append(out, t)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	first := true
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		if start >= len(data) {
			break
		}
		line := 1 + bytes.Count(data[:start], []byte{'\n'})
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, fmt.Errorf("%s:%d: %v", name, 1+lineOf(data, se.Offset), err)
			}
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if first && len(raw) > 0 && raw[0] == '[' {
			// A JSON array of traces: walk its elements for their lines.
			if err := eachElement(raw, func(el []byte, off int) error {
				return add(el, line+lineOf(raw, int64(off)))
			}); err != nil {
				return nil, err
			}
			first = false
			continue
		}
		first = false
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("%s:%d: want a trace object, got %s", name, line, clip(raw, 20))
		}
		if err := add(raw, line); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no traces", name)
	}
	return out, nil
}

// eachElement calls fn for every element of the JSON array raw, with the
// element's byte offset in raw.
func eachElement(raw []byte, fn func(el []byte, off int) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		off := skipSpace(raw, int(dec.InputOffset()))
		if off < len(raw) && raw[off] == ',' {
			off = skipSpace(raw, off+1)
		}
		var el json.RawMessage
		if err := dec.Decode(&el); err != nil {
			return err
		}
		if err := fn(el, off); err != nil {
			return err
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// lineOf counts the newlines before byte offset off in b: added to the line
// b starts on, it gives the line of off.
func lineOf(b []byte, off int64) int {
	off = min(max(off, 0), int64(len(b)))
	return bytes.Count(b[:off], []byte{'\n'})
}

// validate checks the fields replay depends on; the error names the field.
func (t *Trace) validate() error {
	switch {
	case t.ID == "":
		return errors.New("field id: missing or empty")
	case t.BlockSize <= 0:
		return fmt.Errorf("field block_size: must be > 0 (got %d)", t.BlockSize)
	case t.SystemTokens < 0 || t.ToolTokens < 0:
		return errors.New("field system_tokens/tool_tokens: must be >= 0")
	}
	switch t.HashIDScope {
	case "", "local", "global":
	default:
		return fmt.Errorf("field hash_id_scope: want \"local\" or \"global\" (got %q)", t.HashIDScope)
	}
	if len(t.Requests) == 0 {
		return fmt.Errorf("field requests: trace %q has no requests", t.ID)
	}
	calls := 0
	for i := range t.Requests {
		if t.Requests[i].IsCall() {
			calls++
		}
	}
	if calls == 0 {
		return fmt.Errorf("field requests: trace %q has no main-agent call", t.ID)
	}
	return validateRequests(t.Requests, "requests", t.BlockSize)
}

func validateRequests(rs []Request, path string, bs int) error {
	prevT := math.Inf(-1)
	for i := range rs {
		r := &rs[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		switch r.Type {
		case ReqNormal, ReqStreaming:
		case ReqSubagent:
			if len(r.Requests) == 0 {
				return fmt.Errorf("field %s.requests: subagent has no requests", p)
			}
			if err := validateRequests(r.Requests, p+".requests", bs); err != nil {
				return err
			}
			continue
		case "":
			return fmt.Errorf("field %s.type: missing (want \"n\", \"s\" or \"subagent\")", p)
		default:
			return fmt.Errorf("field %s.type: want \"n\", \"s\" or \"subagent\" (got %q)", p, r.Type)
		}
		switch {
		case math.IsNaN(r.T) || math.IsInf(r.T, 0) || r.T < 0:
			return fmt.Errorf("field %s.t: must be a time >= 0 (got %g)", p, r.T)
		case r.T < prevT:
			return fmt.Errorf("field %s.t: %g is before the previous request's %g (requests must be in time order)", p, r.T, prevT)
		case r.In <= 0:
			return fmt.Errorf("field %s.in: must be > 0 (got %d)", p, r.In)
		case r.Out <= 0:
			return fmt.Errorf("field %s.out: must be > 0 (got %d)", p, r.Out)
		case r.APITime < 0 || math.IsNaN(r.APITime):
			return fmt.Errorf("field %s.api_time: must be >= 0 (got %g)", p, r.APITime)
		case len(r.HashIDs) > (r.In+bs-1)/bs:
			return fmt.Errorf("field %s.hash_ids: %d blocks of %d tokens exceed in=%d (at most %d)", p, len(r.HashIDs), bs, r.In, (r.In+bs-1)/bs)
		}
		for j, id := range r.HashIDs {
			if id < 0 {
				return fmt.Errorf("field %s.hash_ids[%d]: must be >= 0 (got %d)", p, j, id)
			}
		}
		prevT = r.T
	}
	return nil
}

// LoadTrace reads a trace file (see ParseTrace).
func LoadTrace(path string) ([]Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTrace(f, path)
}

// WriteTrace writes traces as JSONL, one per line, the corpus's row format.
func WriteTrace(w io.Writer, traces []Trace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range traces {
		if err := enc.Encode(&traces[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// TraceStats summarises a trace set's shape (what `bench trace-gen` prints
// and the shape tests check).
type TraceStats struct {
	Traces, MainCalls, SubagentCalls int
	MainIn, MainOut, SubIn, SubOut   Summary
	// MainReuse is the mean fraction of a main call's prompt blocks that
	// repeat the session's previous main call's leading blocks.
	MainReuse float64
}

// Stats computes TraceStats.
func Stats(traces []Trace) TraceStats {
	var s TraceStats
	var mi, mo, si, so []float64
	var reuse float64
	var reuseN int
	for _, t := range traces {
		s.Traces++
		var prev []int64
		for i := range t.Requests {
			r := &t.Requests[i]
			if !r.IsCall() {
				forEachCall(r.Requests, func(c *Request) {
					s.SubagentCalls++
					si = append(si, float64(c.In))
					so = append(so, float64(c.Out))
				})
				continue
			}
			s.MainCalls++
			mi = append(mi, float64(r.In))
			mo = append(mo, float64(r.Out))
			if prev != nil && len(r.HashIDs) > 0 {
				reuse += float64(commonPrefix(prev, r.HashIDs)) / float64(len(r.HashIDs))
				reuseN++
			}
			prev = r.HashIDs
		}
	}
	s.MainIn, s.MainOut, s.SubIn, s.SubOut = Summarize(mi), Summarize(mo), Summarize(si), Summarize(so)
	s.MainReuse = safeDiv(reuse, float64(reuseN))
	return s
}

// String renders the stats on a few lines.
func (s TraceStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "traces %d, main-agent calls %d, subagent calls %d\n", s.Traces, s.MainCalls, s.SubagentCalls)
	fmt.Fprintf(&b, "main in  median %.0f  p90 %.0f   out median %.0f  p90 %.0f   prefix reuse %.0f%%\n",
		s.MainIn.Median, s.MainIn.P90, s.MainOut.Median, s.MainOut.P90, 100*s.MainReuse)
	fmt.Fprintf(&b, "sub  in  median %.0f  p90 %.0f   out median %.0f  p90 %.0f\n", s.SubIn.Median, s.SubIn.P90, s.SubOut.Median, s.SubOut.P90)
	return b.String()
}

func forEachCall(rs []Request, fn func(*Request)) {
	for i := range rs {
		if rs[i].IsCall() {
			fn(&rs[i])
		} else {
			forEachCall(rs[i].Requests, fn)
		}
	}
}

func commonPrefix(a, b []int64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
