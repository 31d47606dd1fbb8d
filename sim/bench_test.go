package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFastModeChunks measures how many SSE chunks per second the
// simulator's fast mode pushes over 127.0.0.1 to a minimal raw-TCP client
// that only counts events (so the figure is the server's, sharing the CPU
// with the cheapest possible reader). One op is one chunk (one token).
//
//	go test ./sim -run '^$' -bench FastModeChunks -benchtime 200000x
//
// The "paced" cases use a 10 ms ITL: at c1280 that is a target of 128k
// chunks/s, the load-generator capacity scenario.
func BenchmarkFastModeChunks(b *testing.B) {
	for _, bc := range []struct {
		name string
		conc int
		itl  time.Duration
	}{
		{"unpaced/c64", 64, 0},
		{"unpaced/c1280", 1280, 0},
		{"paced-10ms/c1280", 1280, 10 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := New(Config{FastMode: true, FixedITL: bc.itl, TimelineCapacity: 2 * bc.conc})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			addrc := make(chan string, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addrc <- a })
			}()
			addr := <-addrc
			defer func() { cancel(); <-done }()

			perStream := max(b.N/bc.conc, 1)
			body := fmt.Sprintf(`{"model":%q,"prompt":"bench","max_tokens":%d,"ignore_eos":true,"stream":true}`, DefaultModel, perStream)
			req := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", addr, len(body), body)
			var events atomic.Int64
			var wg sync.WaitGroup
			conns := make([]net.Conn, bc.conc)
			for i := range conns { // connect first so setup stays out of the timing
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				conns[i] = c
			}
			b.ResetTimer()
			start := time.Now()
			for _, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					if _, err := io.WriteString(c, req); err != nil {
						b.Error(err)
						return
					}
					events.Add(countEvents(bufio.NewReaderSize(c, 64<<10)) - 1) // minus [DONE]
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			got := events.Load()
			if want := int64(perStream * bc.conc); got != want {
				b.Fatalf("counted %d chunks, want %d", got, want)
			}
			b.ReportMetric(float64(got)/elapsed.Seconds(), "chunks/s")
		})
	}
}

// countEvents counts "data: " event starts in a raw HTTP response (the
// pattern does not overlap itself, so a one-index matcher works across reads).
func countEvents(r io.Reader) int64 {
	const pat = "data: "
	buf := make([]byte, 64<<10)
	var n int64
	j := 0
	for {
		k, err := r.Read(buf)
		for _, c := range buf[:k] {
			switch {
			case c == pat[j]:
				j++
				if j == len(pat) {
					n++
					j = 0
				}
			case c == pat[0]:
				j = 1
			default:
				j = 0
			}
		}
		if err != nil {
			return n
		}
	}
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
