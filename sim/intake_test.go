package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// The intake before the fast path (json.Decoder on the body, messageText,
// a byte-at-a-time prefix hasher), kept as the reference the fast path must
// match exactly.

func refParseCompletion(s *Server, body io.Reader, chat bool) (*parsedRequest, *apiError) {
	pr := &parsedRequest{}
	req := &pr.req
	if err := json.NewDecoder(body).Decode(req); err != nil {
		return pr, badRequest("invalid JSON body: " + err.Error())
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		return pr, &apiError{http.StatusNotFound, "The model `" + req.Model + "` does not exist (this simulated engine serves `" + s.cfg.Model + "`).", "NotFoundError"}
	}
	if req.N != nil && *req.N != 1 {
		return pr, badRequest("n: only n=1 is supported by the simulated engine")
	}
	var err error
	if pr.stops, err = stopStrings(req.Stop); err != nil {
		return pr, badRequest(err.Error())
	}
	if pr.prompt, err = refAnalyzePrompt(req, chat, s.cfg.Latency.CacheBlockTokens); err != nil {
		return pr, badRequest(err.Error())
	}
	isl, ctxLen := pr.prompt.tokens, s.cfg.ContextLength
	pr.maxTokens = -1
	if req.MaxCompletionTokens != nil {
		pr.maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		pr.maxTokens = *req.MaxTokens
	}
	switch {
	case pr.maxTokens == 0 || pr.maxTokens < -1:
		return pr, badRequest(fmt.Sprintf("max_tokens must be at least 1, got %d", pr.maxTokens))
	case isl >= ctxLen:
		return pr, badRequest(fmt.Sprintf("prompt has %d tokens; the context length is %d", isl, ctxLen))
	case pr.maxTokens < 0:
		pr.maxTokens = min(s.cfg.DefaultMaxTokens, ctxLen-isl)
	case isl+pr.maxTokens > ctxLen:
		return pr, badRequest(fmt.Sprintf("prompt (%d tokens) plus max_tokens (%d) exceeds the context length %d", isl, pr.maxTokens, ctxLen))
	}
	return pr, nil
}

func refMessageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
			return string(raw[1 : len(raw)-1]), nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" && p.Type != "" {
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func refAnalyzePrompt(req *completionRequest, chat bool, blockTokens int) (promptInfo, error) {
	h := &refHasher{h: fnvOffset, block: blockTokens}
	var info promptInfo
	if chat {
		if len(req.Messages) == 0 {
			return info, errors.New("messages: at least one message is required")
		}
		for i, m := range req.Messages {
			text, err := refMessageText(m.Content)
			if err != nil {
				return info, fmt.Errorf("messages[%d].content: %v", i, err)
			}
			h.mark(m.Role)
			h.text(text)
			if m.Role == "user" {
				info.text = text
			}
		}
	} else {
		raw := req.Prompt
		if len(raw) == 0 || string(raw) == "null" {
			return info, errors.New("prompt: required")
		}
		var s string
		var strs []string
		var ids []int64
		var idLists [][]int64
		switch {
		case json.Unmarshal(raw, &s) == nil:
		case json.Unmarshal(raw, &strs) == nil:
			if len(strs) != 1 {
				return info, fmt.Errorf("prompt: the simulator serves one prompt per request, got %d", len(strs))
			}
			s = strs[0]
		case json.Unmarshal(raw, &ids) == nil:
		case json.Unmarshal(raw, &idLists) == nil:
			if len(idLists) != 1 {
				return info, fmt.Errorf("prompt: the simulator serves one prompt per request, got %d", len(idLists))
			}
			ids = idLists[0]
		default:
			return info, errors.New("prompt: must be a string, [string], [int] or [[int]]")
		}
		if ids != nil {
			var b []byte
			for _, id := range ids {
				b = strconv.AppendInt(append(b[:0], ' ', 't'), id, 36)
				h.text(string(b))
			}
		} else {
			h.text(s)
			info.text = s
		}
	}
	info.pages = h.finish()
	info.tokens = h.tokens
	info.hash = h.h
	return info, nil
}

type refHasher struct {
	h      uint64
	tokens int
	inWord bool
	block  int
	blocks []uint64
}

func (p *refHasher) mark(s string) {
	p.endWord()
	for i := 0; i < len(s); i++ {
		p.h = (p.h ^ uint64(s[i])) * fnvPrime
	}
	p.h = (p.h ^ 0xff) * fnvPrime
}

func (p *refHasher) endWord() {
	if p.inWord && p.tokens%p.block == 0 {
		p.blocks = append(p.blocks, p.h)
	}
	p.inWord = false
}

func (p *refHasher) text(s string) {
	for i := 0; i < len(s); {
		sp, size := spaceAt(s, i)
		if sp {
			p.endWord()
		} else if !p.inWord {
			p.inWord = true
			p.tokens++
		}
		for j := i; j < i+size; j++ {
			p.h = (p.h ^ uint64(s[j])) * fnvPrime
		}
		i += size
	}
}

func (p *refHasher) finish() []uint64 {
	p.endWord()
	return p.blocks
}

// withoutPrompt is req with the prompt texts (placeholders after the fast
// path) left out, for comparing the rest of the decode.
func withoutPrompt(req completionRequest) completionRequest {
	req.Prompt = nil
	msgs := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i].Role = m.Role
	}
	if req.Messages != nil {
		req.Messages = msgs
	}
	return req
}

// long repeats unit up to at least n bytes: a literal the intake cuts out.
func long(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)
}

type intakeCase struct {
	name string
	body string
	chat bool
	fast bool // the fast path serves it (else it falls back)
}

func intakeCases() []intakeCase {
	words := long("kernel tensor cache ", 5000)
	esc := long(`line\none\ttab \"quoted\" back\\slash \/ \b\f\r `, 2000)
	uni := long(`caf\u00e9 em\u2003space nb\u00A0sp \u0000nul `, 2000)
	pairs := long(`smile \ud83d\ude00 lone \ud83d high \ude00 low \ud83d\u0041 mixed \ud83d\\u0041 `, 2000)
	rawUTF8 := long("Janet’s ducks\u2003em\u00a0nbsp\u3000ideo ", 2000)
	badUTF8 := long("bad \xff\xfe bytes \xe2\x80 cut \xed\xa0\x80 surrogate ", 2000)
	msg := func(role, content string) string {
		return `{"role":"` + role + `","content":"` + content + `"}`
	}
	chat := func(msgs ...string) string {
		return `{"model":"` + DefaultModel + `","max_tokens":10,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	prompt := func(p string) string { return `{"max_tokens":5,"prompt":` + p + `}` }
	return []intakeCase{
		{"words", chat(msg("user", words)), true, true},
		{"escapes", chat(msg("user", esc)), true, true},
		{"unicode escapes", chat(msg("user", uni)), true, true},
		{"surrogates", chat(msg("user", pairs)), true, true},
		{"raw utf8", chat(msg("user", rawUTF8)), true, true},
		{"invalid utf8", chat(msg("user", badUTF8)), true, true},
		{"invalid utf8 with escape", chat(msg("user", badUTF8+`\n`)), true, true},
		{"system and user", chat(msg("system", words), msg("user", esc), msg("assistant", "ok"), msg("user", uni)), true, true},
		{"just under the cut", chat(msg("user", strings.Repeat("a ", longLiteral/2-1)+"b")), true, false},
		{"at the cut", chat(msg("user", strings.Repeat("a ", longLiteral/2))), true, true},
		{"whitespace", " \n{\t\"messages\" : [ {\r\n\"role\" :\"user\" , \"content\"\n:\n\"" + words + "\" } ] ,\"max_tokens\" : 3 }\n", true, true},
		{"content parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"` + words + `"},{"type":"image_url","text":"` + esc + `"},{"text":"` + badUTF8 + `"},{"type":"text","text":"` + pairs + `"}]}]}`, true, true},
		{"content parts long type", `{"messages":[{"role":"user","content":[{"type":"` + words + `","text":"` + esc + `"}]}]}`, true, false},
		{"content parts unknown field", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","extra":"` + words + `"}]}]}`, true, false},
		{"unknown field short", `{"messages":[{"role":"user","content":"` + words + `"}],"extra":{"a":[1,"b",null]},"logprobs":false}`, true, true},
		{"unknown field long", `{"messages":[{"role":"user","content":"` + words + `"}],"extra":"` + esc + `"}`, true, false},
		{"duplicate content", `{"messages":[{"role":"user","content":"` + words + `","content":"` + esc + `"}]}`, true, false},
		{"duplicate messages", `{"messages":[{"role":"user","content":"` + words + `"}],"messages":[{"role":"user","content":"` + uni + `"}]}`, true, false},
		{"duplicate short key", `{"max_tokens":3,"max_tokens":4,"messages":[{"role":"user","content":"` + words + `"}]}`, true, true},
		{"case-folded key", `{"MESSAGES":[{"ROLE":"user","Content":"` + words + `"}]}`, true, true},
		{"long model", `{"model":"` + words + `","messages":[{"role":"user","content":"hi"}]}`, true, false},
		{"long role", `{"messages":[{"role":"` + words + `","content":"` + esc + `"}]}`, true, false},
		{"long stop", `{"stop":"` + words + `","messages":[{"role":"user","content":"` + esc + `"}]}`, true, false},
		{"long stop list", `{"stop":["x","` + words + `"],"messages":[{"role":"user","content":"` + esc + `"}]}`, true, false},
		{"long key", `{"` + words + `":1,"messages":[{"role":"user","content":"` + esc + `"}]}`, true, false},
		{"short nul string", `{"messages":[{"role":"user","content":"` + words + `"},{"role":"user","content":"\u00000"}]}`, true, false},
		{"escaped nul spelling", `{"messages":[{"role":"user","content":"` + words + `"},{"role":"user","content":"\\u00000"}]}`, true, false},
		{"content number", `{"messages":[{"role":"user","content":"` + words + `"},{"role":"user","content":5}]}`, true, false},
		{"content object", `{"messages":[{"role":"user","content":{"text":"` + words + `"}}]}`, true, false},
		{"null content", `{"messages":[{"role":"user","content":null},{"role":"user","content":"` + words + `"}]}`, true, true},
		{"no messages", `{"messages":[],"prompt":"` + words + `"}`, true, false},
		{"control char", chat(msg("user", words+"\x01")), true, false},
		{"control char 0x1f", chat(msg("user", "\x1f"+words)), true, false},
		{"del is fine", chat(msg("user", words+"\x7f")), true, true},
		{"tab raw", chat(msg("user", words+"\t")), true, false},
		{"bad escape", chat(msg("user", words+`\x`)), true, false},
		{"bad unicode escape", chat(msg("user", words+`\u12g4`)), true, false},
		{"short unicode escape", chat(msg("user", words+`\u12"`)), true, false},
		{"escaped quote at the end", chat(msg("user", words+`\"`)), true, true},
		{"unterminated", `{"messages":[{"role":"user","content":"` + words, true, false},
		{"truncated", chat(msg("user", words))[:len(chat(msg("user", words)))-2], true, false},
		{"trailing garbage", chat(msg("user", words)) + ` garbage "x" {`, true, true},
		{"trailing garbage string", chat(msg("user", words)) + ` garbage "` + esc, true, false},
		{"trailing unterminated", chat(msg("user", words)) + `{"x":"`, true, false},
		{"trailing long literal", chat(msg("user", words)) + `"` + esc + `"`, true, false},
		{"syntax error after literal", `{"messages":[{"role":"user","content":"` + words + `" "x"}]}`, true, false},
		{"syntax error before literal", `{"messages":[{"role":"user",,"content":"` + words + `"}]}`, true, false},
		{"type error", `{"max_tokens":"` + words + `","stream":true,"messages":[{"role":"user","content":"` + esc + `"}]}`, true, false},
		{"type error short", `{"max_tokens":"x","stream":true,"messages":[{"role":"user","content":"` + esc + `"}]}`, true, false},
		{"bom", "\xef\xbb\xbf" + chat(msg("user", words)), true, false},
		{"empty", ``, true, false},
		{"array", `[]`, true, false},
		{"n=2", `{"n":2,"messages":[{"role":"user","content":"` + words + `"}]}`, true, true},
		{"wrong model", `{"model":"other","messages":[{"role":"user","content":"` + words + `"}]}`, true, true},
		{"max_tokens too big", `{"max_tokens":1048576,"messages":[{"role":"user","content":"` + words + `"}]}`, true, true},
		{"prompt string", prompt(`"` + words + `"`), false, true},
		{"prompt escapes", prompt(`"` + esc + `"`), false, true},
		{"prompt invalid utf8", prompt(`"` + badUTF8 + `"`), false, true},
		{"prompt surrogates", prompt(`"` + pairs + `"`), false, true},
		{"prompt list", prompt(`["` + uni + `"]`), false, true},
		{"prompt list of two", prompt(`["` + words + `","` + esc + `"]`), false, false},
		{"prompt ids", prompt(`[1,2,35,-7]`), false, false},
		{"prompt id lists", prompt(`[[1,2,3]]`), false, false},
		{"prompt number", prompt(`5`), false, false},
		{"prompt object", prompt(`{"text":"` + words + `"}`), false, false},
		{"prompt with messages", `{"messages":[{"role":"user","content":"` + esc + `"}],"prompt":"` + words + `"}`, false, false},
		{"prompt and stop", `{"stop":["\n","Q:"],"prompt":"` + words + `"}`, false, true},
		{"gsm8k question", prompt(`"` + strings.Repeat(`Question: what?\nAnswer: 1\n\n`, 60) + `Question: Janet\u2019s ducks lay 16 eggs per day.\nAnswer:"`), false, true},
	}
}

// reqFor is an http.Request carrying body: with its Content-Length, or
// without one and read in small pieces (a chunked upload).
func reqFor(body string, chunked bool) *http.Request {
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = iotest.HalfReader(r)
	}
	req, err := http.NewRequest("POST", "/v1/chat/completions", r)
	if err != nil {
		panic(err)
	}
	if chunked {
		req.ContentLength = -1
	}
	return req
}

// sameParse checks that parseCompletion answers body as the reference does.
func sameParse(t *testing.T, s *Server, body string, chat, chunked bool) {
	t.Helper()
	want, wantErr := refParseCompletion(s, strings.NewReader(body), chat)
	got, gotErr := s.parseCompletion(reqFor(body, chunked), chat)
	require.Equal(t, wantErr, gotErr)
	checkPrompt(t, want.prompt, got.prompt, s.gsm != nil)
	require.Equal(t, want.maxTokens, got.maxTokens)
	require.Equal(t, want.stops, got.stops)
	require.Equal(t, withoutPrompt(want.req), withoutPrompt(got.req))
}

func checkPrompt(t *testing.T, want, got promptInfo, keepText bool) {
	t.Helper()
	require.Equal(t, want.tokens, got.tokens, "tokens")
	require.Equal(t, want.hash, got.hash, "hash")
	require.Equal(t, want.pages, got.pages, "pages")
	if keepText {
		require.Equal(t, want.text, got.text, "text")
	} else {
		require.Empty(t, got.text, "text is kept only for a GSM8K split")
	}
}

// sameIntake checks intake.parse with cut threshold cut against the
// reference decode and analysis, and reports whether it took the fast path.
func sameIntake(t *testing.T, body string, chat bool, cut int) bool {
	t.Helper()
	var want completionRequest
	wantErr := json.NewDecoder(strings.NewReader(body)).Decode(&want)
	var wantInfo promptInfo
	var wantPromptErr error
	if wantErr == nil {
		wantInfo, wantPromptErr = refAnalyzePrompt(&want, chat, 4)
	}
	in := &intake{long: cut}
	var got completionRequest
	info, promptErr, err := in.parse(reqFor(body, false), &got, chat, 4, true)
	require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(err), "decode error")
	require.Equal(t, fmt.Sprint(wantPromptErr), fmt.Sprint(promptErr), "prompt error")
	require.Equal(t, withoutPrompt(want), withoutPrompt(got))
	if wantErr == nil && wantPromptErr == nil {
		checkPrompt(t, wantInfo, info, true)
	}
	return in.fast
}

func TestIntakeMatchesReference(t *testing.T) {
	t.Parallel()
	plain, err := New(Config{FastMode: true})
	require.NoError(t, err)
	gsm, err := New(Config{FastMode: true, GSM8KPath: gsm8kTestPath})
	require.NoError(t, err)
	for _, tc := range intakeCases() {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []*Server{plain, gsm} {
				sameParse(t, s, tc.body, tc.chat, false)
				sameParse(t, s, tc.body, tc.chat, true)
				sameParse(t, s, tc.body, !tc.chat, false)
			}
			require.Equal(t, tc.fast, sameIntake(t, tc.body, tc.chat, 0), "fast path")
		})
	}
}

func TestIntakeFastPathFigures(t *testing.T) {
	t.Parallel()
	// FuzzIntake's small thresholds reach the fast path on small bodies.
	require.True(t, sameIntake(t, `{"messages":[{"role":"user","content":"a b\u2003c"}]}`, true, 9))
	require.True(t, sameIntake(t, `{"prompt":["a long\tprompt"],"stop":"\n"}`, false, 9))

	// Figures counted by hand: 367 words of "ab ", then "x", an em space
	// (U+2003, a separator) and "y"; a page every 4 words.
	body := `{"messages":[{"role":"system","content":"` + long("ab ", 1100) + `"},{"role":"user","content":"x\u2003y"}]}`
	in := &intake{}
	var req completionRequest
	info, promptErr, err := in.parse(reqFor(body, false), &req, true, 4, false)
	require.NoError(t, err)
	require.NoError(t, promptErr)
	require.True(t, in.fast)
	require.Equal(t, 1100/3+1+2, info.tokens, "words of both messages; U+2003 separates")
	require.Len(t, info.pages, info.tokens/4)
}

func TestIntakeReadError(t *testing.T) {
	t.Parallel()
	s, err := New(Config{FastMode: true})
	require.NoError(t, err)
	boom := errors.New("connection reset")
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"` + long("a b ", 3000) + `"}]}`,
		`{"messages":[{"role":"user","content":"hi"}]}`,
	} {
		for _, n := range []int{0, 10, len(body) - 1, len(body)} {
			rd := func() io.Reader { return io.MultiReader(strings.NewReader(body[:n]), errReader{boom}) }
			want, wantErr := refParseCompletion(s, rd(), true)
			r, err := http.NewRequest("POST", "/v1/chat/completions", rd())
			require.NoError(t, err)
			got, gotErr := s.parseCompletion(r, true)
			require.Equal(t, wantErr, gotErr, "cut at %d", n)
			checkPrompt(t, want.prompt, got.prompt, false)
		}
	}
}

func TestHasControl(t *testing.T) {
	t.Parallel()
	for i := range 40 {
		for _, c := range []byte{0, 0x1f, 0x20, 0x7f, 0x80, 0x9f, 0xff, '"'} {
			b := bytes.Repeat([]byte{'a'}, 40)
			b[i] = c
			want := c < 0x20
			require.Equal(t, want, hasControl(b), "byte %#x at %d", c, i)
			require.Equal(t, want, hasControl(b[i:]), "byte %#x first", c)
			require.Equal(t, want, hasControl(b[:i+1]), "byte %#x last", c)
		}
	}
}

func FuzzIntake(f *testing.F) {
	for _, tc := range intakeCases() {
		f.Add(tc.body, tc.chat, uint8(0))
	}
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"a b\u2003c"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a\ud83d"},{"text":"b"}]}]}`,
		`{"prompt":["a long\tprompt"],"stop":"\n"}`, `{"prompt":"\u00001"}`, `{"prompt":"\\u0000"}`,
	} {
		f.Add(s, true, uint8(3))
		f.Add(s, false, uint8(3))
		f.Add(s, true, uint8(1))
	}
	f.Fuzz(func(t *testing.T, body string, chat bool, cut uint8) {
		// Small thresholds cut short strings too (keys, roles, stops), so
		// fuzzed bodies of any size reach the placeholder machinery.
		sameIntake(t, body, chat, []int{0, 1, 4, 9}[cut%4])
	})
}

func FuzzScanString(f *testing.F) {
	for _, s := range []string{"", "a", `\"`, `\\`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, "\xff", `\x`, `\u12`, "\x01", "tab\t", `a"b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := `"` + s + `"`
		end, esc, ok := scanString([]byte(lit), 1)
		require.Equal(t, json.Valid([]byte(lit)), ok && end == len(lit)-1, "%q", lit)
		if ok && end == len(lit)-1 {
			require.Equal(t, strings.Contains(s, `\`), esc)
			var want string
			require.NoError(t, json.Unmarshal([]byte(lit), &want))
			require.Equal(t, want, string(appendUnquoted(nil, []byte(s))), "%q", lit)
		}
	})
}

func FuzzPrefixHasher(f *testing.F) {
	for _, s := range []string{"", "a b", " a  b c d e f g h i ", "Janet’s\u00a0ducks\u2003x", "\xff\xfe bad\xe2\x80", "\u3000\u0085x"} {
		f.Add(s, s, 3)
	}
	f.Fuzz(func(t *testing.T, a, b string, block int) {
		block = block%9 - 4 // negative periods page like positive ones
		if block == 0 {
			block = 1
		}
		want := &refHasher{h: fnvOffset, block: block}
		got := newPrefixHasher(block)
		want.mark("user")
		got.mark("user")
		want.text(a)
		got.text(a)
		want.mark("assistant")
		got.mark("assistant")
		want.text(b)
		got.text(b)
		require.Equal(t, want.finish(), got.finish())
		require.Equal(t, want.tokens, got.tokens)
		require.Equal(t, want.h, got.h)
	})
}

// BenchmarkAgentXPromptIntake is the simulator's per-request CPU for an
// AgentX-sized chat request: parseCompletion reads the body of an
// http.Request, decodes it, counts the prompt's tokens and hashes its
// prefix-cache pages. One op is one request.
//
//	go test ./sim -run '^$' -bench AgentXPromptIntake -benchtime 2s
func BenchmarkAgentXPromptIntake(b *testing.B) {
	s, err := New(Config{FastMode: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, words := range []int{8_000, 45_000, 90_000} {
		b.Run(fmt.Sprintf("in=%d", words), func(b *testing.B) {
			var sb strings.Builder
			sb.WriteString(`{"model":"` + DefaultModel + `","stream":true,"max_tokens":2000,"ignore_eos":true,"messages":[{"role":"user","content":"`)
			for i := range words {
				if i > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString([]string{"kernel", "tensor", "cache", "prefill", "decode", "batch"}[i%6])
			}
			sb.WriteString(`"}]}`)
			body := []byte(sb.String())
			rd := bytes.NewReader(body)
			r, err := http.NewRequest("POST", "/v1/chat/completions", rd)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				pr, apiErr := s.parseCompletion(r, true)
				if apiErr != nil || pr.prompt.tokens != words {
					b.Fatal(apiErr, pr.prompt.tokens)
				}
			}
		})
	}
}
