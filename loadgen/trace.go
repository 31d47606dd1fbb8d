package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
)

// Session is one agentic session to replay: a sequence of turns sent one
// after the other on a single lane, each resending the whole conversation.
type Session struct {
	SessionID string `json:"session_id"`
	Turns     []Turn `json:"turns"`
}

// Turn is one request of a session.
type Turn struct {
	// InputTokens is the number of NEW prompt tokens this turn adds on top of
	// the history it resends.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// DelayMs is the think/tool time between the previous response and this
	// turn's send; it is ignored for the first turn and capped at 10 s.
	DelayMs float64 `json:"delay_ms"`
	// HashIDs name HashBlockTokens-token blocks of shared text that open this
	// turn's new input. Equal ids give byte-identical blocks in every session,
	// so sessions that share leading hash ids share that prompt prefix.
	HashIDs []int64 `json:"hash_ids,omitempty"`
}

// HashBlockTokens is the size of one hash_ids block (AgentX traces use 64).
const HashBlockTokens = 64

// MaxTurnDelayMs caps think time between turns, as AgentX does.
const MaxTurnDelayMs = 10_000

// ParseTrace reads JSONL sessions (one per line; blank lines are skipped).
// Errors name the file, line and field.
func ParseTrace(r io.Reader, name string) ([]Session, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var out []Session
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var s Session
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("%s:%d: field %s: expected %s, got JSON %s", name, line, te.Field, te.Type, te.Value)
			}
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if s.SessionID == "" {
			return nil, fmt.Errorf("%s:%d: field session_id: missing or empty", name, line)
		}
		if prev, dup := seen[s.SessionID]; dup {
			return nil, fmt.Errorf("%s:%d: field session_id: %q already used on line %d", name, line, s.SessionID, prev)
		}
		seen[s.SessionID] = line
		if len(s.Turns) == 0 {
			return nil, fmt.Errorf("%s:%d: field turns: session %q has no turns", name, line, s.SessionID)
		}
		for i, t := range s.Turns {
			switch {
			case t.InputTokens <= 0:
				return nil, fmt.Errorf("%s:%d: field turns[%d].input_tokens: must be > 0 (got %d)", name, line, i, t.InputTokens)
			case t.OutputTokens <= 0:
				return nil, fmt.Errorf("%s:%d: field turns[%d].output_tokens: must be > 0 (got %d)", name, line, i, t.OutputTokens)
			case t.DelayMs < 0:
				return nil, fmt.Errorf("%s:%d: field turns[%d].delay_ms: must be >= 0 (got %g)", name, line, i, t.DelayMs)
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no sessions", name)
	}
	return out, nil
}

// LoadTrace reads a JSONL trace file.
func LoadTrace(path string) ([]Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTrace(f, path)
}

// WriteTrace writes sessions as JSONL.
func WriteTrace(w io.Writer, sessions []Session) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range sessions {
		if err := enc.Encode(&sessions[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// TraceShape sets the size of generated sessions; zero fields take the
// defaults noted, which loosely follow a coding agent: a large shared system
// prompt on the first turn, then small tool results and replies. A negative
// SharedPrefixBlocks or MaxDelayMs means none.
type TraceShape struct {
	SharedPrefixBlocks int     // hash blocks every session opens with (default 8 = 512 tokens)
	FirstInputTokens   int     // first-turn input, including the shared blocks (default 2048)
	InputTokens        int     // later turns' new input, drawn from [InputTokens/4, InputTokens] (default 256)
	OutputTokens       int     // replies, drawn from [OutputTokens/4, OutputTokens] (default 256)
	MaxDelayMs         float64 // think time drawn from [0, MaxDelayMs] (default 2000)
}

func (s TraceShape) withDefaults() TraceShape {
	switch {
	case s.SharedPrefixBlocks == 0:
		s.SharedPrefixBlocks = 8
	case s.SharedPrefixBlocks < 0:
		s.SharedPrefixBlocks = 0
	}
	if s.FirstInputTokens == 0 {
		s.FirstInputTokens = 2048
	}
	if s.FirstInputTokens < s.SharedPrefixBlocks*HashBlockTokens+1 {
		s.FirstInputTokens = s.SharedPrefixBlocks*HashBlockTokens + 1
	}
	if s.InputTokens == 0 {
		s.InputTokens = 256
	}
	if s.OutputTokens == 0 {
		s.OutputTokens = 256
	}
	switch {
	case s.MaxDelayMs == 0:
		s.MaxDelayMs = 2000
	case s.MaxDelayMs < 0:
		s.MaxDelayMs = 0
	}
	return s
}

// GenerateTrace returns a deterministic synthetic trace: the same seed and
// arguments always produce the same sessions, so tests need no corpus.
// Every session opens with the same SharedPrefixBlocks hash ids (a common
// system prompt); the rest of each session is unique to it.
func GenerateTrace(seed int64, sessions, turnsPerSession int, shape TraceShape) []Session {
	shape = shape.withDefaults()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7a11ce))
	between := func(lo, hi int) int {
		if hi <= lo {
			return max(lo, 1)
		}
		return lo + rng.IntN(hi-lo+1)
	}
	shared := make([]int64, shape.SharedPrefixBlocks)
	for i := range shared {
		shared[i] = int64(i + 1)
	}
	out := make([]Session, sessions)
	for s := range out {
		sess := Session{SessionID: "session-" + strconv.Itoa(s+1), Turns: make([]Turn, turnsPerSession)}
		for t := range sess.Turns {
			turn := Turn{
				InputTokens:  between(max(shape.InputTokens/4, 1), shape.InputTokens),
				OutputTokens: between(max(shape.OutputTokens/4, 1), shape.OutputTokens),
				DelayMs:      float64(rng.IntN(int(shape.MaxDelayMs) + 1)),
			}
			if t == 0 {
				turn.InputTokens = shape.FirstInputTokens
				turn.DelayMs = 0
				turn.HashIDs = append([]int64(nil), shared...)
			}
			sess.Turns[t] = turn
		}
		out[s] = sess
	}
	return out
}

// hashBlock appends the text of one shared block: HashBlockTokens words that
// depend only on the hash id.
func hashBlock(dst []byte, id int64) []byte {
	rng := rand.New(rand.NewPCG(uint64(id), 0x6a5b1d))
	return appendWords(dst, rng, HashBlockTokens)
}

// turnInput builds the new user text of one turn: shared hash blocks first,
// then (on the first turn) the session's cache-bust marker, then filler words
// up to InputTokens. The marker sits after the shared blocks so sessions still
// share those blocks but nothing after them. It returns the text, its token
// count, and how many leading tokens are shared hash-block text.
func turnInput(dst []byte, t Turn, first bool, marker string, rng *rand.Rand) ([]byte, int, int) {
	n := 0
	shared := 0
	for _, id := range t.HashIDs {
		if n+HashBlockTokens > t.InputTokens {
			break
		}
		dst = hashBlock(dst, id)
		n += HashBlockTokens
		shared += HashBlockTokens
	}
	if first {
		if len(dst) > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, marker...)
		n++
	}
	if rest := t.InputTokens - n; rest > 0 {
		dst = appendWords(dst, rng, rest)
		n += rest
	}
	return dst, n, shared
}
