package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// ReadRequestsJSONL reads a requests file WriteRequestsJSONL wrote: its
// warmups and its measured requests. Each record's derived figures (TTFT,
// E2EL, TPOT, per-chunk tokens) are derived again from its times and counts,
// as the run derived them, so a record read back measures what it measured
// then under today's definitions.
func ReadRequestsJSONL(r io.Reader) (warmups, measured []RequestRecord, err error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	for line := 1; dec.More(); line++ {
		var rec RequestRecord
		if err := dec.Decode(&rec); err != nil {
			return nil, nil, fmt.Errorf("requests record %d: %w", line, err)
		}
		rec.Refinish()
		if rec.Warmup {
			warmups = append(warmups, rec)
		} else {
			measured = append(measured, rec)
		}
	}
	return warmups, measured, nil
}

// Refinish derives a record's figures again from its times and counts: a
// record built or read outside a run (a fixture, a requests file) then
// carries exactly what Run would have computed for it.
func (r *RequestRecord) Refinish() {
	// A successful record saw usage; a failed one keeps its error.
	r.usageSeen = r.Success || r.ErrorKind != ErrKindMissingUsage
	if r.Success {
		r.ErrorKind, r.Error = "", ""
	}
	if n := len(r.ChunkNs); n > 0 {
		r.FirstTokenNs, r.LastTokenNs = r.ChunkNs[0], r.ChunkNs[n-1]
	}
	r.finish()
}

// Recompute is a's figures derived again from the measured records (from
// ReadRequestsJSONL) with Run's own rules: the run's settings (concurrency,
// lengths, GPU counts, seed, start and window) are kept, every figure is
// computed afresh.
func (a *Aggregate) Recompute(measured []RequestRecord) Aggregate {
	b := Aggregate{
		Simulated: a.Simulated, BaseURL: a.BaseURL, Endpoint: a.Endpoint, Model: a.Model,
		Conc: a.Conc, MaxConcurrency: a.MaxConcurrency, NumPrompts: a.NumPrompts, NumWarmups: a.NumWarmups,
		RequestRate: a.RequestRate, Burstiness: a.Burstiness, ISL: a.ISL, OSL: a.OSL,
		RandomRangeRatio: a.RandomRangeRatio, IgnoreEOS: a.IgnoreEOS, Seed: a.Seed, DurationLimit: a.DurationLimit,
		ClockScale: a.ClockScale, StartedAt: a.StartedAt, Window: a.Window, WarmupFailed: a.WarmupFailed,
		NumPrefillGPU: a.NumPrefillGPU, NumDecodeGPU: a.NumDecodeGPU, NumGPU: a.NumGPU,
	}
	scenario := a.ScenarioType
	if scenario == "" {
		scenario = ScenarioFixedSeqLen
	}
	computeAggregate(&b, measured, scenario)
	return b
}
