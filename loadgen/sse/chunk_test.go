package sse

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseChunk(t *testing.T) {
	t.Parallel()
	type want struct {
		id, content, reasoning, finish, fp string
		choices, usage, isErr              bool
		pt, ct, cached, catchUp            int
	}
	cases := []struct {
		name string
		in   string
		want want
	}{
		{"role only", `{"id":"chatcmpl-sim-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			want{id: "chatcmpl-sim-1", choices: true}},
		{"content", `{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`,
			want{id: "c1", content: "Hel", choices: true}},
		{"escaped content", `{"choices":[{"delta":{"content":"a\"b\\c\n\u00e9\ud83d\ude00"}}]}`,
			want{content: "a\"b\\c\né😀", choices: true}},
		{"reasoning_content", `{"choices":[{"delta":{"reasoning_content":"think"}}]}`,
			want{reasoning: "think", choices: true}},
		{"reasoning", `{"choices":[{"delta":{"reasoning":"think2","content":null}}]}`,
			want{reasoning: "think2", choices: true}},
		{"reasoning_content wins over reasoning", `{"choices":[{"delta":{"reasoning":"b","reasoning_content":"a"}}]}`,
			want{reasoning: "a", choices: true}},
		{"empty reasoning_content falls back", `{"choices":[{"delta":{"reasoning_content":"","reasoning":"b"}}]}`,
			want{reasoning: "b", choices: true}},
		{"completions text", `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" world","finish_reason":null}]}`,
			want{id: "cmpl-1", content: " world", choices: true}},
		{"finish only", `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
			want{finish: "length", choices: true}},
		{"usage with empty choices", `{"id":"c1","choices":[],"usage":{"prompt_tokens":8192,"completion_tokens":1024,"total_tokens":9216}}`,
			want{id: "c1", usage: true, pt: 8192, ct: 1024}},
		{"usage with null choices", `{"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":3}}}`,
			want{usage: true, pt: 5, ct: 7, cached: 3}},
		{"usage without choices", `{"usage":{"prompt_tokens":1,"completion_tokens":2}, "system_fingerprint":"sweepflow-simulated"}`,
			want{usage: true, pt: 1, ct: 2, fp: "sweepflow-simulated"}},
		{"error payload", `{"error":{"message":"boom","type":"InternalServerError","code":504}}`,
			want{isErr: true}},
		{"null error is not an error", `{"error":null,"choices":[{"delta":{"content":"x"}}]}`,
			want{content: "x", choices: true}},
		{"object error", `{"object":"error","message":"bad","code":400}`,
			want{isErr: true}},
		{"unknown nested keys skipped", `{"x":{"y":[1,2,{"z":"w"}],"q":true},"choices":[{"logprobs":{"content":[{"token":"a"}]},"delta":{"content":"ok","tool_calls":[]}}]}`,
			want{content: "ok", choices: true}},
		{"second choice ignored", `{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`,
			want{content: "a", choices: true}},
		{"float token counts", `{"usage":{"prompt_tokens":3.0,"completion_tokens":1e2}}`,
			want{usage: true, pt: 3, ct: 100}},
		{"simulator usage with catch-up gaps", `{"id":"c1","system_fingerprint":"sweepflow-simulated","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":9},"catch_up_gaps":4,"simulated":true}`,
			want{id: "c1", fp: "sweepflow-simulated", usage: true, pt: 4, ct: 9, catchUp: 4}},
		{"negative catch-up gaps read 0", `{"catch_up_gaps":-3}`, want{}},
		{"whitespace", " { \"choices\" : [ { \"delta\" : { \"content\" : \"x\" } } ] } \n",
			want{content: "x", choices: true}},
	}
	var p Parser
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Chunk
			require.NoError(t, p.Parse([]byte(tc.in), &c))
			got := want{
				id: string(c.ID), content: string(c.Content), reasoning: string(c.Reasoning),
				finish: string(c.FinishReason), fp: string(c.SystemFingerprint),
				choices: c.HasChoices, usage: c.HasUsage, isErr: c.IsError,
				pt: c.PromptTokens, ct: c.CompletionTokens, cached: c.CachedTokens, catchUp: c.CatchUpGaps,
			}
			assert.Equal(t, tc.want, got)
			if tc.want.isErr {
				assert.NotEmpty(t, c.Error)
			}
			assert.True(t, json.Valid([]byte(tc.in)))
		})
	}
}

func TestParseChunkRejectsInvalid(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``, `[DONE]`, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":01}`, `{"a":1.}`,
		`{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{} {}`, `{"choices":[{"delta":{"content":"x"}]}`,
		`{"a":"\u12"}`, `{"a":-}`, `{"a":1e}`,
	} {
		var p Parser
		var c Chunk
		assert.Error(t, p.Parse([]byte(in), &c), "input %q", in)
		assert.False(t, json.Valid([]byte(in)) && len(bytes.TrimSpace([]byte(in))) > 0 && bytes.TrimSpace([]byte(in))[0] == '{', in)
	}
}

// reference decodes the same fields with encoding/json and the same leniency
// rules (wrong types read as absent, last duplicate key wins).
func reference(data []byte) (content, reasoning string, usage bool, pt, ct int, isErr bool, ok bool) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return "", "", false, 0, 0, false, false
	}
	num := func(v any) int {
		f, _ := v.(float64)
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
	if ch, _ := m["choices"].([]any); len(ch) > 0 {
		if c0, _ := ch[0].(map[string]any); c0 != nil {
			if d, _ := c0["delta"].(map[string]any); d != nil {
				content, _ = d["content"].(string)
				rc, _ := d["reasoning_content"].(string)
				rs, _ := d["reasoning"].(string)
				reasoning = rc
				if rc == "" {
					reasoning = rs
				}
			}
		}
	}
	if u, _ := m["usage"].(map[string]any); u != nil {
		usage = true
		pt, ct = num(u["prompt_tokens"]), num(u["completion_tokens"])
	}
	if e, has := m["error"]; has && e != nil {
		isErr = true
	}
	if o, _ := m["object"].(string); o == "error" {
		isErr = true
	}
	return content, reasoning, usage, pt, ct, isErr, true
}

// FuzzChunk checks the hand-rolled extractor against encoding/json: it
// accepts exactly the JSON objects encoding/json accepts and extracts the
// same values, and it never panics.
func FuzzChunk(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":8192,"completion_tokens":1024}}`,
		`{"choices":[{"delta":{"reasoning_content":"a\u00e9\ud83d\ude00","reasoning":"b"}}]}`,
		`{"error":{"message":"boom","code":504}}`,
		`{"object":"error","message":"x"}`,
		`{"choices":[{"text":"x"}],"choices":null}`,
		`{"usage":{"prompt_tokens":1},"usage":null}`,
		`{"a":[[[{"b":-1.5e+3}]]],"choices":[{"delta":{"content":"x","content":"y"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Parser
		var c Chunk
		err := p.Parse(data, &c)
		trim := bytes.TrimLeft(data, " \t\r\n")
		valid := json.Valid(data) && len(trim) > 0 && trim[0] == '{'
		if valid != (err == nil) {
			t.Fatalf("Parse err=%v but encoding/json valid=%v for %q", err, valid, data)
		}
		if err != nil || !utf8.Valid(data) {
			return
		}
		content, reasoning, usage, pt, ct, isErr, ok := reference(data)
		if !ok {
			return
		}
		// The "text" field (completions) is not in the reference; skip those.
		if bytes.Contains(data, []byte(`"text"`)) {
			return
		}
		if string(c.Content) != content || string(c.Reasoning) != reasoning || c.HasUsage != usage ||
			(usage && (c.PromptTokens != pt || c.CompletionTokens != ct)) || c.IsError != isErr {
			t.Fatalf("mismatch for %q:\n got content=%q reasoning=%q usage=%v pt=%d ct=%d err=%v\nwant content=%q reasoning=%q usage=%v pt=%d ct=%d err=%v",
				data, c.Content, c.Reasoning, c.HasUsage, c.PromptTokens, c.CompletionTokens, c.IsError,
				content, reasoning, usage, pt, ct, isErr)
		}
	})
}

// FuzzSSE feeds arbitrary bytes through the event reader and the chunk
// parser. It must never panic, and splitting the input at any points must
// yield exactly the same events and parse results as reading it whole.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n"), uint16(3), uint16(17))
	f.Add([]byte(": ping\r\n\r\ndata:{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2},\"choices\":[]}\r\n\r\n"), uint16(1), uint16(2))
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\ndata: [DONE]"), uint16(5), uint16(9))
	f.Add([]byte("data: {\"a\":\ndata: 1}\n\n\n\ndata\n\n"), uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint16) {
		whole := parseAll(t, bytes.NewReader(data))
		split := parseAll(t, &splitReader{data: data, cuts: []int{int(a), int(b)}})
		oneByte := parseAll(t, &splitReader{data: data, one: true})
		if !equalResults(whole, split) || !equalResults(whole, oneByte) {
			t.Fatalf("split reads changed the result for %q (cuts %d,%d):\nwhole %v\nsplit %v\n1byte %v", data, a, b, whole, split, oneByte)
		}
	})
}

type parsed struct {
	Data    string
	Type    string
	ErrText string
	Content string
	Usage   bool
	IsErr   bool
}

func parseAll(t *testing.T, r io.Reader) []parsed {
	rd := NewReader(r, time.Now())
	var p Parser
	var c Chunk
	var out []parsed
	for {
		e, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				out = append(out, parsed{ErrText: err.Error()})
			}
			return out
		}
		pr := parsed{Data: string(e.Data), Type: string(e.Type)}
		if string(e.Data) != "[DONE]" {
			if perr := p.Parse(e.Data, &c); perr != nil {
				pr.ErrText = perr.Error()
			} else {
				pr.Content, pr.Usage, pr.IsErr = string(c.Content), c.HasUsage, c.IsError
			}
		}
		out = append(out, pr)
	}
}

func equalResults(a, b []parsed) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// splitReader returns data in pieces cut at the given offsets (modulo the
// length), or one byte at a time.
type splitReader struct {
	data []byte
	cuts []int
	pos  int
	one  bool
}

func (s *splitReader) Read(p []byte) (int, error) {
	if s.pos >= len(s.data) {
		return 0, io.EOF
	}
	end := len(s.data)
	if s.one {
		end = s.pos + 1
	} else {
		for _, c := range s.cuts {
			if n := len(s.data); n > 0 {
				c %= n
				if c > s.pos && c < end {
					end = c
				}
			}
		}
	}
	n := copy(p, s.data[s.pos:end])
	s.pos += n
	return n, nil
}

var benchChunk = []byte(`{"id":"chatcmpl-sim-123456","object":"chat.completion.chunk","created":1764460000,"model":"deepseek-ai/DeepSeek-V4-Pro","system_fingerprint":"sweepflow-simulated","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null}`)

// stdChunk is the smallest encoding/json target holding the same fields.
type stdChunk struct {
	ID                string `json:"id"`
	SystemFingerprint string `json:"system_fingerprint"`
	Object            string `json:"object"`
	Error             json.RawMessage
	Choices           []struct {
		Text  *string `json:"text"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func BenchmarkParseChunk(b *testing.B) {
	var p Parser
	var c Chunk
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		if err := p.Parse(benchChunk, &c); err != nil || len(c.Content) == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseChunkEncodingJSON(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		var c stdChunk
		if err := json.Unmarshal(benchChunk, &c); err != nil || len(c.Choices) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkReaderAndParse measures the whole per-chunk client path after the
// socket: framing plus field extraction, over a 1024-chunk stream.
func BenchmarkReaderAndParse(b *testing.B) {
	var stream bytes.Buffer
	for range 1024 {
		stream.WriteString("data: ")
		stream.Write(benchChunk)
		stream.WriteString("\n\n")
	}
	stream.WriteString("data: [DONE]\n\n")
	data := stream.Bytes()
	rd := NewReader(nil, time.Now())
	var p Parser
	var c Chunk
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rd.Reset(bytes.NewReader(data), time.Now())
		for {
			e, err := rd.Next()
			if err == io.EOF {
				break
			}
			if string(e.Data) == "[DONE]" {
				continue
			}
			if err := p.Parse(e.Data, &c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/chunk")
}
