package srtlaunch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// vLLM workers through dynamo (srt-slurm backends/vllm.py, v1.0.68): one
// srun per node; a data-parallel worker (data-parallel-size set) runs, per
// node, one process that owns the node's DP ranks (dp_launch_mode
// per_node), with srt-slurm's NIXL, DP-RPC, kv-events and VLLM_PORT ports.

const (
	vllmNIXLPortBase = 5400  // VLLM_NIXL_SIDE_CHANNEL_PORT, global blocks
	vllmDPRPCPort    = 8400  // --data-parallel-rpc-port, per leader node
	vllmPortBase     = 20000 // VLLM_PORT = base + stride * process index
	vllmPortStride   = 50
)

// checkVLLM refuses what srt-slurm's vLLM backend launches and this
// launcher does not render, and frontends that do not front vLLM.
func (s *spec) checkVLLM() error {
	e := s.Engine
	if e.AllowPrefillDecodeColocation {
		return notSupported(s.Recipe, "allow_prefill_decode_colocation for vllm")
	}
	if e.DPLaunchMode != "per_node" {
		return notSupported(s.Recipe, fmt.Sprintf("dp_launch_mode %q", e.DPLaunchMode), "per_node")
	}
	switch s.frontendType {
	case "dynamo":
	case "vllm":
		// frontends/vllm.py: `vllm serve` of the one aggregate worker binds
		// the public port; nothing routes between workers.
		if s.prefillWorkers > 0 || s.decodeWorkers > 0 {
			return fmt.Errorf("recipe %s: frontend.type: vllm supports aggregate vLLM jobs only", s.Display)
		}
		if s.aggWorkers != 1 {
			return fmt.Errorf("recipe %s: frontend.type: vllm supports exactly one aggregate worker, got %d; use frontend.type: dynamo to route between workers", s.Display, s.aggWorkers)
		}
	default:
		return notSupported(s.Recipe, fmt.Sprintf("frontend.type %q with the vllm engine", s.Frontend.Type))
	}
	return nil
}

// vllmKVEvents is vLLM's --kv-events-config for a role (nil: none): zmq
// on topic kv-events with KV cache events enabled, the role's settings
// typed (VLLMProtocol.get_kv_events_config_for_mode).
func vllmKVEvents(ro *config.Role) *config.Map {
	if ro == nil || ro.KVEvents == nil {
		return nil
	}
	o := config.NewMap()
	o.Set("publisher", "zmq")
	o.Set("topic", "kv-events")
	o.Set("enable_kv_cache_events", true)
	if own, ok := ro.KVEvents.(*config.Map); ok {
		for _, k := range own.Keys {
			o.Set(k, own.Vals[k])
		}
	}
	return o
}

// cfgGet is config.get(kebab) or config.get(snake), Python's `or` included.
func cfgGet(cfg *config.Map, key string) any {
	if v := cfg.Vals[key]; config.Truthy(v) {
		return v
	}
	return cfg.Vals[strings.ReplaceAll(key, "-", "_")]
}

func cfgInt(cfg *config.Map, key string, def int) int {
	if v, ok := cfgGet(cfg, key).(int64); ok && v != 0 {
		return int(v)
	}
	return def
}

func (s *spec) vllmDP(mode string) bool {
	cfg := s.modeConfig[mode]
	return cfg.Vals["data-parallel-size"] != nil || cfg.Vals["data_parallel_size"] != nil
}

// vllmToProcesses is VLLMProtocol.endpoints_to_processes with per_node DP.
func vllmToProcesses(s *spec, eps []*endpoint) ([]*workerProc, error) {
	http, boot, dpRPC := map[string]int{}, map[string]int{}, map[string]int{}
	next := func(m map[string]int, node string, base, step int) int {
		if _, ok := m[node]; !ok {
			m[node] = base
		}
		p := m[node]
		m[node] += step
		return p
	}
	kv, nixl, sys := kvEventsPortBase, vllmNIXLPortBase, dynSystemPortBase
	var out []*workerProc
	// perNode is one process per node of the endpoint, rank 0 the leader
	// (the sglang layout, and vLLM's when a replica spans nodes).
	perNode := func(ep *endpoint) {
		b := 0
		if ep.mode == "prefill" {
			b = next(boot, ep.nodes[0], bootstrapPortBase, 1)
		}
		for rank, n := range ep.nodes {
			h := 0
			if rank == 0 {
				h = next(http, n, sglangHTTPPortBase, sglangHTTPStride)
			}
			out = append(out, &workerProc{ep: ep, node: n, rank: rank, gpus: ep.gpus, sysPort: sys, httpPort: h,
				kvEventPort: kv, bootstrapPort: b, nixlPort: nixl})
			sys, kv, nixl = sys+1, kv+1, nixl+1
		}
	}
	for _, ep := range eps {
		cfg := s.modeConfig[ep.mode]
		// `vllm serve` manages its local DP ranks itself: one process per node.
		if !s.vllmDP(ep.mode) || s.frontendType == "vllm" {
			perNode(ep)
			continue
		}
		tp, pp := cfgInt(cfg, "tensor-parallel-size", 1), cfgInt(cfg, "pipeline-parallel-size", 1)
		replica := tp * pp
		total := len(ep.nodes) * len(ep.gpus)
		dp := cfgInt(cfg, "data-parallel-size", total/replica)
		if dp*replica != total {
			return nil, fmt.Errorf("%s data-parallel-size=%d, tensor-parallel-size=%d, and pipeline-parallel-size=%d require %d GPUs, but the endpoint has %d allocated GPUs",
				ep.mode, dp, tp, pp, dp*replica, total)
		}
		local := len(ep.gpus)
		if replica > local {
			// Each DP rank spans nodes: one process per node, like TP.
			if len(ep.nodes) < 2 || replica%local != 0 || len(ep.nodes) != dp*(replica/local) {
				return nil, fmt.Errorf("%s: TP x PP replica size %d does not fit the endpoint's %d nodes of %d GPUs", ep.mode, replica, len(ep.nodes), local)
			}
			perNode(ep)
			continue
		}
		if local%replica != 0 {
			return nil, fmt.Errorf("%s TP x PP replica size %d does not divide the node's %d allocated GPUs", ep.mode, replica, local)
		}
		localDP := local / replica
		rpc := next(dpRPC, ep.nodes[0], vllmDPRPCPort, 1)
		nixlBase := nixl
		nixl += dp
		start := 0
		for rank, n := range ep.nodes {
			b := 0
			if ep.mode == "prefill" {
				b = next(boot, n, bootstrapPortBase, 1)
			}
			out = append(out, &workerProc{ep: ep, node: n, rank: rank, gpus: ep.gpus, sysPort: sys,
				httpPort: next(http, n, sglangHTTPPortBase, sglangHTTPStride), kvEventPort: kv, bootstrapPort: b,
				nixlPort: nixlBase, dpRPCPort: rpc, dpStartRank: start})
			sys, kv = sys+1, kv+localDP
			start += localDP
		}
	}
	return out, nil
}

// vllmConnectors are srt-slurm's connector shorthands, as json.dumps writes them.
var vllmConnectors = map[string]string{
	"nixl":    `{"kv_connector": "NixlConnector", "kv_role": "kv_both"}`,
	"lmcache": `{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}`,
	"kvbm":    `{"kv_connector": "DynamoConnector", "kv_connector_module_path": "kvbm.vllm_integration.connector", "kv_role": "kv_both"}`,
}

// vllmCommand is dynamo.vllm's argv (VLLMProtocol.build_worker_command).
func vllmCommand(s *spec, wp *workerProc, procs []*workerProc, ns *nodes, modelArg, served, logDir string) ([]string, error) {
	mode := wp.ep.mode
	cfg := s.modeConfig[mode].Clone()
	pop := func(keys ...string) any {
		var first any
		for _, k := range keys {
			if v, ok := cfg.Get(k); ok {
				if first == nil {
					first = v
				}
				cfg.Delete(k)
			}
		}
		return first
	}
	leader := ns.addr[wp.ep.nodes[0]]
	if s.frontendType == "vllm" {
		return vllmServeCommand(s, wp, cfg, pop, leader, modelArg, served), nil
	}
	cmd := []string{"python3", "-m", "dynamo.vllm", "--model", modelArg, "--served-model-name", served}
	if mode != "agg" {
		cmd = append(cmd, "--disaggregation-mode", mode)
	}
	connector := s.Engine.Connector
	if cfg.Has("connector") {
		if v := pop("connector"); v != nil {
			connector = v
		}
	}
	if c := pyStr(connector); connector != nil && c != "" && c != "null" && c != "none" {
		if preset, ok := vllmConnectors[strings.ToLower(c)]; ok {
			c = preset
		}
		cmd = append(cmd, "--kv-transfer-config", c)
	}
	if !s.Engine.SetCUDAVisibleDevices && len(wp.gpus) > 0 {
		cmd = append(cmd, "--device-ids", joinInts(wp.gpus))
	}
	rank := strconv.Itoa(wp.rank)
	switch {
	case s.vllmDP(mode):
		rpc := wp.dpRPCPort
		if v := pop("data-parallel-rpc-port", "data_parallel_rpc_port"); rpc == 0 {
			rpc = vllmDPRPCPort
			if n, ok := v.(int64); ok && n != 0 {
				rpc = int(n)
			}
		}
		pop("data-parallel-size-local", "data_parallel_size_local", "data-parallel-start-rank", "data_parallel_start_rank",
			"data-parallel-hybrid-lb", "data_parallel_hybrid_lb", "headless")
		replica := cfgInt(cfg, "tensor-parallel-size", 1) * cfgInt(cfg, "pipeline-parallel-size", 1)
		if replica > len(wp.gpus) {
			cmd = append(cmd, "--master-addr", leader, "--nnodes", strconv.Itoa(len(wp.ep.nodes)), "--node-rank", rank,
				"--data-parallel-address", leader, "--data-parallel-rpc-port", strconv.Itoa(rpc))
			if wp.rank > 0 {
				cmd = append(cmd, "--headless")
			}
		} else {
			cmd = append(cmd, "--data-parallel-size-local", strconv.Itoa(len(wp.gpus)/replica), "--data-parallel-start-rank",
				strconv.Itoa(wp.dpStartRank), "--data-parallel-address", leader, "--data-parallel-rpc-port", strconv.Itoa(rpc),
				"--data-parallel-hybrid-lb")
		}
	case len(wp.ep.nodes) > 1:
		cmd = append(cmd, "--master-addr", leader, "--nnodes", strconv.Itoa(len(wp.ep.nodes)), "--node-rank", rank)
		if wp.rank > 0 {
			cmd = append(cmd, "--headless")
		}
	}
	cmd = append(cmd, "--request-plane", s.Dynamo.RequestPlane, "--dump-config-to", fmt.Sprintf("%s/%s_config.json", logDir, wp.node))
	if kv := vllmKVEvents(s.role(mode)); kv != nil {
		kv.Set("endpoint", fmt.Sprintf("tcp://*:%d", wp.kvEventPort))
		cmd = append(cmd, "--kv-events-config", pyJSONDump(kv, 0))
	}
	return append(cmd, configFlags(cfg)...), nil
}

// vllmOrchestrationFlags are the flags srt-slurm derives from the topology
// for `vllm serve` (_VLLM_ORCHESTRATION_FLAGS) and drops from the recipe.
var vllmOrchestrationFlags = []string{"headless", "host", "port", "master-addr", "nnodes", "node-rank"}

// vllmServeCommand is build_worker_command for frontend.type vllm: `vllm
// serve` itself; the leader binds the public port, other node ranks run
// headless (without API-server-only flags).
func vllmServeCommand(s *spec, wp *workerProc, cfg *config.Map, pop func(...string) any, leader, modelArg, served string) []string {
	for _, k := range append([]string(nil), cfg.Keys...) {
		if indexOf(vllmOrchestrationFlags, strings.ReplaceAll(k, "_", "-")) >= 0 {
			pop(k)
		}
	}
	pop("connector")
	if _, ok := cfg.Vals["served-model-name"]; !ok {
		cfg.Set("served-model-name", served)
	}
	cmd := []string{"vllm", "serve", modelArg}
	if wp.rank == 0 {
		cmd = append(cmd, "--host", "0.0.0.0", "--port", strconv.Itoa(frontendPublicPort))
	}
	if len(wp.ep.nodes) > 1 {
		cmd = append(cmd, "--master-addr", leader, "--nnodes", strconv.Itoa(len(wp.ep.nodes)), "--node-rank", strconv.Itoa(wp.rank))
		if wp.rank > 0 {
			cmd = append(cmd, "--headless")
			for _, k := range append([]string(nil), cfg.Keys...) {
				if strings.ReplaceAll(k, "_", "-") == "api-server-count" {
					pop(k)
				}
			}
		}
	}
	if !s.Engine.SetCUDAVisibleDevices && len(wp.gpus) > 0 {
		cmd = append(cmd, "--device-ids", joinInts(wp.gpus))
	}
	return append(cmd, configFlags(cfg)...)
}

// configFlags is srt-slurm's _config_to_cli_args: keys sorted, "_" -> "-",
// true -> --flag, false/None dropped, a list -> --flag a b, else str(v).
func configFlags(cfg *config.Map) []string {
	keys := append([]string(nil), cfg.Keys...)
	sortStrings(keys)
	var out []string
	for _, k := range keys {
		flag := "--" + strings.ReplaceAll(k, "_", "-")
		switch v := cfg.Vals[k].(type) {
		case bool:
			if v {
				out = append(out, flag)
			}
		case []any:
			out = append(out, flag)
			for _, e := range v {
				out = append(out, pyStr(e))
			}
		case nil:
		default:
			out = append(out, flag, pyStr(v))
		}
	}
	return out
}

// vllmProcessEnv adds VLLMProtocol.get_process_environment's ports.
func vllmProcessEnv(e *config.Map, wp *workerProc, ns *nodes) {
	e.Set("DYN_VLLM_KV_EVENT_PORT", strconv.Itoa(wp.kvEventPort))
	e.Set("VLLM_NIXL_SIDE_CHANNEL_PORT", strconv.Itoa(wp.nixlPort))
	e.Set("VLLM_NIXL_SIDE_CHANNEL_HOST", ns.addr[wp.node])
	e.Set("VLLM_PORT", strconv.Itoa(vllmPortBase+max(wp.sysPort-dynSystemPortBase, 0)*vllmPortStride))
}

// injectVLLMSynthetic is InferenceX's dynamo-vllm injector
// (runners/synthetic_injectors/vllm.py): every single-quoted
// speculative-config JSON gets rejection_sample_method "synthetic" and
// synthetic_acceptance_length AL, rewritten compactly; a recipe with none
// is an error, as there.
func (s *spec) injectVLLMSynthetic(al float64) error {
	n := 0
	for _, b := range modeBlocks {
		cfg := s.modeConfig[b.mode]
		if !cfg.SingleQuoted["speculative-config"] {
			continue
		}
		raw, _ := cfg.Vals["speculative-config"].(string)
		out, err := setJSONKeys(raw, [][2]string{{"rejection_sample_method", `"synthetic"`}, {"synthetic_acceptance_length", pyjson.FloatRepr(al)}})
		if err != nil {
			return fmt.Errorf("%s.speculative-config: %v", cfg.Path, err)
		}
		cfg.Vals["speculative-config"] = out
		n++
	}
	if n == 0 {
		return fmt.Errorf("synthetic acceptance for vllm needs a speculative-config: '<json>' entry in a role's vLLM args (InferenceX's injector found none)")
	}
	return nil
}

// setJSONKeys sets top-level keys of a JSON object, keeping key order (new
// keys last), and writes it like json.dumps(separators=(",", ":")).
func setJSONKeys(obj string, kvs [][2]string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(obj))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object: %q", obj)
	}
	var keys []string
	vals := map[string]string{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", err
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return "", err
		}
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = c.String()
	}
	for _, kv := range kvs {
		if _, ok := vals[kv[0]]; !ok {
			keys = append(keys, kv[0])
		}
		vals[kv[0]] = kv[1]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		parts[i] = string(kb) + ":" + vals[k]
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}
