package point

import "github.com/sweepflow/sweepflow/energy"

// PerfSummary is the one summary of a perf result: the headline figures
// InferenceX reports, plus where the full aggregate and per-request records
// are. The perf activity produces it, the ledger stores it, and regress,
// report and the InferenceX export read it.
type PerfSummary struct {
	OutputTputPerGPU float64 `json:"output_tput_per_gpu"`
	TputPerGPU       float64 `json:"tput_per_gpu"`
	InputTputPerGPU  float64 `json:"input_tput_per_gpu"`
	Interactivity    float64 `json:"interactivity"` // tok/s/user, median
	TTFTp90Ms        float64 `json:"ttft_p90_ms"`
	TPOTMedianMs     float64 `json:"tpot_median_ms"`
	E2ELMedianMs     float64 `json:"e2el_median_ms"`
	Requests         int     `json:"requests"`
	Failed           int     `json:"failed"`
	Simulated        bool    `json:"simulated"`
	AggregateURI     string  `json:"aggregate_uri"`
	RequestsURI      string  `json:"requests_uri"`
	// Evidence is what the validity gate (ValidatePerf) judged the figures
	// on, stored with them so a reader can check the verdict.
	Evidence *PerfEvidence `json:"evidence,omitempty"`
	// TTFTp99Ms is measured by sweepflow's load generator; InferenceX's
	// agentic result file has no p99 (0: not measured).
	TTFTp99Ms float64 `json:"ttft_p99_ms,omitempty"`
	// Power is the GPUs' energy over the perf window with the power gate's
	// verdict (nil: no power source). A power-invalid result keeps every
	// perf figure above.
	Power *energy.Figures `json:"power,omitempty"`
}

// EvalSummary is a point's GSM8K verdict.
type EvalSummary struct {
	EMStrict   float64 `json:"em_strict"`
	EMFlexible float64 `json:"em_flexible"`
	NEff       int     `json:"n_eff"`
	Floor      float64 `json:"floor"`
	Passed     bool    `json:"passed"`
	Reason     string  `json:"reason,omitempty"`
	Simulated  bool    `json:"simulated"`
	ResultURI  string  `json:"result_uri"`
	SamplesURI string  `json:"samples_uri"`
}
