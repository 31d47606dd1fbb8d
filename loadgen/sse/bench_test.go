package sse

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"
)

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
