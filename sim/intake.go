package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Request intake is the host cost of a request before any modelled time:
// at high concurrency with AgentX-sized prompts (~330 KB bodies) decoding
// the body with encoding/json, copying the prompt twice and hashing it byte
// by byte made the simulator host-bound. The intake reads a body once into
// a pooled buffer, cuts its long string literals out (validating them as
// encoding/json's scanner would), lets encoding/json decode the small
// remainder (the skeleton) and hashes the long literals in place. Anything
// the fast path does not cover exactly falls back to decoding the whole
// body with json.Decoder, as before, so results and error texts are the same.

// longLiteral is the length from which a string literal is cut out of the
// body; shorter ones cost encoding/json little.
const longLiteral = 1 << 10

// maxPooledBuffer bounds what a pooled buffer keeps between requests, and
// maxPresize what a Content-Length header may make us allocate up front.
const (
	maxPooledBuffer = 16 << 20
	maxPresize      = 64 << 20
)

// intake holds one request's buffers; it is pooled across requests.
type intake struct {
	body []byte // the request body
	skel []byte // the body with long literals replaced by placeholders
	lits literals
	long int  // cut threshold; 0 means longLiteral (tests lower it)
	fast bool // the last parse took the fast path
}

var intakes = sync.Pool{New: func() any { return new(intake) }}

func getIntake() *intake { return intakes.Get().(*intake) }

// release returns in to the pool. Nothing parsed from it may be used after:
// hashes and counts are values, and kept text is cloned (promptInfo.text).
func (in *intake) release() {
	if cap(in.body) > maxPooledBuffer {
		in.body = nil
	}
	if cap(in.skel) > maxPooledBuffer {
		in.skel = nil
	}
	if cap(in.lits.scratch) > maxPooledBuffer {
		in.lits.scratch = nil
	}
	clear(in.lits.lits) // drop references into the body
	in.lits.lits, in.lits.used, in.lits.scratch = in.lits.lits[:0], 0, in.lits.scratch[:0]
	intakes.Put(in)
}

// read reads r's whole body into in.body, sized from Content-Length when
// given. On a read error it returns what it read and the error.
func (in *intake) read(r *http.Request) ([]byte, error) {
	b := in.body[:0]
	if cl := r.ContentLength; cl > 0 && cl < maxPresize && int(cl) >= cap(b) {
		b = make([]byte, 0, int(cl)+bytes.MinRead) // room to see EOF without growing
	}
	if r.Body == nil {
		in.body = b
		return b, nil
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			in.body = b
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
	}
}

// parse decodes the request body into req and analyses its prompt. err is
// the body's JSON error (as json.Decoder reports it); promptErr is
// analyzePrompt's, reported by the caller after its other checks.
func (in *intake) parse(r *http.Request, req *completionRequest, chat bool, blockTokens int, keepText bool) (info promptInfo, promptErr, err error) {
	in.fast = false
	body, readErr := in.read(r)
	if readErr != nil {
		// The decoder read r.Body itself before: it sees the same bytes and
		// then the error, so it may still succeed on a complete value.
		err = json.NewDecoder(io.MultiReader(bytes.NewReader(body), errReader{readErr})).Decode(req)
		if err == nil {
			info, promptErr = analyzePrompt(req, chat, blockTokens, keepText, nil)
		}
		return
	}
	long := in.long
	if long == 0 {
		long = longLiteral
	}
	if len(body) > long && in.cutLiterals(body, long) {
		if json.NewDecoder(bytes.NewReader(in.skel)).Decode(req) == nil {
			info, promptErr = analyzePrompt(req, chat, blockTokens, keepText, &in.lits)
			// Every literal must have stood exactly where a prompt text is
			// read; a literal elsewhere (a role, a stop string, an unknown
			// field, a duplicate key) or any error takes the full path.
			if promptErr == nil && in.lits.used == len(in.lits.lits) {
				in.fast = true
				return info, nil, nil
			}
		}
		*req = completionRequest{}
		info, promptErr = promptInfo{}, nil
	}
	if err = json.NewDecoder(bytes.NewReader(body)).Decode(req); err == nil {
		info, promptErr = analyzePrompt(req, chat, blockTokens, keepText, nil)
	}
	return
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// literal is a long JSON string literal of the body.
type literal struct {
	raw  []byte // between the quotes, validated
	esc  bool   // holds a backslash escape
	used bool
}

// literals are the long string literals cut out of a body; the skeleton
// holds the placeholder "\u0000<index>" for each. No other string of the
// skeleton can decode to a value starting with U+0000 (cutLiterals checks),
// so a decoded value or raw literal so starting is a placeholder.
type literals struct {
	lits    []literal
	used    int
	scratch []byte // decoded values of literals with escapes
}

// cutLiterals lexes body as encoding/json's scanner does for strings (any
// '"' outside a string opens one) and builds in.skel with the long literals
// replaced by placeholders. It reports false when the body has no long
// literal, a string the scanner would reject (the full decode reports the
// error), or a short string that spells U+0000.
func (in *intake) cutLiterals(body []byte, long int) bool {
	in.lits.lits = in.lits.lits[:0]
	skel := in.skel[:0]
	last := 0
	for i := 0; ; {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end, esc, ok := scanString(body, start+1)
		if !ok {
			return false
		}
		lit := body[start+1 : end]
		switch {
		case len(lit) >= long:
			skel = append(skel, body[last:start]...)
			skel = append(skel, `"\u0000`...)
			skel = strconv.AppendInt(skel, int64(len(in.lits.lits)), 10)
			skel = append(skel, '"')
			last = end + 1
			in.lits.lits = append(in.lits.lits, literal{raw: lit, esc: esc})
		case esc && bytes.Contains(lit, []byte(`\u0000`)):
			return false
		}
		i = end + 1
	}
	in.skel = append(skel, body[last:]...)
	return len(in.lits.lits) > 0
}

// scanString finds the closing quote of the string whose contents start at
// b[i], accepting exactly what encoding/json's scanner accepts: no byte
// below 0x20, escapes \" \\ \/ \b \f \n \r \t and \u with four hex digits.
// It jumps between quotes and backslashes with bytes.IndexByte.
func scanString(b []byte, i int) (end int, esc, ok bool) {
	q := -1 // the next '"' at or after i, once found
	for {
		if q < i {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				return 0, esc, false
			}
			q = i + j
		}
		k := bytes.IndexByte(b[i:q], '\\')
		if k < 0 {
			if hasControl(b[i:q]) {
				return 0, esc, false
			}
			return q, esc, true
		}
		if hasControl(b[i : i+k]) {
			return 0, esc, false
		}
		esc = true
		p := i + k + 1 // the escaped character
		if p >= len(b) {
			return 0, esc, false
		}
		switch b[p] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = p + 1
		case 'u':
			if p+4 >= len(b) {
				return 0, esc, false
			}
			for _, c := range b[p+1 : p+5] {
				if hexValue(c) < 0 {
					return 0, esc, false
				}
			}
			i = p + 5
		default:
			return 0, esc, false
		}
	}
}

// hasControl reports whether b holds a byte below 0x20, eight bytes at a
// time: (x - 0x20…) & ^x & 0x80… is nonzero exactly when some byte of x
// is below 0x20 (the borrow can only mark bytes above a true hit).
func hasControl(b []byte) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if (x-lo)&^x&hi != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func hexValue(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// placeholderRaw reports whether raw is a placeholder literal and which.
func (l *literals) placeholderRaw(raw []byte) (int, bool) {
	if l == nil || len(raw) < len(`"\u0000"`) || string(raw[:7]) != `"\u0000` || raw[len(raw)-1] != '"' {
		return 0, false
	}
	return l.take(string(raw[7 : len(raw)-1]))
}

// placeholder reports whether the decoded string s is a placeholder and which.
func (l *literals) placeholder(s string) (int, bool) {
	if l == nil || len(s) < 2 || s[0] != 0 {
		return 0, false
	}
	return l.take(s[1:])
}

// take marks the literal with the decimal index digits as used; a second
// use is refused so that the used count proves each stood in one place.
func (l *literals) take(digits string) (int, bool) {
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || i >= len(l.lits) || l.lits[i].used {
		return 0, false
	}
	l.lits[i].used = true
	l.used++
	return i, true
}

// value is literal i's text, viewing the body or l.scratch (valid until the
// intake is released). decoded selects encoding/json's decoded value (what
// a string field gets); otherwise a literal without escapes is its raw
// bytes, as readContent's fast path reads a message content.
func (l *literals) value(i int, decoded bool) string {
	lit := l.lits[i]
	if !lit.esc && (!decoded || utf8.Valid(lit.raw)) {
		return view(lit.raw)
	}
	start := len(l.scratch)
	l.scratch = appendUnquoted(l.scratch, lit.raw)
	return view(l.scratch[start:])
}

// view is b as a string without a copy; b must not change while it is used.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendUnquoted appends the value encoding/json's unquote gives the string
// literal contents s (validated by scanString): escapes decoded, a lone
// surrogate escape and each byte of invalid UTF-8 replaced by U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		seg := s
		if k >= 0 {
			seg = s[:k]
		}
		if utf8.Valid(seg) {
			dst = append(dst, seg...)
		} else {
			for len(seg) > 0 {
				r, size := utf8.DecodeRune(seg)
				dst = utf8.AppendRune(dst, r)
				seg = seg[size:]
			}
		}
		if k < 0 {
			break
		}
		s = s[k:]
		switch c := s[1]; c {
		case 'b':
			dst, s = append(dst, '\b'), s[2:]
		case 'f':
			dst, s = append(dst, '\f'), s[2:]
		case 'n':
			dst, s = append(dst, '\n'), s[2:]
		case 'r':
			dst, s = append(dst, '\r'), s[2:]
		case 't':
			dst, s = append(dst, '\t'), s[2:]
		case 'u':
			r := getu4(s)
			s = s[6:]
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, getu4(s)); dec != unicode.ReplacementChar {
					dst, s = utf8.AppendRune(dst, dec), s[6:]
					continue
				}
				r = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst, s = append(dst, c), s[2:]
		}
	}
	return dst
}

// getu4 decodes the \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		v := hexValue(c)
		if v < 0 {
			return -1
		}
		r = r*16 + v
	}
	return r
}
