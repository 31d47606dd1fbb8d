package export

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/results"
)

// Export is one sweep's rows.
type Export struct {
	SweepID string
	// Bmk are agg_bmk.json rows, one per perf result.
	Bmk []map[string]any
	// Evals are agg_eval_all.json rows, one per eval result.
	Evals []map[string]any
	// Warnings say what could not be filled (a missing artifact, a point
	// recorded without its spec); the rows are still written.
	Warnings []string
	// AppendOnly is the perf-changelog entry of the points adaptive
	// searches added (AppendOnlyFile), nil when there are none.
	AppendOnly []byte
}

// File names inside the output directory, as InferenceX's collectors name
// their outputs.
const (
	BmkFile  = "agg_bmk.json"
	EvalFile = "agg_eval_all.json"
	// AppendOnlyFile holds the perf-changelog entries (append-only: true)
	// that publish a sweep's added points the way InferenceX appends
	// points to an existing curve.
	AppendOnlyFile = "perf-changelog-append-only.yaml"
)

// ErrNoSweep is returned when the store has nothing for the sweep.
var ErrNoSweep = fmt.Errorf("export: sweep not found")

// Build reads a sweep from the store. arts may be nil (rows then carry only
// the ledger's headline figures); with it, the full aggregate and eval JSON
// are read from the artifacts the stages stored.
func Build(ctx context.Context, store *results.Store, arts artifacts.Store, sweepID string) (*Export, error) {
	_, found, err := store.GetSweep(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	pts, err := store.Points(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	perf, err := store.Perf(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	evals, err := store.Evals(ctx, sweepID)
	if err != nil {
		return nil, err
	}
	if !found && len(pts) == 0 && len(perf) == 0 && len(evals) == 0 {
		return nil, fmt.Errorf("%w: %q has no rows in the results store", ErrNoSweep, sweepID)
	}
	byID := map[string]results.Point{}
	for _, p := range pts {
		byID[p.PointID] = p
	}
	e := &Export{SweepID: sweepID, Bmk: []map[string]any{}, Evals: []map[string]any{}}
	warnedSpec := map[string]bool{}
	identityFor := func(pointID, ident, configKey, expName string, conc int) identity {
		p, ok := byID[pointID]
		if !ok {
			p = results.Point{SweepID: sweepID, PointID: pointID, Identity: ident, ConfigKey: configKey, ExpName: expName, Conc: conc}
		}
		if p.ExpName == "" {
			p.ExpName = cmp.Or(expName, pointID)
		}
		if conc != 0 {
			p.Conc = conc
		}
		id := identityOf(p)
		if len(id.missing) > 0 && !warnedSpec[pointID] {
			warnedSpec[pointID] = true
			e.Warnings = append(e.Warnings, fmt.Sprintf("point %s: no recorded spec in the ledger; identity from its exp-name only (missing: %s)",
				pointID, strings.Join(id.missing, ", ")))
		}
		return id
	}

	var added []addedRow
	for _, r := range perf {
		id := identityFor(r.PointID, r.Identity, r.ConfigKey, r.ExpName, r.Conc)
		agg, warn := readAggregate(ctx, arts, r)
		if warn != "" {
			e.Warnings = append(e.Warnings, warn)
		}
		row := bmkRow(id, r, agg)
		if id.added != nil {
			markAdded(row, id.added)
			added = append(added, addedRow{id: id, conc: r.Conc})
		}
		e.Bmk = append(e.Bmk, row)
	}
	e.AppendOnly = appendOnlyEntries(sweepID, added)
	for _, r := range evals {
		p := byID[r.PointID]
		id := identityFor(r.PointID, r.Identity, p.ConfigKey, p.ExpName, p.Conc)
		rec, warn := readEvalRecord(ctx, arts, r)
		if warn != "" {
			e.Warnings = append(e.Warnings, warn)
		}
		e.Evals = append(e.Evals, evalRow(id, r, rec))
	}
	return e, nil
}

// bmkRow is one agg_bmk row: identity, then the metrics in the shape of the
// point's scenario.
func bmkRow(id identity, r results.PerfResult, agg map[string]any) map[string]any {
	row := make(map[string]any, 96)
	for k, v := range id.fields {
		row[k] = v
	}
	if r.Simulated || agg["simulated"] == true {
		row["simulated"] = true
	}
	numP, _ := toInt(row["num_prefill_gpu"])
	numD, _ := toInt(row["num_decode_gpu"])
	if agg != nil {
		// The load generator counted the GPUs it divided by; prefer them.
		if n, ok := toInt(agg["num_prefill_gpu"]); ok && n > 0 {
			numP = n
		}
		if n, ok := toInt(agg["num_decode_gpu"]); ok {
			numD = n
		}
		if _, ok := row["is_multinode"]; ok && row["is_multinode"] == true {
			row["num_prefill_gpu"], row["num_decode_gpu"] = numP, numD
		}
	}
	if id.agentic {
		agenticMetrics(row, r, agg)
	} else {
		fixedSeqMetrics(row, r, agg)
	}
	// The power fields as InferenceX's with_power_metrics writes them.
	for k, v := range r.Power.ResultFields() {
		row[k] = v
	}
	return row
}

// fixedSeqMetrics copies process_result.py's fields: per-GPU throughputs,
// every latency statistic in seconds without the _ms suffix, and the
// interactivity (1/TPOT) statistics.
func fixedSeqMetrics(row map[string]any, r results.PerfResult, agg map[string]any) {
	row["tput_per_gpu"] = r.TputPerGPU
	row["output_tput_per_gpu"] = r.OutputTputPerGPU
	row["input_tput_per_gpu"] = r.InputTputPerGPU
	if agg == nil {
		row["p90_ttft"] = r.TTFTp90Ms / 1000
		row["median_tpot"] = r.TPOTMedianMs / 1000
		row["median_e2el"] = r.E2ELMedianMs / 1000
		row["median_intvty"] = r.Interactivity
		return
	}
	for _, k := range []string{"max_concurrency", "total_token_throughput", "output_throughput", "request_throughput",
		"num_prompts", "completed", "failed", "duration", "total_input_tokens", "total_output_tokens"} {
		if v, ok := agg[k]; ok {
			row[k] = v
		}
	}
	for k, v := range agg {
		for _, m := range []string{"_ttft", "_tpot", "_itl", "_e2el", "_intvty"} {
			if strings.HasSuffix(k, m) && isStat(strings.TrimSuffix(k, m)) {
				row[k] = v
			}
		}
	}
	if m, ok := agg["model"]; ok {
		row["model_id"] = m
	}
}

func isStat(s string) bool {
	switch s {
	case "mean", "median", "std", "p90", "p99", "p99.9", "p95", "p75", "p50":
		return true
	}
	return false
}

// agenticMetrics copies process_agentic_result.py's fields: request counts,
// request accounting and request_metrics (latency stats in seconds,
// tokens, throughput with per-GPU figures, cache).
func agenticMetrics(row map[string]any, r results.PerfResult, agg map[string]any) {
	row["scenario_type"] = "agentic-coding"
	// The ledger's headline figures too, flat, for quick filtering.
	row["output_tput_per_gpu"] = r.OutputTputPerGPU
	row["tput_per_gpu"] = r.TputPerGPU
	row["input_tput_per_gpu"] = r.InputTputPerGPU
	if agg == nil {
		row["request_metrics"] = map[string]any{
			"latency": map[string]any{
				"ttft":   map[string]any{"p90": r.TTFTp90Ms / 1000},
				"tpot":   map[string]any{"p50": r.TPOTMedianMs / 1000},
				"e2el":   map[string]any{"p50": r.E2ELMedianMs / 1000},
				"intvty": map[string]any{"p50": r.Interactivity},
			},
			"throughput": map[string]any{"per_gpu": map[string]any{"output_tput_tps": r.OutputTputPerGPU, "total_tput_tps": r.TputPerGPU, "input_tput_tps": r.InputTputPerGPU}},
		}
		return
	}
	total, _ := toInt(agg["num_requests_total"])
	ok, _ := toInt(agg["num_requests_successful"])
	row["num_requests_total"] = total
	row["num_requests_successful"] = ok
	if ra, isMap := agg["request_accounting"].(map[string]any); isMap {
		// InferenceX's result file (the recipe's benchmark measured):
		// process_agentic_result.py wrote the accounting itself, and its
		// num_requests_total is records_total, warmup included.
		row["request_accounting"] = ra
	} else {
		// Sweepflow's load generator aggregate: its totals leave the
		// warmup calls out, which it counts in num_warmups.
		failed, _ := toInt(agg["failed"])
		warm, _ := toInt(agg["num_warmups"])
		cats := agg["error_categories"]
		if cats == nil {
			cats = map[string]any{}
		}
		row["request_accounting"] = map[string]any{
			"records_total":          total + warm,
			"records_profiled":       ok,
			"records_dropped_total":  failed + warm,
			"records_warmup_dropped": warm,
			"records_error_dropped":  failed,
			"error_categories":       cats,
		}
	}
	if rm, ok := agg["request_metrics"]; ok {
		row["request_metrics"] = rm
	}
	if dur, ok := agg["duration_limit"]; ok {
		row["duration"] = dur
	}
	ds := map[string]any{"name": "sweepflow-generated-agentic-trace"}
	if seed, ok := agg["seed"]; ok {
		ds["seed"] = seed
	}
	if n, ok := agg["num_prompts"]; ok {
		ds["num_requests"] = n
	}
	row["dataset"] = ds
}

// evalRow is one agg_eval_all row: the stored eval record (task, em_strict,
// em_strict_se, em_flexible, em_flexible_se, n_eff, score, score_name,
// score_se, gate) with the point's identity laid over it.
func evalRow(id identity, r results.EvalResult, rec map[string]any) map[string]any {
	row := map[string]any{}
	for k, v := range rec {
		row[k] = v
	}
	if rec == nil {
		row["task"] = "gsm8k"
		row["em_strict"] = r.EMStrict
		row["em_flexible"] = r.EMFlexible
		row["n_eff"] = r.NEff
		row["score"] = r.EMStrict
		row["score_name"] = "em_strict"
	}
	for _, k := range []string{"is_multinode", "model_prefix", "model", "hw", "framework", "precision", "spec_decoding", "isl", "osl",
		"tp", "ep", "conc", "dp_attention", "image", "exp_name", "config_key", "sweep_id", "point_id", "topology",
		"prefill_tp", "prefill_ep", "prefill_num_workers", "prefill_dp_attention",
		"decode_tp", "decode_ep", "decode_num_workers", "decode_dp_attention"} {
		if v, ok := id.fields[k]; ok {
			row[k] = v
		}
	}
	row["floor"] = r.Floor
	row["passed"] = r.Passed
	if _, ok := row["source"]; !ok {
		row["source"] = "sweepflow"
	}
	if r.Simulated || rec["simulated"] == true {
		row["simulated"] = true
	}
	return row
}

// readAggregate loads the load generator's aggregate JSON for a perf result
// (its URI is in the perf summary the ledger keeps).
func readAggregate(ctx context.Context, arts artifacts.Store, r results.PerfResult) (map[string]any, string) {
	var sum struct {
		AggregateURI string `json:"aggregate_uri"`
	}
	if len(r.JSON) == 0 || json.Unmarshal(r.JSON, &sum) != nil || sum.AggregateURI == "" {
		return nil, fmt.Sprintf("point %s: perf result has no aggregate artifact; exporting the ledger's headline figures only", r.PointID)
	}
	return readJSON(ctx, arts, r.PointID, "aggregate", sum.AggregateURI)
}

func readEvalRecord(ctx context.Context, arts artifacts.Store, r results.EvalResult) (map[string]any, string) {
	var sum struct {
		ResultURI string `json:"result_uri"`
	}
	if len(r.JSON) == 0 || json.Unmarshal(r.JSON, &sum) != nil || sum.ResultURI == "" {
		return nil, fmt.Sprintf("point %s: eval result has no result artifact; exporting the ledger's scores only", r.PointID)
	}
	return readJSON(ctx, arts, r.PointID, "eval result", sum.ResultURI)
}

func readJSON(ctx context.Context, arts artifacts.Store, pointID, what, uri string) (map[string]any, string) {
	if arts == nil {
		return nil, fmt.Sprintf("point %s: no artifact store given; %s %s not read", pointID, what, uri)
	}
	rc, err := arts.Open(ctx, uri)
	if err != nil {
		return nil, fmt.Sprintf("point %s: %s: %v", pointID, what, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Sprintf("point %s: %s: %v", pointID, what, err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Sprintf("point %s: %s %s: not a JSON object: %v", pointID, what, uri, err)
	}
	return m, ""
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			f, ferr := x.Float64()
			return int(f), ferr == nil
		}
		return int(n), true
	}
	return 0, false
}

// WriteDir writes agg_bmk.json and agg_eval_all.json (JSON lists, as
// InferenceX's collectors write them) into dir and returns their paths.
// With added points it writes AppendOnlyFile too (its path comes last).
func (e *Export) WriteDir(dir string) (paths []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	sortRows(e.Bmk)
	sortRows(e.Evals)
	if e.AppendOnly != nil {
		p := filepath.Join(dir, AppendOnlyFile)
		if err := os.WriteFile(p, e.AppendOnly, 0o644); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		defer func() { paths = append(paths, p) }()
	}
	for _, f := range []struct {
		name string
		rows []map[string]any
	}{{BmkFile, e.Bmk}, {EvalFile, e.Evals}} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f.rows); err != nil {
			return nil, fmt.Errorf("export: %s: %w", f.name, err)
		}
		p := filepath.Join(dir, f.name)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// sortRows orders rows by config key, conc and exp-name, so two exports of
// one sweep are byte-identical.
func sortRows(rows []map[string]any) {
	key := func(m map[string]any) string {
		c, _ := toInt(m["conc"])
		return fmt.Sprintf("%v\x00%09d\x00%v", m["config_key"], c, m["exp_name"])
	}
	sort.SliceStable(rows, func(i, j int) bool { return key(rows[i]) < key(rows[j]) })
}
