package gsm8k

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// EvalRecord is one row in the shape of InferenceX's collect_eval_results
// (agg_eval_all.json): the point identity fields (model_prefix, hw, conc,
// ...) as given, then task, em_strict, em_strict_se, em_flexible,
// em_flexible_se, n_eff, score, score_name ("em_strict") and score_se. It adds
// mode, invalid rates and failed_requests, "simulated": true for simulator
// runs, and the gate verdict under "gate" when v is not nil. Metric fields
// win over identity fields of the same name.
func EvalRecord(s Summary, identity map[string]any, simulated bool, v *Verdict) map[string]any {
	rec := make(map[string]any, len(identity)+16)
	for k, x := range identity {
		rec[k] = x
	}
	rec["task"] = s.Task
	rec["mode"] = string(s.Mode)
	rec["em_strict"] = s.EMStrict
	rec["em_strict_se"] = s.EMStrictSE
	rec["em_flexible"] = s.EMFlexible
	rec["em_flexible_se"] = s.EMFlexibleSE
	rec["n_eff"] = s.NEff
	rec["score"] = s.EMStrict
	rec["score_name"] = "em_strict"
	rec["score_se"] = s.EMStrictSE
	rec["invalid_rate"] = s.InvalidRate
	rec["invalid_rate_flexible"] = s.InvalidRateFlexible
	rec["failed_requests"] = s.FailedRequests
	if simulated {
		rec["simulated"] = true
	} else {
		delete(rec, "simulated")
	}
	if v != nil {
		rec["gate"] = *v
	}
	return rec
}

// WriteSamplesJSONL writes one JSON object per sample.
func WriteSamplesJSONL(w io.Writer, samples []Sample) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range samples {
		if err := enc.Encode(&samples[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// RescoredSample is one line of `starter eval gsm8k-score` output.
type RescoredSample struct {
	DocID             int    `json:"doc_id"`
	StrictExtracted   string `json:"strict_extracted"`
	FlexibleExtracted string `json:"flexible_extracted"`
	StrictMatch       bool   `json:"strict_match"`
	FlexibleMatch     bool   `json:"flexible_match"`
}

// RescoreSummary is the summary part of the rescoring output.
type RescoreSummary struct {
	EMStrict   float64 `json:"em_strict"`
	EMFlexible float64 `json:"em_flexible"`
	NEff       int     `json:"n_eff"`
}

// Rescored is the offline rescoring result.
type Rescored struct {
	Summary RescoreSummary   `json:"summary"`
	Samples []RescoredSample `json:"samples"`
	// Full is the complete summary (stderrs, invalid rates, failures); it is
	// not part of the printed JSON.
	Full Summary `json:"-"`
}

// RescoreJSONL scores a JSONL file of {"doc_id", "response", "gold"} lines
// (a per-sample log from Run qualifies; its failed lines, those with a
// non-empty "error", are counted as failed requests, not scored). gold may be
// the full dataset answer or "#### N". name is used in error messages.
func RescoreJSONL(r io.Reader, name string, mode Mode) (*Rescored, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	out := &Rescored{Samples: []RescoredSample{}}
	var all []Sample
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var in struct {
			DocID    *int    `json:"doc_id"`
			Response *string `json:"response"`
			Gold     *string `json:"gold"`
			Error    string  `json:"error"`
		}
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, fmt.Errorf("%s:%d: invalid JSON: %v", name, line, err)
		}
		switch {
		case in.DocID == nil:
			return nil, fmt.Errorf("%s:%d: field doc_id: missing", name, line)
		case in.Gold == nil:
			return nil, fmt.Errorf("%s:%d: field gold: missing", name, line)
		case in.Response == nil && in.Error == "":
			return nil, fmt.Errorf("%s:%d: field response: missing", name, line)
		}
		if in.Error != "" {
			all = append(all, Sample{DocID: *in.DocID, Error: in.Error})
			continue
		}
		s := Score(mode, *in.Response, *in.Gold)
		all = append(all, Sample{DocID: *in.DocID,
			Extractions: Extractions{s.StrictExtracted, s.FlexibleExtracted},
			Matches:     Matches{s.StrictMatch, s.FlexibleMatch}})
		out.Samples = append(out.Samples, RescoredSample{*in.DocID, s.StrictExtracted, s.FlexibleExtracted, s.StrictMatch, s.FlexibleMatch})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	out.Full = Summarize(mode, all)
	out.Summary = RescoreSummary{EMStrict: out.Full.EMStrict, EMFlexible: out.Full.EMFlexible, NEff: out.Full.NEff}
	return out, nil
}

// WriteSamplesFile writes the per-sample log (WriteSamplesJSONL) to path.
func WriteSamplesFile(path string, samples []Sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteSamplesJSONL(f, samples); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// WriteTable prints the run's scores as `starter eval gsm8k` shows them,
// with the gate's verdict when v is not nil.
func (res *Result) WriteTable(w io.Writer, v *Verdict) {
	s := res.Summary
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "task\t%s (%s mode)\n", s.Task, s.Mode)
	fmt.Fprintf(tw, "em_strict\t%.4f ± %.4f\n", s.EMStrict, s.EMStrictSE)
	fmt.Fprintf(tw, "em_flexible\t%.4f ± %.4f\n", s.EMFlexible, s.EMFlexibleSE)
	fmt.Fprintf(tw, "n_eff\t%d\n", s.NEff)
	fmt.Fprintf(tw, "invalid (strict / flexible)\t%.2f%% / %.2f%%\n", 100*s.InvalidRate, 100*s.InvalidRateFlexible)
	fmt.Fprintf(tw, "failed requests\t%d\n", s.FailedRequests)
	fmt.Fprintf(tw, "elapsed\t%s\n", res.Elapsed.Round(time.Millisecond))
	if res.Simulated {
		fmt.Fprintf(tw, "simulated\ttrue\n")
	}
	if v != nil {
		verdict := "PASS"
		if !v.Passed {
			verdict = "FAIL (eval-failed)"
		}
		fmt.Fprintf(tw, "gate\t%s: %s\n", verdict, v.Reason)
	}
	tw.Flush()
}
