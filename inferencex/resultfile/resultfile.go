// Package resultfile reads and writes the per-point agentic result file that
// InferenceX's benchmarks/multi_node/agentic_srt.sh leaves behind: the JSON
// that utils/agentic/aggregation/process_agentic_result.py writes to
// $AGENTIC_OUTPUT_DIR/$RESULT_FILENAME.json (RESULT_FILENAME already carrying
// the _conc<N> suffix; AGENTIC_OUTPUT_DIR defaults to the InferenceX
// workspace), and which the InferenceX workflow gates on
// (num_requests_successful > 0) and later aggregates.
//
// Units follow that file: latencies in seconds, throughputs in tokens per
// second, interactivity in tokens per second per user (1 / ITL). Perf
// converts to sweepflow's ledger figures (point.PerfSummary: milliseconds,
// per-GPU throughputs as sweepflow's loadgen defines them).
package resultfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
)

// ScenarioAgentic is the scenario_type of every agentic result.
const ScenarioAgentic = "agentic-coding"

// RequestAccounting is aiperf's record accounting (request_metrics.py
// load_records_with_accounting).
type RequestAccounting struct {
	RecordsTotal         int            `json:"records_total"`
	RecordsProfiled      int            `json:"records_profiled"`
	RecordsDroppedTotal  int            `json:"records_dropped_total"`
	RecordsWarmupDropped int            `json:"records_warmup_dropped"`
	RecordsErrorDropped  int            `json:"records_error_dropped"`
	ErrorCategories      map[string]int `json:"error_categories"`
}

// Multinode is the multinode GPU shape (process_agentic_result.py
// _gpu_shape with IS_MULTINODE=true).
type Multinode struct {
	PrefillNumWorkers  int    `json:"prefill_num_workers"`
	PrefillTP          int    `json:"prefill_tp"`
	PrefillPP          int    `json:"prefill_pp"`
	PrefillDCPSize     int    `json:"prefill_dcp_size"`
	PrefillPCPSize     int    `json:"prefill_pcp_size"`
	PrefillEP          int    `json:"prefill_ep"`
	PrefillDPAttention string `json:"prefill_dp_attention"`
	NumPrefillGPU      int    `json:"num_prefill_gpu"`
	DecodeNumWorkers   int    `json:"decode_num_workers"`
	DecodeTP           int    `json:"decode_tp"`
	DecodePP           int    `json:"decode_pp"`
	DecodeDCPSize      int    `json:"decode_dcp_size"`
	DecodePCPSize      int    `json:"decode_pcp_size"`
	DecodeEP           int    `json:"decode_ep"`
	DecodeDPAttention  string `json:"decode_dp_attention"`
	NumDecodeGPU       int    `json:"num_decode_gpu"`
	PrefillHW          string `json:"prefill_hw,omitempty"`
	DecodeHW           string `json:"decode_hw,omitempty"`
}

// SingleNode is the single-node shape (IS_MULTINODE false).
type SingleNode struct {
	PP      int `json:"pp"`
	DCPSize int `json:"dcp_size"`
	PCPSize int `json:"pcp_size"`
}

// Result is one agentic point's aggregate, field for field as InferenceX
// writes it, plus "simulated" when sweepflow's simulator served it.
type Result struct {
	HW                 string            `json:"hw"`
	Conc               int               `json:"conc"`
	Image              string            `json:"image"`
	Model              string            `json:"model"`
	InfmaxModelPrefix  string            `json:"infmax_model_prefix"`
	Framework          string            `json:"framework"`
	Precision          string            `json:"precision"`
	SpecDecoding       string            `json:"spec_decoding"`
	Disagg             bool              `json:"disagg"`
	ScenarioType       string            `json:"scenario_type"`
	IsMultinode        bool              `json:"is_multinode"`
	TP                 int               `json:"tp"`
	EP                 int               `json:"ep"`
	DPAttention        string            `json:"dp_attention"`
	KVOffloading       string            `json:"kv_offloading"`
	KVOffloadBackend   string            `json:"kv_offload_backend"`
	AllocatedCPUDRAMGB int               `json:"allocated_cpu_dram_gb"`
	NumRequestsTotal   int               `json:"num_requests_total"`
	NumRequestsSuccess int               `json:"num_requests_successful"`
	RequestAccounting  RequestAccounting `json:"request_accounting"`
	*Multinode                           // prefill_*/decode_* when multinode
	*SingleNode                          // pp/dcp_size/pcp_size otherwise
	Dataset            map[string]any    `json:"dataset,omitempty"`
	RequestMetrics     RequestMetrics    `json:"request_metrics"`
	ServerMetrics      map[string]any    `json:"server_metrics"`
	KVCachePoolTokens  *int64            `json:"kv_cache_pool_tokens"`
	Warnings           []string          `json:"warnings,omitempty"`
	Simulated          bool              `json:"simulated,omitempty"`
	Extra              map[string]any    `json:"-"` // unknown top-level fields kept by Read
}

// RequestMetrics is InferenceX's request_metrics block; sweepflow's load
// generator already emits exactly this shape for agentic runs.
type RequestMetrics = loadgen.RequestMetrics

// FileName is the result file of one point: RESULT_FILENAME with the
// _conc<N> suffix agentic_srt.sh adds, plus ".json".
func FileName(resultFilename string, conc int) string {
	return fmt.Sprintf("%s_conc%d.json", resultFilename, conc)
}

// NumGPUs is the GPU count per-GPU throughputs divide by, as _gpu_shape
// computes it: Σ workers×tp×pp×pcp when multinode, tp×pp×pcp otherwise.
func (r *Result) NumGPUs() int {
	if r.Multinode != nil {
		return r.Multinode.NumPrefillGPU + r.Multinode.NumDecodeGPU
	}
	pp, pcp := 1, 1
	if r.SingleNode != nil {
		pp, pcp = max(r.SingleNode.PP, 1), max(r.SingleNode.PCPSize, 1)
	}
	return r.TP * pp * pcp
}

// Write stores r at path as InferenceX does (indent 2), atomically, creating
// the directory.
func Write(path string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("resultfile: %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("resultfile: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".resultfile-*")
	if err != nil {
		return fmt.Errorf("resultfile: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("resultfile: %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("resultfile: %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("resultfile: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("resultfile: %w", err)
	}
	return nil
}

// Read parses a result file. Errors name the file and, for bad JSON, the
// line; for a wrong or missing field, the field.
func Read(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("resultfile: %w", err)
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("resultfile: %s: %w", path, err)
	}
	return r, nil
}

// Parse decodes a result body (see Read).
func Parse(b []byte) (*Result, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, jsonErr(b, err)
	}
	for _, k := range []string{"conc", "num_requests_total", "num_requests_successful", "request_metrics"} {
		if _, ok := raw[k]; !ok {
			return nil, fmt.Errorf("field %s: missing (not an InferenceX agentic result)", k)
		}
	}
	r := &Result{}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(r); err != nil {
		return nil, jsonErr(b, err)
	}
	_, multi := raw["num_prefill_gpu"]
	if !multi {
		r.Multinode = nil
	}
	_, single := raw["pp"]
	if !single {
		r.SingleNode = nil
	}
	known := knownFields()
	for k, v := range raw {
		if known[k] {
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		var x any
		_ = json.Unmarshal(v, &x)
		r.Extra[k] = x
	}
	if r.Conc < 0 || r.NumRequestsSuccess < 0 || r.NumRequestsTotal < 0 {
		return nil, errors.New("field conc/num_requests_*: must not be negative")
	}
	if r.NumRequestsSuccess > r.NumRequestsTotal {
		return nil, fmt.Errorf("field num_requests_successful: %d exceeds num_requests_total %d", r.NumRequestsSuccess, r.NumRequestsTotal)
	}
	return r, nil
}

func knownFields() map[string]bool {
	m := map[string]bool{}
	for _, t := range []any{Result{}, Multinode{}, SingleNode{}} {
		b, _ := json.Marshal(t)
		var x map[string]any
		_ = json.Unmarshal(b, &x)
		for k := range x {
			m[k] = true
		}
	}
	for _, k := range []string{"dataset", "warnings", "simulated", "prefill_hw", "decode_hw"} {
		m[k] = true
	}
	return m
}

// jsonErr turns a decoding error into "line N: ..." or "field F: ...".
func jsonErr(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("line %d: invalid JSON: %v", lineAt(b, syn.Offset), syn)
	case errors.As(err, &typ):
		return fmt.Errorf("line %d: field %s: expected %s, got JSON %s", lineAt(b, typ.Offset), typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("line %d: truncated JSON", lineAt(b, int64(len(b))))
	}
	return err
}

func lineAt(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	return bytes.Count(b[:off], []byte("\n")) + 1
}

// Gate is the InferenceX workflow's check on a point file: at least one
// successful request, and at most 10% of the profiled requests failed
// (validate_agentic_result.py's --failed-request-threshold 0.10).
func (r *Result) Gate() error {
	if r.NumRequestsSuccess <= 0 {
		return fmt.Errorf("resultfile: gate failed: num_requests_successful is %d", r.NumRequestsSuccess)
	}
	ra := r.RequestAccounting
	attempted := r.NumRequestsSuccess + ra.RecordsErrorDropped
	if rate := float64(ra.RecordsErrorDropped) / float64(attempted); rate > loadgen.GateMaxErrorRate {
		return fmt.Errorf("resultfile: gate failed: %d of %d requests failed (%.1f%% > %.0f%%)",
			ra.RecordsErrorDropped, attempted, 100*rate, 100*loadgen.GateMaxErrorRate)
	}
	return nil
}

// Perf converts the file into sweepflow's ledger figures. Units: the file's
// seconds become milliseconds; throughputs stay tokens/s. Per-GPU
// throughputs follow sweepflow's (and InferenceX's fixed-seq-len)
// definitions, not the agentic file's all-GPU per_gpu block: total over all
// GPUs, output over decode GPUs, input over prefill GPUs (an aggregated
// deployment, with no decode GPUs, divides both by all GPUs).
// Interactivity is the median per-user token rate (latency.intvty.p50, or
// 1/tpot.p50 when the file has no intvty block). Requests counts the
// profiled requests (successful + failed, warmup excluded); Failed the
// failed ones (aiperf does not split warmup errors from profiled ones, so
// a failed warmup call counts here too).
func (r *Result) Perf() point.PerfSummary {
	rm := r.RequestMetrics
	all := float64(r.NumGPUs())
	pre, dec := all, all
	if m := r.Multinode; m != nil && m.NumDecodeGPU > 0 && m.NumPrefillGPU > 0 {
		pre, dec = float64(m.NumPrefillGPU), float64(m.NumDecodeGPU)
	}
	div := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	lat := rm.Latency
	intv := lat.Intvty.P50
	if intv == 0 && lat.TPOT.P50 > 0 {
		intv = 1 / lat.TPOT.P50
	}
	failed := r.RequestAccounting.RecordsErrorDropped
	return point.PerfSummary{
		TputPerGPU:       div(rm.Throughput.Total.TokensPerSecond, all),
		OutputTputPerGPU: div(rm.Throughput.Output.TokensPerSecond, dec),
		InputTputPerGPU:  div(rm.Throughput.Input.TokensPerSecond, pre),
		Interactivity:    intv,
		TTFTp90Ms:        lat.TTFT.P90 * 1000,
		TPOTMedianMs:     lat.TPOT.P50 * 1000,
		E2ELMedianMs:     lat.E2EL.P50 * 1000,
		Requests:         r.NumRequestsSuccess + failed,
		Failed:           failed,
		Simulated:        r.Simulated,
	}
}

// Evidence is what the validity gate (point.ValidatePerf) judges the
// file's figures on. aiperf reports no total output, so it is the mean
// actual output times the successful requests; it reports neither lanes nor
// the client's lag behind the streams (LanesFinished -1, ClientLag nil).
func (r *Result) Evidence() point.PerfEvidence {
	rm := r.RequestMetrics
	return point.PerfEvidence{
		Client: point.PerfClientBenchmark, Completed: r.NumRequestsSuccess,
		OutputTokens:     int64(math.Round(rm.Tokens.OutputActual.Mean * float64(r.NumRequestsSuccess))),
		WindowSec:        rm.Throughput.DurationSeconds,
		MeanPromptTokens: rm.Tokens.Input.Mean, MeanOutputTokens: rm.Tokens.OutputActual.Mean,
		ITLMedianMs: rm.Latency.ITL.P50 * 1000, LanesFinished: -1,
	}
}

// Env is how the benchmark's environment is read (os.Getenv in the role).
type Env func(string) string

// Identity fills the identity and GPU-shape fields from the environment the
// InferenceX launcher gives agentic_srt.sh, as process_agentic_result.py
// does (RUNNER_TYPE, CONC, IMAGE, MODEL, MODEL_PREFIX, FRAMEWORK, PRECISION,
// SPEC_DECODING, DISAGG, IS_MULTINODE, TP/EP_SIZE/DP_ATTENTION or
// PREFILL_*/DECODE_*, KV_OFFLOADING, KV_OFFLOAD_BACKEND, TOTAL_CPU_DRAM_GB).
func Identity(getenv Env) (*Result, error) {
	r := &Result{
		HW: getenv("RUNNER_TYPE"), Image: getenv("IMAGE"), Model: getenv("MODEL"),
		InfmaxModelPrefix: getenv("MODEL_PREFIX"), Framework: getenv("FRAMEWORK"), Precision: getenv("PRECISION"),
		SpecDecoding: getenv("SPEC_DECODING"), ScenarioType: ScenarioAgentic, ServerMetrics: map[string]any{},
	}
	if r.SpecDecoding == "" {
		r.SpecDecoding = "none"
	}
	var errs []string
	num := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not an integer", name, v))
		}
		return n
	}
	flag := func(name string) bool {
		switch strings.ToLower(getenv(name)) {
		case "1", "true", "yes", "on":
			return true
		}
		return false
	}
	r.Conc = num("CONC", 0)
	r.Disagg = flag("DISAGG")
	r.IsMultinode = flag("IS_MULTINODE")
	r.AllocatedCPUDRAMGB = num("TOTAL_CPU_DRAM_GB", 0)
	r.KVOffloading, r.KVOffloadBackend = getenv("KV_OFFLOADING"), getenv("KV_OFFLOAD_BACKEND")
	switch {
	case r.KVOffloading == "":
		errs = append(errs, "KV_OFFLOADING is not set (InferenceX requires it; \"none\" for no offload)")
	case r.KVOffloading == "none" && r.KVOffloadBackend != "":
		errs = append(errs, "KV_OFFLOAD_BACKEND must be empty when KV_OFFLOADING=none")
	case r.KVOffloading != "none" && (r.KVOffloadBackend == "" || r.KVOffloadBackend == "none"):
		errs = append(errs, "KV_OFFLOAD_BACKEND is required when KV_OFFLOADING is enabled")
	}
	if !r.IsMultinode {
		s := &SingleNode{PP: num("PP_SIZE", 1), DCPSize: num("DCP_SIZE", 1), PCPSize: num("PCP_SIZE", 1)}
		r.SingleNode = s
		r.TP, r.EP = num("TP", 1), num("EP_SIZE", 1)
		r.DPAttention = getenv("DP_ATTENTION")
		if r.DPAttention == "" {
			r.DPAttention = "false"
		}
		if s.PP <= 0 || s.DCPSize <= 0 || s.PCPSize <= 0 {
			errs = append(errs, "PP_SIZE, DCP_SIZE and PCP_SIZE must be positive integers")
		}
	} else {
		m := &Multinode{
			PrefillNumWorkers: num("PREFILL_NUM_WORKERS", 0), PrefillTP: num("PREFILL_TP", 0),
			PrefillPP: num("PREFILL_PP_SIZE", 1), PrefillDCPSize: num("PREFILL_DCP_SIZE", 1), PrefillPCPSize: num("PREFILL_PCP_SIZE", 1),
			PrefillEP: num("PREFILL_EP", 1), PrefillDPAttention: orDefault(getenv("PREFILL_DP_ATTN"), "false"),
			DecodeNumWorkers: num("DECODE_NUM_WORKERS", 0), DecodeTP: num("DECODE_TP", 0),
			DecodePP: num("DECODE_PP_SIZE", 1), DecodeDCPSize: num("DECODE_DCP_SIZE", 1), DecodePCPSize: num("DECODE_PCP_SIZE", 1),
			DecodeEP: num("DECODE_EP", 1), DecodeDPAttention: orDefault(getenv("DECODE_DP_ATTN"), "false"),
			PrefillHW: getenv("PREFILL_HARDWARE"), DecodeHW: getenv("DECODE_HARDWARE"),
		}
		for _, v := range []int{m.PrefillPP, m.PrefillDCPSize, m.PrefillPCPSize, m.DecodePP, m.DecodeDCPSize, m.DecodePCPSize} {
			if v <= 0 {
				errs = append(errs, "multinode PP, DCP and PCP sizes must be positive integers")
				break
			}
		}
		if (m.PrefillHW == "") != (m.DecodeHW == "") {
			errs = append(errs, "PREFILL_HARDWARE and DECODE_HARDWARE must be specified together")
		}
		m.NumPrefillGPU = m.PrefillNumWorkers * m.PrefillTP * m.PrefillPP * m.PrefillPCPSize
		m.NumDecodeGPU = m.DecodeNumWorkers * m.DecodeTP * m.DecodePP * m.DecodePCPSize
		if m.NumDecodeGPU <= 0 { // aggregated: decode num-worker 0, no decode-side parallelism
			m.DecodeTP, m.DecodeEP, m.DecodePP, m.DecodeDCPSize, m.DecodePCPSize = 0, 0, 1, 1, 1
		}
		r.Multinode = m
		r.TP = m.PrefillTP + m.DecodeTP
		r.EP = max(m.PrefillEP, m.DecodeEP)
		r.DPAttention = "false"
		if flag("PREFILL_DP_ATTN") || flag("DECODE_DP_ATTN") {
			r.DPAttention = "true"
		}
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("resultfile: environment: %s", strings.Join(errs, "; "))
	}
	return r, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FromLoadgen fills r's counts and request_metrics from an agentic load
// generator run: warmup calls are counted and dropped as aiperf's warmup
// phase is, failed calls as error records. Per-GPU throughputs are
// recomputed over r's GPU count, as InferenceX does.
func (r *Result) FromLoadgen(res *loadgen.Result) error {
	if res.Aggregate.RequestMetrics == nil {
		return errors.New("resultfile: the load generator run has no request_metrics (not an agentic replay)")
	}
	acc := RequestAccounting{ErrorCategories: map[string]int{}}
	ok := 0
	note := func(recs []loadgen.RequestRecord, warm bool) {
		for i := range recs {
			acc.RecordsTotal++
			if warm {
				acc.RecordsWarmupDropped++
			}
			if !recs[i].Success {
				acc.RecordsErrorDropped++
				acc.ErrorCategories[orDefault(recs[i].ErrorKind, "unknown")]++
			} else if !warm {
				ok++
			}
		}
	}
	note(res.Warmups, true)
	note(res.Requests, false)
	acc.RecordsProfiled = ok
	acc.RecordsDroppedTotal = acc.RecordsTotal - ok
	r.RequestAccounting = acc
	r.NumRequestsTotal = acc.RecordsTotal
	r.NumRequestsSuccess = ok
	r.RequestMetrics = *res.Aggregate.RequestMetrics
	if n := float64(r.NumGPUs()); n > 0 {
		t := &r.RequestMetrics.Throughput
		t.PerGPU.TotalTputTPS = t.Total.TokensPerSecond / n
		t.PerGPU.OutputTputTPS = t.Output.TokensPerSecond / n
		t.PerGPU.InputTputTPS = t.Input.TokensPerSecond / n
	}
	r.Simulated = res.Aggregate.Simulated
	if r.ServerMetrics == nil {
		r.ServerMetrics = map[string]any{}
	}
	r.Warnings = append(r.Warnings, "server_metrics not collected: written by sweepflow's load generator, not aiperf")
	for _, f := range []float64{r.RequestMetrics.Throughput.Total.TokensPerSecond, r.RequestMetrics.Latency.TTFT.Mean} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("resultfile: the load generator produced a non-finite figure")
		}
	}
	return nil
}
