package sim

import (
	"unicode"
	"unicode/utf8"
)

// The simulator has no tokenizer. A token is a maximal run of non-whitespace
// characters (the fields of strings.Fields), so a prompt of N words is N
// tokens. The load generator builds random prompts from words and can count
// them with the same function, which keeps requested and server-reported
// prompt lengths identical. Output text is generated as words for the same
// reason: re-counting a response gives usage.completion_tokens exactly.

// asciiSpace mirrors the ASCII part of unicode.IsSpace (as strings.Fields does).
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// spaceAt reports whether the character starting at s[i] is whitespace and
// its width in bytes.
func spaceAt(s string, i int) (bool, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiSpace[c], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r), size
}

// CountTokens returns the simulator's token count for text: the number of
// whitespace-separated words, i.e. len(strings.Fields(text)) without allocating.
func CountTokens(text string) int {
	n := 0
	inWord := false
	for i := 0; i < len(text); {
		sp, size := spaceAt(text, i)
		if sp {
			inWord = false
		} else if !inWord {
			inWord = true
			n++
		}
		i += size
	}
	return n
}

// splitTokens cuts text into pieces that each hold exactly one token and the
// whitespace before it (" world", "\n####"), as tokenizers attach leading
// spaces. Concatenating the pieces gives back text; leading whitespace goes
// to the first piece and trailing whitespace to the last.
func splitTokens(text string) []string {
	var pieces []string
	start, wsStart := 0, 0
	inWord, seen := false, false
	for i := 0; i < len(text); {
		sp, size := spaceAt(text, i)
		if sp {
			if inWord {
				wsStart = i
			}
			inWord = false
		} else if !inWord {
			inWord = true
			if seen {
				pieces = append(pieces, text[start:wsStart])
				start = wsStart
			}
			seen = true
		}
		i += size
	}
	if seen {
		pieces = append(pieces, text[start:])
	}
	return pieces
}

// fnv-1a 64, inlined so hashing a prompt allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// prefixHasher hashes a prompt incrementally and records the running hash at
// every BlockTokens-token boundary, like a paged radix cache keys KV blocks.
// Two prompts share block k's hash only when their first k blocks are equal.
type prefixHasher struct {
	h      uint64
	tokens int
	inWord bool
	block  int
	rem    int // tokens % block, kept by counting so no word pays a division
	blocks []uint64
}

func newPrefixHasher(blockTokens int) *prefixHasher {
	// tokens%b == 0 exactly when tokens%-b == 0, so the page period is |b|.
	return &prefixHasher{h: fnvOffset, block: max(blockTokens, -blockTokens)}
}

// mark mixes in structure that is not text (a role, a message boundary);
// it counts no tokens and ends the current word.
func (p *prefixHasher) mark(s string) {
	p.endWord()
	for i := 0; i < len(s); i++ {
		p.h = (p.h ^ uint64(s[i])) * fnvPrime
	}
	p.h = (p.h ^ 0xff) * fnvPrime
}

// endWord closes a page when the word just finished is its last token, so
// a page's hash covers exactly the bytes up to its last token and whatever
// follows (a space, the next message's role) belongs to the next page.
func (p *prefixHasher) endWord() {
	if p.inWord && p.rem == 0 {
		p.blocks = append(p.blocks, p.h)
	}
	p.inWord = false
}

// text mixes in prompt text and counts its tokens. It is the hot loop of a
// long prompt (hundreds of KB), so ASCII bytes are classified through a table
// with the state in locals; other bytes go through spaceAt's rune decoding.
// Text may be split across calls only at rune boundaries.
func (p *prefixHasher) text(s string) {
	h, tokens, rem, inWord, block := p.h, p.tokens, p.rem, p.inWord, p.block
	for i := 0; i < len(s); {
		c := s[i]
		size := 1
		var sp bool
		if c < utf8.RuneSelf {
			sp = asciiSpace[c]
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			sp = unicode.IsSpace(r)
		}
		if sp { // endWord
			if inWord && rem == 0 {
				p.blocks = append(p.blocks, h)
			}
			inWord = false
		} else if !inWord {
			inWord = true
			tokens++
			if rem++; rem == block {
				rem = 0
			}
		}
		if size == 1 {
			h = (h ^ uint64(c)) * fnvPrime
		} else {
			for j := i; j < i+size; j++ {
				h = (h ^ uint64(s[j])) * fnvPrime
			}
		}
		i += size
	}
	p.h, p.tokens, p.rem, p.inWord = h, tokens, rem, inWord
}

// finish closes the last page if the prompt ends exactly on a boundary.
func (p *prefixHasher) finish() []uint64 {
	p.endWord()
	return p.blocks
}

// splitmix64 is the deterministic mixer behind every pseudo-random choice.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// mix combines values into one well-distributed hash.
func mix(vals ...uint64) uint64 {
	h := uint64(0x5eed)
	for _, v := range vals {
		h = splitmix64(h ^ v)
	}
	return h
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// hashString is fnv-1a over s.
func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// fillerWords is the vocabulary of generated text. Plain lowercase ASCII, so
// a chunk needs no JSON escaping and every word is one token.
var fillerWords = [...]string{
	"the", "model", "token", "stream", "batch", "cache", "prefill", "decode",
	"kernel", "expert", "router", "layer", "tensor", "rank", "node", "rack",
	"latency", "through", "put", "queue", "step", "draft", "accept", "verify",
	"block", "page", "prefix", "hit", "miss", "spill", "host", "device",
	"and", "of", "to", "in", "is", "for", "with", "on",
	"a", "an", "as", "at", "by", "from", "it", "that",
	"this", "we", "our", "run", "runs", "sweep", "point", "rate",
	"simulated", "engine", "reply", "word", "text", "value", "result", "done",
}

// fillerText appends n filler tokens (" word" each, no leading space on the
// very first token of a response) chosen by a deterministic generator.
func fillerText(dst []byte, n int, state uint64, first bool) []byte {
	for i := 0; i < n; i++ {
		state = splitmix64(state)
		if !(first && i == 0) {
			dst = append(dst, ' ')
		}
		dst = append(dst, fillerWords[state%uint64(len(fillerWords))]...)
	}
	return dst
}
