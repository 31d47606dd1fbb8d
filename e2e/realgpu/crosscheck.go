// Package realgpu holds the cross-check of the real-GPU run
// (scripts/real-gpu.sh, docs/performance.md "Real GPU"): sweepflow's perf
// figures, derived by loadgen from its request log, against those of an
// independent client (client.py: Python standard library, its own clock and
// arithmetic) that replayed the same requests on the same engine. The
// fixture server, the cross-check client and the scripts of that run live
// beside this file; the run itself needs a GPU, this package does not.
package realgpu

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/sweepflow/sweepflow/loadgen"
)

// Tolerance is how far apart the two clients' figures may be: 2 % of the
// independent client's.
const Tolerance = 0.02

// Figures are the three figures the cross-check judges, plus E2EL, which it
// reports beside them. Seconds and tokens per second.
type Figures struct {
	MedianTTFT       float64 `json:"median_ttft"`
	MeanITL          float64 `json:"mean_itl"`
	OutputThroughput float64 `json:"output_throughput"`
	MeanE2EL         float64 `json:"mean_e2el"`
	Completed        int     `json:"completed"`
}

// FromAggregate takes the figures of a loadgen aggregate.
func FromAggregate(a *loadgen.Aggregate) Figures {
	return Figures{MedianTTFT: a.MedianTTFT, MeanITL: a.MeanITL, OutputThroughput: a.OutputThroughput, MeanE2EL: a.MeanE2EL, Completed: a.Completed}
}

// Difference is one judged figure: ours, theirs and (ours-theirs)/theirs.
type Difference struct {
	Figure string  `json:"figure"`
	Ours   float64 `json:"ours"`
	Theirs float64 `json:"theirs"`
	Rel    float64 `json:"rel"`
	Agrees bool    `json:"agrees"`
}

// Verdict is the cross-check's answer for one point.
type Verdict struct {
	Agree       bool         `json:"agree"`
	Tolerance   float64      `json:"tolerance"`
	Differences []Difference `json:"differences"`
	// MeanE2EL is reported, not judged.
	MeanE2EL Difference `json:"mean_e2el"`
	Reason   string     `json:"reason"`
}

// Compare judges ours against theirs: median TTFT, mean ITL and output
// throughput must each lie within tol of the independent client's, and
// both clients must have completed the same requests.
func Compare(ours, theirs Figures, tol float64) Verdict {
	v := Verdict{Agree: true, Tolerance: tol}
	diff := func(name string, o, t float64) Difference {
		d := Difference{Figure: name, Ours: o, Theirs: t, Rel: math.Inf(1)}
		if t > 0 {
			d.Rel = (o - t) / t
		}
		d.Agrees = t > 0 && o > 0 && math.Abs(d.Rel) <= tol
		return d
	}
	v.Differences = []Difference{
		diff("median_ttft", ours.MedianTTFT, theirs.MedianTTFT),
		diff("mean_itl", ours.MeanITL, theirs.MeanITL),
		diff("output_throughput", ours.OutputThroughput, theirs.OutputThroughput),
	}
	v.MeanE2EL = diff("mean_e2el", ours.MeanE2EL, theirs.MeanE2EL)
	var bad []string
	if ours.Completed != theirs.Completed {
		bad = append(bad, fmt.Sprintf("completed %d vs %d requests", ours.Completed, theirs.Completed))
	}
	for _, d := range v.Differences {
		if !d.Agrees {
			bad = append(bad, fmt.Sprintf("%s %.5g vs %.5g (%+.2f%%)", d.Figure, d.Ours, d.Theirs, 100*d.Rel))
		}
	}
	if len(bad) > 0 {
		v.Agree = false
		v.Reason = fmt.Sprintf("outside ±%.0f%%: %v", 100*tol, bad)
		return v
	}
	v.Reason = fmt.Sprintf("median TTFT %+.2f%%, mean ITL %+.2f%%, output throughput %+.2f%% (within ±%.0f%%)",
		100*v.Differences[0].Rel, 100*v.Differences[1].Rel, 100*v.Differences[2].Rel, 100*tol)
	return v
}

// ClientSummary is what client.py writes (client_summary.json): its own
// figures, seconds and tokens per second.
type ClientSummary struct {
	Client           string         `json:"client"`
	Completed        int            `json:"completed"`
	Failed           int            `json:"failed"`
	Duration         float64        `json:"duration"`
	OutputThroughput float64        `json:"output_throughput"`
	MedianTTFT       float64        `json:"median_ttft"`
	MeanTTFT         float64        `json:"mean_ttft"`
	MeanITL          float64        `json:"mean_itl"`
	MedianITL        float64        `json:"median_itl"`
	MeanE2EL         float64        `json:"mean_e2el"`
	MedianE2EL       float64        `json:"median_e2el"`
	TotalOutput      int64          `json:"total_output_tokens"`
	Concurrency      int            `json:"concurrency"`
	Errors           map[string]int `json:"errors"`
}

// Figures are the client's own figures.
func (c ClientSummary) Figures() Figures {
	return Figures{MedianTTFT: c.MedianTTFT, MeanITL: c.MeanITL, OutputThroughput: c.OutputThroughput, MeanE2EL: c.MeanE2EL, Completed: c.Completed}
}

// Run is one point of the real-GPU run as the cross-check needs it:
// sweepflow's aggregate (its settings and figures as the run stored them),
// its measured request records, and the independent client's summary.
type Run struct {
	Point     string
	Aggregate loadgen.Aggregate
	Requests  []loadgen.RequestRecord
	Client    ClientSummary
}

// Ours is sweepflow's figures derived again by loadgen from the request
// records: what loadgen's definitions make of what it measured.
func (r *Run) Ours() Figures {
	a := r.Aggregate.Recompute(r.Requests)
	return FromAggregate(&a)
}

// Check compares the run's two clients.
func (r *Run) Check(tol float64) Verdict { return Compare(r.Ours(), r.Client.Figures(), tol) }

// LoadRun reads a point from the files the run wrote: loadgen's aggregate
// JSON and requests JSONL, and client.py's client_summary.json.
func LoadRun(point, aggregatePath, requestsPath, clientPath string) (*Run, error) {
	r := &Run{Point: point}
	if err := readJSON(aggregatePath, &r.Aggregate); err != nil {
		return nil, err
	}
	f, err := os.Open(requestsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, r.Requests, err = loadgen.ReadRequestsJSONL(f); err != nil {
		return nil, fmt.Errorf("%s: %w", requestsPath, err)
	}
	if err := readJSON(clientPath, &r.Client); err != nil {
		return nil, err
	}
	return r, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// The fixture (testdata/*.json.gz) is a Run in a compact form: each
// record's chunk times as deltas in ticks (TickNs) and its chunk token
// counts, as plain JSON numbers that gzip packs to a byte or two a chunk,
// so a point of a few hundred streams of a thousand chunks stays a few
// hundred KB. Times are rounded to the tick, never accumulated: a request's
// first and last chunk move by half a tick at most, so a tick of 10-100 µs
// leaves median TTFT, mean ITL and throughput within 0.01 % of the run.
type fixture struct {
	TickNs    int64             `json:"tick_ns"`
	Point     string            `json:"point"`
	Aggregate loadgen.Aggregate `json:"aggregate"`
	Client    ClientSummary     `json:"client"`
	Requests  []fixtureRecord   `json:"requests"`
}

type fixtureRecord struct {
	loadgen.RequestRecord
	// ChunkDelta: each chunk's time less the one before (the first: less
	// the send), in fixtureTick units. ChunkTok: each chunk's tokens.
	ChunkDelta []int64 `json:"chunk_delta"`
	ChunkTok   []int32 `json:"chunk_tok"`
}

// DefaultTick is the fixture's default time resolution.
const DefaultTick = 10 * time.Microsecond

// WriteFixture writes r in the compact fixture form, times rounded to res.
func WriteFixture(w io.Writer, r *Run, res time.Duration) error {
	step := max(int64(res), 1)
	tick := func(ns int64) int64 { return (ns + step/2) / step }
	fx := fixture{TickNs: step, Point: r.Point, Aggregate: r.Aggregate, Client: r.Client}
	for _, rec := range r.Requests {
		fr := fixtureRecord{RequestRecord: rec, ChunkTok: rec.ChunkTokens}
		for _, p := range []*int64{&fr.DispatchNs, &fr.SendNs, &fr.WrittenNs, &fr.FirstTokenNs, &fr.LastTokenNs, &fr.EndNs} {
			if *p > 0 {
				*p = tick(*p) * step
			}
		}
		prev := tick(rec.SendNs)
		for _, ns := range rec.ChunkNs {
			t := max(tick(ns), prev)
			fr.ChunkDelta = append(fr.ChunkDelta, t-prev)
			prev = t
		}
		fr.ChunkNs, fr.ChunkTokens = nil, nil
		fx.Requests = append(fx.Requests, fr)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(zw).Encode(&fx); err != nil {
		return err
	}
	return zw.Close()
}

// ReadFixture reads what WriteFixture wrote; every record's figures are
// derived again from its times (loadgen.RequestRecord.Refinish).
func ReadFixture(rd io.Reader) (*Run, error) {
	zr, err := gzip.NewReader(rd)
	if err != nil {
		return nil, err
	}
	var fx fixture
	if err := json.NewDecoder(zr).Decode(&fx); err != nil {
		return nil, err
	}
	if fx.TickNs <= 0 {
		return nil, fmt.Errorf("fixture: tick_ns %d", fx.TickNs)
	}
	r := &Run{Point: fx.Point, Aggregate: fx.Aggregate, Client: fx.Client}
	for i, fr := range fx.Requests {
		if len(fr.ChunkDelta) != len(fr.ChunkTok) {
			return nil, fmt.Errorf("fixture request %d: %d chunk times, %d token counts", i, len(fr.ChunkDelta), len(fr.ChunkTok))
		}
		rec := fr.RequestRecord
		t := rec.SendNs
		for j, d := range fr.ChunkDelta {
			t += d * fx.TickNs
			rec.ChunkNs = append(rec.ChunkNs, t)
			rec.ChunkTokens = append(rec.ChunkTokens, fr.ChunkTok[j])
		}
		rec.Refinish()
		r.Requests = append(r.Requests, rec)
	}
	return r, nil
}
