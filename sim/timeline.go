package sim

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Timeline is what the simulator itself recorded for one request, so a
// client can check its own measurements against the sender's clock. Times
// are wall-clock Unix nanoseconds, comparable across processes on one host.
//
// ChunkNs holds, for every SSE event that carried tokens (content or
// reasoning), the time its Flush returned; ChunkTokens the tokens in it. The
// role is sent with the first token and finish_reason with the last, so
// there are no token-less chunks apart from the usage chunk and [DONE],
// which are not listed. A non-streaming response is one chunk written when
// the whole body was flushed.
type Timeline struct {
	ID               string  `json:"id"`
	Endpoint         string  `json:"endpoint"`
	Stream           bool    `json:"stream"`
	ArrivalNs        int64   `json:"arrival_ns"`
	ChunkNs          []int64 `json:"chunk_ns"`
	ChunkTokens      []int   `json:"chunk_tokens"`
	DoneNs           int64   `json:"done_ns"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	FinishReason     string  `json:"finish_reason,omitempty"`
	Status           int     `json:"status"`
	Error            string  `json:"error,omitempty"`
	Simulated        bool    `json:"simulated"`
}

// record is the compact form kept in the ring (12 bytes per chunk).
type record struct {
	n               uint64
	id              string
	endpoint        string
	stream          bool
	arrival, doneNs int64
	chunkNs         []int64
	chunkTok        []int32
	prompt, cached  int
	completion      int
	finish, errText string
	status          int
	done            chan struct{} // closed when the request has finished
	counted         int           // chunks added to the store's budget (under its lock)
}

func (r *record) timeline() Timeline {
	t := Timeline{
		ID: r.id, Endpoint: r.endpoint, Stream: r.stream, ArrivalNs: r.arrival, DoneNs: r.doneNs,
		ChunkNs: append([]int64(nil), r.chunkNs...), ChunkTokens: make([]int, len(r.chunkTok)),
		PromptTokens: r.prompt, CachedTokens: r.cached, CompletionTokens: r.completion,
		FinishReason: r.finish, Status: r.status, Error: r.errText, Simulated: true,
	}
	for i, v := range r.chunkTok {
		t.ChunkTokens[i] = int(v)
	}
	return t
}

// timelineStore keeps the most recent requests, bounded both by request
// count and by total chunks so long outputs cannot exhaust memory.
type timelineStore struct {
	mu        sync.Mutex
	maxReqs   int
	maxChunks int
	byN       map[uint64]*record
	order     []uint64 // FIFO of n; head at start
	head      int
	chunks    int
}

func newTimelineStore(maxReqs, maxChunks int) *timelineStore {
	return &timelineStore{maxReqs: maxReqs, maxChunks: maxChunks, byN: make(map[uint64]*record, min(maxReqs, 1<<16))}
}

// begin registers a request as it arrives, so a lookup that races with the
// end of the response waits for it instead of missing it.
func (s *timelineStore) begin(r *record) {
	r.done = make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byN[r.n] = r
	s.order = append(s.order, r.n)
	s.evict()
}

// end publishes a finished request's chunks.
func (s *timelineStore) end(r *record) {
	s.mu.Lock()
	if s.byN[r.n] == r {
		r.counted = len(r.chunkNs)
		s.chunks += r.counted
	}
	s.evict()
	s.mu.Unlock()
	close(r.done)
}

func (s *timelineStore) evict() {
	for len(s.byN) > s.maxReqs || (s.chunks > s.maxChunks && len(s.byN) > 1) {
		old := s.order[s.head]
		s.head++
		if o := s.byN[old]; o != nil {
			s.chunks -= o.counted // 0 while in flight: chunks count at end
			delete(s.byN, old)
		}
	}
	if s.head > 4096 && s.head*2 > len(s.order) { // compact the FIFO
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}

// idNumber extracts n from "chatcmpl-sim-<n>" or "cmpl-sim-<n>".
func idNumber(id string) (uint64, bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || !strings.HasSuffix(id[:i], "-sim") {
		return 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	return n, err == nil
}

func (s *timelineStore) get(id string) (Timeline, bool) {
	n, ok := idNumber(id)
	if !ok {
		return Timeline{}, false
	}
	s.mu.Lock()
	r := s.byN[n]
	s.mu.Unlock()
	if r == nil || r.id != id {
		return Timeline{}, false
	}
	select {
	case <-r.done:
		return r.timeline(), true
	case <-time.After(timelineWait):
		return Timeline{}, false // still running
	}
}

// all returns the stored timelines oldest first.
func (s *timelineStore) all() []*record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*record, 0, len(s.byN))
	for _, n := range s.order[s.head:] {
		if r := s.byN[n]; r != nil && isClosed(r.done) {
			out = append(out, r)
		}
	}
	return out
}

// timelineWait is how long a lookup waits for a request that is still
// finishing (its response is being written).
const timelineWait = 2 * time.Second

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
