// Package export turns a sweep in the results store into InferenceX's
// result rows: agg_bmk-style rows (one per perf result; fixed-seq-len fields
// as utils/process_result.py writes them, agentic fields as
// process_agentic_result.py does) and agg_eval_all-style rows (as
// collect_eval_results.py does), each with the point's identity so
// InferenceX's ingest could take them. Simulated results carry
// "simulated": true.
package export

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

// ixRow is an InferenceX matrix row (the fields the exports need).
type ixRow struct {
	Image            string          `json:"image"`
	Model            string          `json:"model"`
	ModelPrefix      string          `json:"model-prefix"`
	Precision        string          `json:"precision"`
	Framework        string          `json:"framework"`
	Runner           string          `json:"runner"`
	SpecDecoding     string          `json:"spec-decoding"`
	Prefill          *ixWorker       `json:"prefill"`
	Decode           *ixWorker       `json:"decode"`
	KVOffloading     string          `json:"kv-offloading"`
	KVOffloadBackend json.RawMessage `json:"kv-offload-backend"`
	TotalCPUDRAMGB   int             `json:"total-cpu-dram-gb"`
	ExpName          string          `json:"exp-name"`
	Disagg           bool            `json:"disagg"`
	ScenarioType     string          `json:"scenario-type"`
	Router           json.RawMessage `json:"router"`
	KVP2PTransfer    json.RawMessage `json:"kv-p2p-transfer"`
	ISL              int             `json:"isl"`
	OSL              int             `json:"osl"`
	TP               int             `json:"tp"`
	EP               int             `json:"ep"`
	DPAttn           bool            `json:"dp-attn"`
	Fingerprint      string          `json:"recipe-fingerprint"`
}

type ixWorker struct {
	NumWorker int    `json:"num-worker"`
	TP        int    `json:"tp"`
	EP        int    `json:"ep"`
	DPAttn    bool   `json:"dp-attn"`
	PP        int    `json:"pp"`
	DCPSize   int    `json:"dcp-size"`
	PCPSize   int    `json:"pcp-size"`
	Hardware  string `json:"hardware"`
}

// identity is what is known about a point, from its recorded spec when there
// is one, else from its exp-name and ledger columns.
type identity struct {
	fields   map[string]any // InferenceX identity fields
	agentic  bool
	missing  []string // fields that could not be filled
	rowKnown bool
	// added: an adaptive search added the point (its spec says so).
	added *point.Added
}

// identityOf builds the InferenceX identity fields of a point.
func identityOf(p results.Point) identity {
	id := identity{fields: map[string]any{}}
	f := id.fields
	f["conc"] = p.Conc
	f["exp_name"] = p.ExpName
	f["config_key"] = p.ConfigKey
	f["sweep_id"] = p.SweepID
	f["point_id"] = p.PointID
	f["topology"] = p.Topology
	f["sweepflow_identity"] = p.Identity

	var sp point.Spec // the spec the workflow recorded with the point
	var row ixRow
	if len(p.SpecJSON) > 0 && json.Unmarshal(p.SpecJSON, &sp) == nil && len(sp.Row) > 0 && json.Unmarshal(sp.Row, &row) == nil {
		id.rowKnown = true
	}
	id.added = sp.Added
	if !id.rowKnown {
		return fromExpName(id, p)
	}
	f["hw"] = row.Runner
	f["image"] = cmp.Or(row.Image, sp.Image)
	f["model"] = cmp.Or(row.Model, sp.Model)
	f["infmax_model_prefix"] = cmp.Or(row.ModelPrefix, sp.ModelPrefix)
	f["model_prefix"] = f["infmax_model_prefix"]
	f["framework"] = row.Framework
	f["precision"] = row.Precision
	f["spec_decoding"] = row.SpecDecoding
	f["disagg"] = row.Disagg
	f["recipe_fingerprint"] = cmp.Or(row.Fingerprint, recipeFingerprint(sp.Row))
	if rt := objectOrString(row.Router); rt != nil {
		f["router"] = rt
	}
	if kv := objectOrString(row.KVP2PTransfer); kv != nil {
		f["kv_p2p_transfer"] = kv
	}
	isl, osl := cmp.Or(row.ISL, sp.ISL), cmp.Or(row.OSL, sp.OSL)
	id.agentic = row.ScenarioType == "agentic-coding" || (isl == 0 && osl == 0)
	f["isl"], f["osl"] = isl, osl
	if row.Prefill != nil && row.Decode != nil {
		f["is_multinode"] = true
		putWorker(f, "prefill", row.Prefill, false)
		putWorker(f, "decode", row.Decode, row.Decode.NumWorker == 0)
		f["num_prefill_gpu"] = sp.PrefillGPUs
		f["num_decode_gpu"] = sp.DecodeGPUs
		if row.Prefill.Hardware != "" {
			f["prefill_hw"] = row.Prefill.Hardware
		}
		if row.Decode.Hardware != "" {
			f["decode_hw"] = row.Decode.Hardware
		}
		f["tp"] = row.Prefill.TP + row.Decode.TP
		f["ep"] = max(row.Prefill.EP, row.Decode.EP)
		f["dp_attention"] = row.Prefill.DPAttn || row.Decode.DPAttn
	} else {
		f["is_multinode"] = false
		f["tp"], f["ep"], f["dp_attention"] = row.TP, row.EP, row.DPAttn
		f["pp"], f["dcp_size"], f["pcp_size"] = 1, 1, 1
	}
	if id.agentic {
		f["scenario_type"] = "agentic-coding"
		f["kv_offloading"] = row.KVOffloading
		if b := objectOrString(row.KVOffloadBackend); b != nil {
			f["kv_offload_backend"] = b
		}
		f["allocated_cpu_dram_gb"] = row.TotalCPUDRAMGB
	}
	return id
}

func putWorker(f map[string]any, role string, w *ixWorker, zero bool) {
	v := *w
	if zero {
		v = ixWorker{}
	}
	f[role+"_tp"] = v.TP
	f[role+"_pp"] = v.PP
	f[role+"_dcp_size"] = v.DCPSize
	f[role+"_pcp_size"] = v.PCPSize
	f[role+"_ep"] = v.EP
	f[role+"_dp_attention"] = v.DPAttn
	f[role+"_num_workers"] = v.NumWorker
}

// expNameRE matches InferenceX's multinode agentic exp-name:
// <prefix>_p<nw>x<tp>[ep<ep>][dpa]_d<nw>x<tp>[ep<ep>][dpa]_conc<c>[_kv<mode>-<backend>].
var expNameRE = regexp.MustCompile(`^([^_]+)_p(\d+)x(\d+)(?:ep(\d+))?(dpa)?_d(\d+)x(\d+)(?:ep(\d+))?(dpa)?_conc(\d+)(?:_kv([a-z0-9]+)-([a-z0-9-]+))?$`)

// fromExpName fills what the exp-name encodes, for points recorded before
// the ledger kept the spec; hw, image, framework and precision stay unknown.
func fromExpName(id identity, p results.Point) identity {
	f := id.fields
	m := expNameRE.FindStringSubmatch(p.ExpName)
	if m == nil {
		id.missing = append(id.missing, "hw", "image", "model", "framework", "precision", "topology fields")
		return id
	}
	atoi := func(s string, def int) int {
		if s == "" {
			return def
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	id.agentic = true
	f["infmax_model_prefix"], f["model_prefix"] = m[1], m[1]
	f["is_multinode"] = true
	pw := &ixWorker{NumWorker: atoi(m[2], 0), TP: atoi(m[3], 0), EP: atoi(m[4], 1), DPAttn: m[5] != "", PP: 1, DCPSize: 1, PCPSize: 1}
	dw := &ixWorker{NumWorker: atoi(m[6], 0), TP: atoi(m[7], 0), EP: atoi(m[8], 1), DPAttn: m[9] != "", PP: 1, DCPSize: 1, PCPSize: 1}
	putWorker(f, "prefill", pw, false)
	putWorker(f, "decode", dw, dw.NumWorker == 0)
	f["num_prefill_gpu"] = pw.NumWorker * pw.TP
	f["num_decode_gpu"] = dw.NumWorker * dw.TP
	f["disagg"] = dw.NumWorker > 0
	f["tp"] = pw.TP + dw.TP
	f["ep"] = max(pw.EP, dw.EP)
	f["dp_attention"] = pw.DPAttn || dw.DPAttn
	f["scenario_type"] = "agentic-coding"
	f["isl"], f["osl"] = 0, 0
	if m[11] != "" {
		f["kv_offloading"] = m[11]
		f["kv_offload_backend"] = map[string]any{"name": m[12]}
	}
	id.missing = append(id.missing, "hw", "image", "model", "framework", "precision", "spec_decoding", "recipe_fingerprint")
	return id
}

// recipeFingerprint is InferenceX's recipe-fingerprint: SHA-256 of the
// matrix row's canonical JSON (sorted keys, compact) without conc, exp-name
// and recipe-fingerprint.
func recipeFingerprint(row json.RawMessage) string {
	var m map[string]any
	if len(row) == 0 || json.Unmarshal(row, &m) != nil {
		return ""
	}
	delete(m, "conc")
	delete(m, "exp-name")
	delete(m, "recipe-fingerprint")
	b, err := json.Marshal(m) // maps marshal with sorted keys
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// objectOrString decodes a row value that may be an object, a string or
// absent (router, kv-p2p-transfer, kv-offload-backend).
func objectOrString(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
		return nil
	}
	return v
}
