package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pinTraces covers every way replay builds a prompt: generated sessions
// with subagents and compaction, the corpus fixture, calls whose hash ids
// stop short of their prompt (filler text) and "global" hash id scope.
func pinTraces(t *testing.T) []Trace {
	tr := GenerateTrace(11, 3, TraceShape{MainCalls: 8, SubagentEvery: 2, MaxContext: 30000})
	fx := loadFixture(t)
	short := fx[0]
	short.ID = "fx-short-ids"
	short.Requests = append([]Request(nil), fx[0].Requests...)
	short.Requests[1].HashIDs = short.Requests[1].HashIDs[:40] // 58 blocks of prompt, 40 ids
	glob := fx[1]
	glob.ID, glob.HashIDScope = "fx-global", "global"
	return append(tr, fx[0], short, glob)
}

// TestReplayBodiesPinned pins the bytes of every request body and the
// fields replay derives from each prompt (token counts, cacheable prefix)
// for seeded single-lane runs, so a change in how prompts and bodies are
// built cannot change what is sent. The digests were recorded from the
// implementation that built each prompt into a text buffer and escaped it
// into the body afterwards. It is CPU-heavy (16 MB of bodies), so it runs
// before the parallel, timing-sensitive tests rather than beside them.
func TestReplayBodiesPinned(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		extra    map[string]any
		want     string
	}{
		{"chat", "", nil, "594068ff521dc39fb9d5c09d454fc503db1c722096739419245c72ea281c5598"},
		{"completions with extra fields", "/v1/completions", map[string]any{"temperature": 0.5, "max_tokens": 7}, "537860e057f2a95b4ce2233e03f53984890973212d2a753a0e7de75d2d0eb872"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, &fakeServer{tokensPerChunk: 100, completions: tc.endpoint != ""})
			res, err := Run(context.Background(), Options{
				BaseURL: srv.URL(), Endpoint: tc.endpoint, Model: "m", Concurrency: 1, Trace: pinTraces(t),
				NumPrompts: 9, NumWarmups: 2, TimeScale: 1e-6, Seed: 5, Extra: tc.extra,
			})
			require.NoError(t, err)
			require.NoError(t, res.Gate())
			played := map[string]bool{}
			for _, r := range res.Requests {
				played[r.SessionID[:strings.LastIndexByte(r.SessionID, '#')]] = true
				played["subagent"] = played["subagent"] || r.Subagent
			}
			for _, want := range []string{"trace-1", "trace-2", "trace-3", "fx-0001", "fx-short-ids", "fx-global", "subagent"} {
				require.True(t, played[want], "the pinned run covers %s", want)
			}
			bodies := srv.rawBodies()
			require.Len(t, bodies, len(res.Warmups)+len(res.Requests))
			h := sha256.New()
			for _, b := range bodies {
				writeLen(h, len(b))
				h.Write(b)
			}
			for _, recs := range [][]RequestRecord{res.Warmups, res.Requests} {
				for _, r := range recs {
					fmt.Fprintf(h, "%d|%v|%s|%d|%v|%d|%d|%d|%d\n", r.Index, r.Warmup, r.SessionID, r.Turn, r.Subagent,
						r.RequestedPromptTokens, r.PromptTokens, r.MaxTokens, r.cacheable)
				}
			}
			got := hex.EncodeToString(h.Sum(nil))
			t.Logf("%d warmups, %d calls, %d body bytes, digest %s", len(res.Warmups), len(res.Requests), totalLen(bodies), got)
			assert.Equal(t, tc.want, got, "request bodies or prompt figures changed")
		})
	}
}

func writeLen(h hash.Hash, n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func totalLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}
