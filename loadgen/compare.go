package loadgen

// ServerTimeline is what a server recorded for one request: wall-clock Unix
// nanoseconds of its arrival at the handler and of each token chunk's flush.
// The simulator exposes it (sim.Server.Timeline, GET /sim/timeline?id=).
type ServerTimeline struct {
	ArrivalNs   int64
	ChunkNs     []int64
	ChunkTokens []int
}

// TimestampComparison measures the client's timing error against the
// server's own send times. All values are in seconds.
//
// The reference for TTFT is the time from the client's send to the server's
// flush of the first chunk (both instants the client's TTFT spans, with the
// end taken from the server), so TTFT error is how late the client saw the
// first chunk. The reference for ITL is the gap between the server's flushes
// of consecutive chunks.
type TimestampComparison struct {
	Matched            int // successful requests found on the server
	ChunkCountMismatch int // requests where the client saw a different number of chunks
	TokenMismatch      int // requests whose per-chunk token counts differ

	// ChunkLag is client read time minus server flush time over all chunks.
	ChunkLag Summary
	// TTFTErr is client TTFT minus reference TTFT per request (= the first
	// chunk's lag); ITLErr client gap minus server gap per chunk gap.
	TTFTErr, ITLErr       Summary
	TTFTAbsErr, ITLAbsErr Summary
	ClientMeanTTFT        float64
	RefMeanTTFT           float64 // server first flush - client send
	ClientMeanITL         float64
	ServerMeanITL         float64

	// For context, not client error: the server's own TTFT (arrival at its
	// handler to first flush) and the time from the request being written by
	// the client to its arrival at the handler (the server's accept/parse
	// queue, large when many requests arrive at once).
	ServerMeanTTFT float64
	PreHandler     Summary
	// RequestWrite is client send to request written (pool wait + write).
	RequestWrite Summary
}

// CompareTimelines matches successful requests to server timelines by
// response id and compares timestamps. Client times are converted to wall
// clock with the run's start instant (Result.StartedAt).
func CompareTimelines(res *Result, lookup func(id string) (ServerTimeline, bool)) TimestampComparison {
	var out TimestampComparison
	base := res.StartedAt.UnixNano()
	var lag, ttftErr, itlErr, ttftAbs, itlAbs, pre, write []float64
	var cTTFT, rTTFT, sTTFT, cITL, sITL float64
	var nITL int
	for i := range res.Requests {
		r := &res.Requests[i]
		if !r.Success || r.ResponseID == "" {
			continue
		}
		tl, ok := lookup(r.ResponseID)
		if !ok {
			continue
		}
		out.Matched++
		if len(tl.ChunkNs) != len(r.ChunkNs) {
			out.ChunkCountMismatch++
			continue
		}
		for j := range tl.ChunkTokens {
			if int(r.ChunkTokens[j]) != tl.ChunkTokens[j] {
				out.TokenMismatch++
				break
			}
		}
		for j := range r.ChunkNs {
			lag = append(lag, float64(base+r.ChunkNs[j]-tl.ChunkNs[j])/1e9)
		}
		ct := float64(r.ChunkNs[0]-r.SendNs) / 1e9
		rt := float64(tl.ChunkNs[0]-(base+r.SendNs)) / 1e9
		cTTFT += ct
		rTTFT += rt
		sTTFT += float64(tl.ChunkNs[0]-tl.ArrivalNs) / 1e9
		ttftErr = append(ttftErr, ct-rt)
		ttftAbs = append(ttftAbs, abs(ct-rt))
		if r.WrittenNs > 0 {
			pre = append(pre, float64(tl.ArrivalNs-(base+r.WrittenNs))/1e9)
			write = append(write, float64(r.WrittenNs-r.SendNs)/1e9)
		}
		for j := 1; j < len(r.ChunkNs); j++ {
			cg := float64(r.ChunkNs[j]-r.ChunkNs[j-1]) / 1e9
			sg := float64(tl.ChunkNs[j]-tl.ChunkNs[j-1]) / 1e9
			cITL += cg
			sITL += sg
			nITL++
			itlErr = append(itlErr, cg-sg)
			itlAbs = append(itlAbs, abs(cg-sg))
		}
	}
	if n := float64(len(ttftErr)); n > 0 {
		out.ClientMeanTTFT, out.RefMeanTTFT, out.ServerMeanTTFT = cTTFT/n, rTTFT/n, sTTFT/n
	}
	if nITL > 0 {
		out.ClientMeanITL, out.ServerMeanITL = cITL/float64(nITL), sITL/float64(nITL)
	}
	out.ChunkLag = Summarize(lag)
	out.TTFTErr, out.ITLErr = Summarize(ttftErr), Summarize(itlErr)
	out.TTFTAbsErr, out.ITLAbsErr = Summarize(ttftAbs), Summarize(itlAbs)
	out.PreHandler, out.RequestWrite = Summarize(pre), Summarize(write)
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
