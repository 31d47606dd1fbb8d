package loadgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/sweepflow/sweepflow/internal/jsonesc"
)

// words is the vocabulary prompts are built from. Each entry is one
// whitespace-separated word, which the simulator counts as one token, so a
// prompt of n words is a prompt of n tokens there. (A real engine's tokenizer
// will count differently; the run reports requested and server-reported
// prompt tokens side by side.)
var words = [...]string{
	"time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child",
	"world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
	"place", "case", "week", "company", "system", "program", "question", "work", "government", "number",
	"night", "point", "home", "water", "room", "mother", "area", "money", "story", "fact",
	"month", "lot", "right", "study", "book", "eye", "job", "word", "business", "issue",
	"side", "kind", "head", "house", "service", "friend", "father", "power", "hour", "game",
	"line", "end", "member", "law", "car", "city", "community", "name", "president", "team",
	"minute", "idea", "kid", "body", "information", "back", "parent", "face", "others", "level",
	"office", "door", "health", "person", "art", "war", "history", "party", "result", "change",
	"morning", "reason", "research", "girl", "guy", "moment", "air", "teacher", "force", "education",
	"foot", "boy", "age", "policy", "music", "market", "sense", "nation", "plan", "college",
	"interest", "death", "experience", "effect", "use", "class", "control", "care", "field", "development",
	"role", "effort", "rate", "heart", "drug", "show", "leader", "light", "voice", "wife",
	"police", "mind", "price", "report", "decision", "son", "view", "relationship", "town", "road",
	"arm", "difference", "value", "building", "action", "model", "season", "society", "tax", "director",
	"position", "player", "record", "paper", "space", "ground", "form", "event", "official", "matter",
	"center", "couple", "site", "project", "activity", "star", "table", "need", "court", "oil",
	"situation", "cost", "industry", "figure", "street", "image", "phone", "data", "picture", "practice",
	"piece", "land", "product", "doctor", "wall", "patient", "worker", "news", "test", "movie",
	"north", "love", "support", "technology", "step", "baby", "computer", "type", "attention", "film",
	"tree", "source", "organization", "hair", "window", "evidence", "population", "site", "chance", "energy",
	"kernel", "tensor", "cache", "prefill", "decode", "batch", "token", "stream", "expert", "router",
}

// CountTokens counts whitespace-separated words (len(bytes.Fields(b))
// without allocating), the simulator's tokenizer rule; loadgen uses it to
// size prompts and to count tokens in a chunk when the server does not report
// cumulative usage per chunk.
func CountTokens(b []byte) int {
	n := 0
	in := false
	for i := 0; i < len(b); {
		c := b[i]
		var sp bool
		if c < utf8.RuneSelf {
			sp = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
			i++
		} else {
			r, size := utf8.DecodeRune(b[i:])
			sp = unicode.IsSpace(r)
			i += size
		}
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

// appendWords appends n space-separated random words (n tokens).
func appendWords(dst []byte, rng *rand.Rand, n int) []byte {
	for i := 0; i < n; i++ {
		if len(dst) > 0 && dst[len(dst)-1] != ' ' && dst[len(dst)-1] != '\n' {
			dst = append(dst, ' ')
		}
		dst = append(dst, words[rng.IntN(len(words))]...)
	}
	return dst
}

// sampleLen draws a length uniformly from [max(floor(L*r),1), L], the
// InferenceX/SGLang random-range-ratio rule (r=0.8 gives [0.8L, L]).
func sampleLen(rng *rand.Rand, l int, r float64) int {
	if l <= 0 {
		return 0
	}
	lo := int(float64(l) * r)
	if lo < 1 {
		lo = 1
	}
	if lo >= l {
		return l
	}
	return lo + rng.IntN(l-lo+1)
}

// message is one chat message; content holds raw (unescaped) text.
type message struct {
	role    string
	content []byte
}

// bodyBuilder renders request bodies by appending into reusable buffers.
type bodyBuilder struct {
	chat   bool
	prefix []byte // `{"model":...,"stream":true,"stream_options":{...}` + extras
	// Extra may override max_tokens and ignore_eos; then loadgen omits its own.
	extraMax, extraEOS bool
}

func newBodyBuilder(model string, chat bool, extra map[string]any) (*bodyBuilder, error) {
	b := &bodyBuilder{chat: chat}
	p := []byte(`{"model":`)
	p = appendJSONString(p, []byte(model))
	p = append(p, `,"stream":true,"stream_options":{"include_usage":true}`...)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "stream", "stream_options":
			return nil, fmt.Errorf("loadgen: extra body field %q is not allowed: streaming with usage is required for the measurement", k)
		case "model", "messages", "prompt":
			return nil, fmt.Errorf("loadgen: extra body field %q is not allowed: loadgen sets it", k)
		}
		v, err := json.Marshal(extra[k])
		if err != nil {
			return nil, fmt.Errorf("loadgen: extra body field %q: %v", k, err)
		}
		p = append(p, ',')
		p = appendJSONString(p, []byte(k))
		p = append(p, ':')
		p = append(p, v...)
	}
	b.prefix = p
	_, b.extraMax = extra["max_tokens"]
	_, b.extraEOS = extra["ignore_eos"]
	return b, nil
}

// build renders a request. For /v1/completions the messages' contents are
// concatenated into one prompt.
func (b *bodyBuilder) build(dst []byte, msgs []message, maxTokens int, ignoreEOS bool) []byte {
	dst = append(dst[:0], b.prefix...)
	if b.chat {
		dst = append(dst, `,"messages":[`...)
		for i, m := range msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"role":"`...)
			dst = append(dst, m.role...)
			dst = append(dst, `","content":`...)
			dst = appendJSONString(dst, m.content)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, `,"prompt":"`...)
		for i, m := range msgs {
			if i > 0 {
				dst = append(dst, `\n`...)
			}
			dst = jsonesc.AppendBytes(dst, m.content)
		}
		dst = append(dst, '"')
	}
	return b.appendTail(dst, maxTokens, ignoreEOS)
}

// openUser appends the body of a request whose only message is a user
// message up to the inside of that message's JSON string: the caller
// appends the JSON-escaped text, then closeUser. The result equals build's
// for the same text, without a separate text buffer.
func (b *bodyBuilder) openUser(dst []byte) []byte {
	dst = append(dst, b.prefix...)
	if b.chat {
		return append(dst, `,"messages":[{"role":"user","content":"`...)
	}
	return append(dst, `,"prompt":"`...)
}

// userSize is a little more than the size of a body openUser and
// closeUser make around a prompt of the vocabulary's words, tokens of
// them: enough that building it seldom grows the buffer.
func (b *bodyBuilder) userSize(tokens int) int {
	return len(b.prefix) + 128 + int(float64(tokens+64)*meanWordBytes*1.02)
}

// meanWordBytes is the mean size of a word of the vocabulary with the
// space after it.
var meanWordBytes = func() float64 {
	n := 0
	for _, w := range words {
		n += len(w) + 1
	}
	return float64(n) / float64(len(words))
}()

// closeUser ends a body openUser began.
func (b *bodyBuilder) closeUser(dst []byte, maxTokens int, ignoreEOS bool) []byte {
	if b.chat {
		dst = append(dst, `"}]`...)
	} else {
		dst = append(dst, '"')
	}
	return b.appendTail(dst, maxTokens, ignoreEOS)
}

func (b *bodyBuilder) appendTail(dst []byte, maxTokens int, ignoreEOS bool) []byte {
	if !b.extraMax && maxTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(maxTokens), 10)
	}
	if ignoreEOS && !b.extraEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a quoted JSON string.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = jsonesc.AppendBytes(dst, s)
	return append(dst, '"')
}
