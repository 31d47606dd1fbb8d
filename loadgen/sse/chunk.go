package sse

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Chunk holds the fields of one streamed completion chunk that a benchmark
// client needs. Byte slices alias the input or the Parser's scratch space and
// are valid until the next Parse.
type Chunk struct {
	ID                []byte
	SystemFingerprint []byte
	// Content is choices[0].delta.content (chat) or choices[0].text
	// (completions).
	Content []byte
	// Reasoning is choices[0].delta.reasoning_content, or delta.reasoning
	// when reasoning_content is absent or empty.
	Reasoning    []byte
	FinishReason []byte
	HasChoices   bool // choices is a non-empty array

	HasUsage         bool
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int // usage.prompt_tokens_details.cached_tokens

	// CatchUpGaps is the simulator's catch_up_gaps (sent beside usage): the
	// stream's chunk gaps it wrote back to back because it was behind its
	// schedule. 0 from any other server.
	CatchUpGaps int

	// IsError is set for {"error": <non-null>} and {"object": "error"}
	// payloads; Error is the raw JSON of the error value (or of the whole
	// payload for the "object" form).
	IsError bool
	Error   []byte
}

// HasToken reports whether the chunk carries generated text or reasoning.
func (c *Chunk) HasToken() bool { return len(c.Content) > 0 || len(c.Reasoning) > 0 }

// Parser decodes chunks. It is not safe for concurrent use; keep one per
// stream (or per worker) so its scratch buffers are reused.
type Parser struct {
	s scanner
	// unescape scratch, one per field so results can alias them
	content, rc, rs, id, fp, fr, obj []byte
}

var errSyntax = errors.New("sse: invalid JSON")

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

// Parse decodes one event payload into c, which it resets first. It accepts
// exactly the JSON objects that encoding/json accepts and skips unknown keys
// without materialising them.
func (p *Parser) Parse(data []byte, c *Chunk) error {
	*c = Chunk{}
	p.content, p.rc, p.rs = p.content[:0], p.rc[:0], p.rs[:0]
	p.s = scanner{b: data, keyBuf: p.s.keyBuf[:0]}
	s := &p.s
	s.ws()
	if s.peek() != '{' {
		return fmt.Errorf("%w: payload is not a JSON object", errSyntax)
	}
	var rc, rs []byte
	var hasRC, hasRS bool
	var objectIsError bool
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "id":
			return p.strInto(&p.id, &c.ID)
		case "system_fingerprint":
			return p.strInto(&p.fp, &c.SystemFingerprint)
		case "catch_up_gaps":
			c.CatchUpGaps = max(s.intOrSkip(), 0)
			return s.err
		case "object":
			v, ok, err := p.str(&p.obj)
			if err != nil {
				return err
			}
			objectIsError = ok && string(v) == "error"
		case "error":
			start := s.i
			if s.null() {
				c.IsError, c.Error = false, nil
				return nil
			}
			if err := s.skip(0); err != nil {
				return err
			}
			c.IsError, c.Error = true, data[start:s.i]
		case "choices":
			c.HasChoices, c.Content, c.FinishReason = false, nil, nil
			rc, rs, hasRC, hasRS = nil, nil, false, false
			if s.peek() != '[' {
				return s.skip(0)
			}
			first := true
			return s.array(func() error {
				if !first || s.peek() != '{' {
					return s.skip(0)
				}
				first = false
				c.HasChoices = true
				return s.object(func(k []byte) error {
					switch string(k) {
					case "text":
						return p.strInto(&p.content, &c.Content)
					case "finish_reason":
						return p.strInto(&p.fr, &c.FinishReason)
					case "delta":
						c.Content = nil
						rc, rs, hasRC, hasRS = nil, nil, false, false
						if s.peek() != '{' {
							return s.skip(0)
						}
						return s.object(func(dk []byte) error {
							switch string(dk) {
							case "content":
								return p.strInto(&p.content, &c.Content)
							case "reasoning_content":
								v, ok, err := p.str(&p.rc)
								if err != nil {
									return err
								}
								rc, hasRC = v, ok
							case "reasoning":
								v, ok, err := p.str(&p.rs)
								if err != nil {
									return err
								}
								rs, hasRS = v, ok
							default:
								return s.skip(0)
							}
							return nil
						})
					default:
						return s.skip(0)
					}
				})
			})
		case "usage":
			c.HasUsage, c.PromptTokens, c.CompletionTokens, c.CachedTokens = false, 0, 0, 0
			if s.peek() != '{' {
				return s.skip(0)
			}
			c.HasUsage = true
			return s.object(func(k []byte) error {
				switch string(k) {
				case "prompt_tokens":
					c.PromptTokens = s.intOrSkip()
				case "completion_tokens":
					c.CompletionTokens = s.intOrSkip()
				case "prompt_tokens_details":
					c.CachedTokens = 0
					if s.peek() != '{' {
						return s.skip(0)
					}
					return s.object(func(dk []byte) error {
						if string(dk) == "cached_tokens" {
							c.CachedTokens = s.intOrSkip()
							return nil
						}
						return s.skip(0)
					})
				default:
					return s.skip(0)
				}
				return s.err
			})
		default:
			return s.skip(0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return fmt.Errorf("%w: data after the top-level object at offset %d", errSyntax, s.i)
	}
	if hasRC && len(rc) > 0 {
		c.Reasoning = rc
	} else if hasRS {
		c.Reasoning = rs
	}
	if objectIsError && !c.IsError {
		c.IsError, c.Error = true, data
	}
	return nil
}

// strInto reads a string value into *dst (nil for null or a non-string).
func (p *Parser) strInto(scratch *[]byte, dst *[]byte) error {
	v, _, err := p.str(scratch)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// str reads a string value (returning ok=false for null or a non-string
// value, which it skips). Escaped strings are decoded into *scratch.
func (p *Parser) str(scratch *[]byte) ([]byte, bool, error) {
	s := &p.s
	if s.peek() != '"' {
		return nil, false, s.skip(0)
	}
	raw, esc, err := s.rawString()
	if err != nil {
		return nil, false, err
	}
	if !esc {
		return raw, true, nil
	}
	*scratch = unescape((*scratch)[:0], raw)
	return *scratch, true, nil
}

// scanner is a minimal validating JSON reader over a byte slice.
type scanner struct {
	b      []byte
	i      int
	err    error
	keyBuf []byte // unescaped keys; a key is used before its value is read
}

func (s *scanner) ws() {
	i, b := s.i, s.b
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	s.i = i
}

// peek skips whitespace and returns the next byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.i)
}

func (s *scanner) null() bool {
	if s.peek() == 'n' && s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object iterates the members of an object, calling fn with each key and the
// scanner positioned at the value; fn must consume the value.
func (s *scanner) object(fn func(key []byte) error) error {
	return s.objectDepth(0, fn)
}

func (s *scanner) objectDepth(depth int, fn func(key []byte) error) error {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	if s.peek() != '{' {
		return s.fail("expected '{'")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.fail("expected object key")
		}
		raw, esc, err := s.rawString()
		if err != nil {
			return err
		}
		key := raw
		if esc {
			s.keyBuf = unescape(s.keyBuf[:0], raw)
			key = s.keyBuf
		}
		if s.peek() != ':' {
			return s.fail("expected ':'")
		}
		s.i++
		s.ws()
		if fn != nil {
			if err := fn(key); err != nil {
				return err
			}
		} else if err := s.skip(depth + 1); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// array iterates array elements; fn must consume each element.
func (s *scanner) array(fn func() error) error { return s.arrayDepth(0, fn) }

func (s *scanner) arrayDepth(depth int, fn func() error) error {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	if s.peek() != '[' {
		return s.fail("expected '['")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if fn != nil {
			if err := fn(); err != nil {
				return err
			}
		} else if err := s.skip(depth + 1); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// skip consumes and validates one value.
func (s *scanner) skip(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		return s.objectDepth(depth+1, nil)
	case c == '[':
		return s.arrayDepth(depth+1, nil)
	case c == '"':
		_, _, err := s.rawString()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := s.number()
		return err
	default:
		return s.fail("expected a value")
	}
}

func (s *scanner) literal(lit string) error {
	if s.i+len(lit) <= len(s.b) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return nil
	}
	return s.fail("invalid literal")
}

// number validates a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	b := s.b
	if s.i < len(b) && b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(b) && b[s.i] == '0':
		s.i++
	case s.i < len(b) && b[s.i] >= '1' && b[s.i] <= '9':
		for s.i < len(b) && b[s.i] >= '0' && b[s.i] <= '9' {
			s.i++
		}
	default:
		return nil, s.fail("invalid number")
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if s.i >= len(b) || b[s.i] < '0' || b[s.i] > '9' {
			return nil, s.fail("invalid number")
		}
		for s.i < len(b) && b[s.i] >= '0' && b[s.i] <= '9' {
			s.i++
		}
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(b) || b[s.i] < '0' || b[s.i] > '9' {
			return nil, s.fail("invalid number")
		}
		for s.i < len(b) && b[s.i] >= '0' && b[s.i] <= '9' {
			s.i++
		}
	}
	return b[start:s.i], nil
}

// intOrSkip reads a number as an int (fractions truncated, out-of-range
// values clamped); any other value is skipped and reads as 0. Syntax errors
// are left in s.err.
func (s *scanner) intOrSkip() int {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		if err := s.skip(0); err != nil {
			s.err = err
		}
		return 0
	}
	txt, err := s.number()
	if err != nil {
		s.err = err
		return 0
	}
	n := 0
	fast := len(txt) <= 18
	for _, d := range txt {
		if d < '0' || d > '9' {
			fast = false
			break
		}
		n = n*10 + int(d-'0')
	}
	if fast {
		return n
	}
	f, _ := strconv.ParseFloat(string(txt), 64)
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int(f)
}

// rawString consumes a string and returns its raw contents (between the
// quotes) and whether it contains escapes. It validates escapes and rejects
// control characters, like encoding/json.
func (s *scanner) rawString() ([]byte, bool, error) {
	b := s.b
	start := s.i + 1 // past the opening quote
	j := start
	esc := false
	for {
		// Fast path over plain bytes with the index in a register.
		for j < len(b) {
			c := b[j]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			j++
		}
		if j >= len(b) {
			s.i = j
			return nil, false, s.fail("unterminated string")
		}
		switch c := b[j]; {
		case c == '"':
			s.i = j + 1
			return b[start:j], esc, nil
		case c == '\\':
			esc = true
			j++
			if j >= len(b) {
				s.i = j
				return nil, false, s.fail("unterminated escape")
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+5 > len(b) || !isHex4(b[j+1:j+5]) {
					s.i = j
					return nil, false, s.fail("invalid \\u escape")
				}
				j += 5
			default:
				s.i = j
				return nil, false, s.fail("invalid escape")
			}
		default:
			s.i = j
			return nil, false, s.fail("control character in string")
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unescape decodes a validated raw JSON string, mapping invalid surrogates to
// U+FFFD exactly as encoding/json does.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				if i+7 <= len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2 := hex4(raw[i+3 : i+7])
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 8
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
		i++
	}
	return dst
}
