package loadgen

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/sweepflow/sweepflow/sim"
)

// BenchmarkClientCapacity drives the simulator's fixed-latency fast mode over
// real TCP on 127.0.0.1 (simulator in-process) with one token per chunk and
// reports what the client sustained and how closely its timestamps follow the
// simulator's own send times:
//
//	go test ./loadgen -run '^$' -bench ClientCapacity -benchtime 1x
//
// chunks/s is token chunks received per second of run time. TTFT error is
// the client's TTFT minus the reference (client send to the simulator's
// flush of the first chunk), ITL error the client's chunk gap minus the
// simulator's; *_mean_err_% compares the means, *_p99_abs_ms is the 99th
// percentile of the absolute per-request (TTFT) or per-gap (ITL) error.
// This benchmark keeps the simulator in the test process, so the two share
// one Go runtime and the timing errors include the simulator's scheduling;
// "starter bench capacity" is the reference measurement: it runs the
// simulator as a separate process (pinned apart from the client for the
// accuracy point) and prints a table.
func BenchmarkClientCapacity(b *testing.B) {
	for _, tc := range []struct {
		conc, osl int
		itl       time.Duration
	}{
		{1280, 200, 10 * time.Millisecond},
		{256, 200, 20 * time.Millisecond},
	} {
		b.Run(fmt.Sprintf("c%d", tc.conc), func(b *testing.B) {
			old := debug.SetGCPercent(400)
			defer debug.SetGCPercent(old)
			s, err := sim.New(sim.Config{FixedTTFT: 50 * time.Millisecond, FixedITL: tc.itl, TimelineCapacity: 4 * tc.conc * 4})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := make(chan string, 1)
			go func() { _ = s.ListenAndServe(ctx, "127.0.0.1:0", func(a string) { addr <- a }) }()
			url := "http://" + <-addr
			lookup := func(id string) (ServerTimeline, bool) {
				tl, ok := s.Timeline(id)
				return ServerTimeline{ArrivalNs: tl.ArrivalNs, ChunkNs: tl.ChunkNs, ChunkTokens: tl.ChunkTokens}, ok
			}
			var chunks int
			var secs float64
			var last TimestampComparison
			for b.Loop() {
				res, err := Run(ctx, Options{
					BaseURL: url, Concurrency: tc.conc, NumPrompts: 2 * tc.conc, NumWarmups: tc.conc,
					ISL: 128, OSL: tc.osl, RandomRangeRatio: 0.8, IgnoreEOS: true, Seed: 1,
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := res.Gate(); err != nil {
					b.Fatal(err)
				}
				for i := range res.Requests {
					chunks += len(res.Requests[i].ChunkNs)
				}
				secs += res.Aggregate.Duration
				last = CompareTimelines(res, lookup)
			}
			b.ReportMetric(float64(chunks)/secs, "chunks/s")
			b.ReportMetric(100*abs(last.ClientMeanTTFT-last.RefMeanTTFT)/last.RefMeanTTFT, "ttft_mean_err_%")
			b.ReportMetric(100*abs(last.ClientMeanITL-last.ServerMeanITL)/last.ServerMeanITL, "itl_mean_err_%")
			b.ReportMetric(last.TTFTAbsErr.P99*1e3, "ttft_p99_abs_ms")
			b.ReportMetric(last.ITLAbsErr.P99*1e3, "itl_p99_abs_ms")
			b.ReportMetric(last.ITLAbsErr.Median*1e3, "itl_p50_abs_ms")
			b.ReportMetric(last.ChunkLag.P99*1e3, "chunk_lag_p99_ms")
		})
	}
}

// BenchmarkReplayPrompt is loadgen's per-call CPU for an AgentX call: the
// prompt synthesised from hash ids and the request body around it. One op
// is one call of the default trace's size range.
//
//	go test ./loadgen -run '^$' -bench ReplayPrompt
func BenchmarkReplayPrompt(b *testing.B) {
	tr := DefaultTrace(1)
	rt := prepareTrace(&tr[0], 10)
	bodies, err := newBodyBuilder("m", true, nil)
	if err != nil {
		b.Fatal(err)
	}
	var shared sync.Map
	p := &play{rt: rt, marker: "[rid:000000000000]", seen: map[uint64]struct{}{}}
	var body []byte
	var bytesOut int64
	for i := 0; b.Loop(); i++ {
		r := rt.steps[rt.mains[i%len(rt.mains)]].call
		body, _, _ = p.appendBody(body[:0], bodies, r, false, &shared)
		bytesOut += int64(len(body))
	}
	b.ReportMetric(float64(bytesOut)/float64(b.N)/1e3, "KB/call")
}
