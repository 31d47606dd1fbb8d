package srtlaunch

import (
	"encoding/json"
	"fmt"
)

// FrontendHealth is a dynamo frontend's /health answer as srt-slurm reads
// it (srtctl/core/health.py, check_dynamo_health): every registered worker
// is one instance; only "generate" endpoints count.
type FrontendHealth struct {
	Status    string           `json:"status"`
	Instances []HealthInstance `json:"instances"`
}

// HealthInstance is one registered endpoint of a worker.
type HealthInstance struct {
	Component  string `json:"component"` // prefill, decode, or backend (aggregated)
	Endpoint   string `json:"endpoint"`  // generate, clear_kv_blocks, ...
	InstanceID int64  `json:"instance_id"`
	Namespace  string `json:"namespace,omitempty"`
	Address    string `json:"address,omitempty"` // where the worker's leader serves (sweepflow's simulator fills it)
}

// Workers counts the registered generate endpoints the way srt-slurm does:
// prefill as prefill; decode and backend (aggregated) as decode.
func (h FrontendHealth) Workers() (prefill, decode int) {
	for _, in := range h.Instances {
		if in.Endpoint != "generate" {
			continue
		}
		switch in.Component {
		case "prefill":
			prefill++
		case "decode", "backend", "tensorrt_llm":
			decode++
		}
	}
	return prefill, decode
}

// ParseFrontendHealth reads a /health body; a body without instances is
// an error (the frontend is up but is not a dynamo frontend, or too old).
func ParseFrontendHealth(body []byte) (FrontendHealth, error) {
	var h FrontendHealth
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return h, fmt.Errorf("frontend /health: %v", err)
	}
	if _, ok := raw["instances"]; !ok {
		return h, fmt.Errorf("frontend /health: no \"instances\" in %.200s", body)
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("frontend /health: %v", err)
	}
	return h, nil
}

// Expected is how many prefill and decode (or aggregated) workers a process
// set registers once it is up: one per worker, counted on its leader.
func Expected(procs []*Process) (prefill, decode int) {
	for _, p := range procs {
		if p.Index < 0 {
			continue
		}
		switch p.Role {
		case RolePrefill:
			prefill = max(prefill, p.Index+1)
		case RoleDecode, RoleAgg:
			decode = max(decode, p.Index+1)
		}
	}
	return prefill, decode
}

// RouterWorkers reads an SGLang router's /workers answer as srt-slurm's
// check_sglang_router_health does: stats.prefill_count, and decode_count
// plus regular_count (aggregated workers) as decode.
func RouterWorkers(body []byte) (prefill, decode int, err error) {
	var w struct {
		Stats *struct {
			Prefill int `json:"prefill_count"`
			Decode  int `json:"decode_count"`
			Regular int `json:"regular_count"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return 0, 0, fmt.Errorf("router /workers: %v", err)
	}
	if w.Stats == nil {
		return 0, 0, fmt.Errorf("router /workers: no \"stats\" in %.200s", body)
	}
	return w.Stats.Prefill, w.Stats.Decode + w.Stats.Regular, nil
}
