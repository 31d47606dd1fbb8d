package curvegaps

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/internal/anynum"
)

// BmkFile is the aggregate InferenceX's collect-results writes and
// `starter export --format ix` writes.
const BmkFile = "agg_bmk.json"

// ReadBmk reads agg_bmk.json rows from a file, or from a directory holding
// agg_bmk.json (an export directory).
func ReadBmk(path string) ([]map[string]any, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, BmkFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []map[string]any
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("%s: not an agg_bmk.json (a JSON list of result rows): %w", path, err)
	}
	return rows, nil
}

// FromBmk turns agg_bmk rows into curves. A row with a config_key (as
// sweepflow exports them) goes on that key's curve; a row without one (as
// InferenceX publishes them) goes on its chart group's curve, see CurveKey.
// Rows without a concurrency, or with no successful request, are skipped
// with a warning.
func FromBmk(rows []map[string]any) ([]Curve, []string) {
	var c Collector
	var warnings []string
	for i, r := range rows {
		conc, ok := anynum.Float(r["conc"])
		if !ok {
			conc, ok = anynum.Float(r["max_concurrency"])
		}
		if !ok || conc < 1 {
			warnings = append(warnings, fmt.Sprintf("row %d: no concurrency; skipped", i))
			continue
		}
		// InferenceX's ingest drops agentic rows without a success too.
		if n, ok := anynum.Float(r["num_requests_successful"]); ok && n == 0 {
			warnings = append(warnings, fmt.Sprintf("row %d (conc %d): no successful request; skipped", i, int(conc)))
			continue
		}
		p := Point{Conc: int(conc)}
		p.E2ELSeconds = metric(r, "median_e2el", "e2el")
		p.Interactivity = metric(r, "median_intvty", "intvty")
		c.Add(CurveKey(r), p)
	}
	return c.Curves(), warnings
}

// metric reads a fixed-seq-len row's flat field, else an agentic row's
// request_metrics.latency.<name>.p50.
func metric(r map[string]any, flat, latency string) float64 {
	if v, ok := anynum.Float(r[flat]); ok {
		return v
	}
	v, _ := anynum.Float(dig(r, "request_metrics", "latency", latency, "p50"))
	return v
}

// CurveKey is the row's config_key, or else the curve InferenceX's charts
// put the row on: one per model, hardware, framework, precision, spec
// decoding, disagg and scenario, plus ISL/OSL for fixed-seq-len, across
// parallelism shapes (TP, EP, DP-attention and worker counts are not in the
// key). The parts are joined with " | ", e.g.
// "dsr1 | b200 | sglang | fp8 | none | agg | fixed-seq-len | 8192/1024".
func CurveKey(r map[string]any) string {
	if k := str(r["config_key"]); k != "" {
		return k
	}
	model := cmp.Or(str(r["infmax_model_prefix"]), str(r["model_prefix"]), str(r["model"]))
	spec := cmp.Or(str(r["spec_decoding"]), "none")
	disagg := "agg"
	if b, _ := r["disagg"].(bool); b {
		disagg = "disagg"
	}
	scenario := cmp.Or(str(r["scenario_type"]), "fixed-seq-len")
	parts := []string{orQ(model), orQ(str(r["hw"])), orQ(str(r["framework"])), orQ(str(r["precision"])), spec, disagg, scenario}
	if scenario != "agentic-coding" {
		isl, _ := anynum.Float(r["isl"])
		osl, _ := anynum.Float(r["osl"])
		parts = append(parts, fmt.Sprintf("%d/%d", int(isl), int(osl)))
	}
	return strings.Join(parts, " | ")
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

func orQ(s string) string { return cmp.Or(s, "?") }
