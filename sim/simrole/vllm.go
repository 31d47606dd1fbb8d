package simrole

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
)

const vllmProg = "python3 -m dynamo.vllm"

// VLLMArgs are the dynamo.vllm (vLLM engine) flags the simulated worker
// acts on; every other flag is accepted and listed in Unknown.
type VLLMArgs struct {
	Model, ServedModelName string
	Mode                   string // agg, prefill or decode
	TP, PP                 int
	// DP is the worker's data-parallel size; this process runs DPLocal of
	// its ranks from DPStartRank (one process per node, --data-parallel-
	// hybrid-lb, as srt-slurm launches a multi-node vLLM worker).
	DP, DPLocal, DPStartRank int
	DPAddress                string
	DPRPCPort                int
	HybridLB                 bool
	ExpertParallel           bool
	DeviceIDs                int // --device-ids count (0: not given)
	MaxModelLen              int
	// Spec is --speculative-config (nil: none); SpecTokens its
	// num_speculative_tokens; SyntheticAL its synthetic_acceptance_length
	// when rejection_sample_method is synthetic (InferenceX's perf runs).
	Spec        map[string]any
	SpecTokens  int
	SyntheticAL float64
	// KVEvents is --kv-events-config (nil: none): KVEventsPort the port
	// its zmq publisher binds when enable_kv_cache_events is on.
	KVEvents     map[string]any
	KVEventsPort int
	// KVTransfer is --kv-transfer-config; MooncakeStore says its connector
	// (or one a MultiConnector wraps) is MooncakeStoreConnector, which
	// reads MOONCAKE_CONFIG_PATH and joins the Mooncake master.
	KVTransfer    map[string]any
	MooncakeStore bool
	// A worker over several nodes without per-node data parallelism
	// (tensor/pipeline ranks across nodes): --nnodes, --node-rank and the
	// rank-0 node's --master-addr:--master-port; --headless on the others.
	NNodes, NodeRankFlag int
	MasterAddr           string
	MasterPort           int
	Headless             bool
	// Serve: `vllm serve MODEL`, the direct vLLM frontend (frontend.type
	// vllm): rank 0 serves the OpenAI API itself on --host:--port; no
	// dynamo registration.
	Serve   bool
	Host    string
	Port    int
	Unknown []string
}

// Component is what dynamo.vllm registers as: prefill workers as "prefill",
// decode and aggregated workers as "backend" (srt-slurm counts backend as
// decode: srtctl/core/health.py check_dynamo_health).
func (a VLLMArgs) Component() string {
	if a.Mode == "prefill" {
		return "prefill"
	}
	return "backend"
}

// GPUs is the whole worker's GPU count: tp x pp per data-parallel rank.
func (a VLLMArgs) GPUs() int { return a.TP * a.PP * a.DP }

// Nodes is how many processes (nodes) the worker's data-parallel ranks
// span, and NodeRank this one's place among them.
func (a VLLMArgs) Nodes() int    { return (a.DP + a.DPLocal - 1) / a.DPLocal }
func (a VLLMArgs) NodeRank() int { return a.DPStartRank / a.DPLocal }

var vllmKnown = map[string]bool{
	"model": true, "served-model-name": true, "disaggregation-mode": true, "is-prefill-worker": true, "is-decode-worker": true,
	"tensor-parallel-size": true, "pipeline-parallel-size": true, "data-parallel-size": true, "data-parallel-size-local": true,
	"data-parallel-start-rank": true, "data-parallel-address": true, "data-parallel-rpc-port": true, "data-parallel-hybrid-lb": true,
	"enable-expert-parallel": true, "device-ids": true, "max-model-len": true, "speculative-config": true,
	"kv-events-config": true, "kv-transfer-config": true, "nnodes": true, "node-rank": true, "master-addr": true,
	"master-port": true, "headless": true, "host": true, "port": true,
}

// vllmMasterPort is vLLM's --master-port default.
const vllmMasterPort = 29501

// kvEventsFields are vLLM's KVEventsConfig fields; the CLI builds the
// dataclass from the JSON object, so any other key is refused.
var kvEventsFields = map[string]string{"enable_kv_cache_events": "bool", "publisher": "string", "endpoint": "string",
	"replay_endpoint": "string?", "buffer_steps": "int", "hwm": "int", "max_queue_size": "int", "topic": "string"}

// jsonObject decodes a CLI JSON argument the way vLLM's json.loads does.
func jsonObject(s string) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("want a JSON object, got %q", s)
	}
	return m, nil
}

// readKVEvents checks --kv-events-config as KVEventsConfig takes it and
// finds the port its zmq publisher binds (tcp://*:PORT).
func (a *VLLMArgs) readKVEvents(s string) error {
	m, err := jsonObject(s)
	if err != nil {
		return err
	}
	for k, v := range m {
		kind, ok := kvEventsFields[k]
		if !ok {
			return fmt.Errorf("TypeError: KVEventsConfig.__init__() got an unexpected keyword argument '%s'", k)
		}
		bad := false
		switch kind {
		case "bool":
			_, isBool := v.(bool)
			bad = !isBool
		case "int":
			n, isNum := v.(json.Number)
			_, err := strconv.Atoi(string(n))
			bad = !isNum || err != nil
		case "string":
			_, isStr := v.(string)
			bad = !isStr
		case "string?":
			_, isStr := v.(string)
			bad = !isStr && v != nil
		}
		if bad {
			return fmt.Errorf("KVEventsConfig.%s: invalid value %v", k, v)
		}
	}
	pub, _ := m["publisher"].(string)
	if pub == "" {
		pub = "null"
	}
	if pub != "null" && pub != "zmq" {
		return fmt.Errorf("ValueError: unknown KV event publisher %q (null, zmq)", pub)
	}
	a.KVEvents = m
	if on, _ := m["enable_kv_cache_events"].(bool); on && pub == "zmq" {
		ep, _ := m["endpoint"].(string)
		if ep == "" {
			ep = "tcp://*:5557" // KVEventsConfig's default endpoint
		}
		rest, ok := strings.CutPrefix(ep, "tcp://")
		_, port, hasPort := strings.Cut(rest, ":")
		n, err := strconv.Atoi(port)
		if !ok || !hasPort || err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("KVEventsConfig.endpoint %q: want tcp://HOST:PORT", ep)
		}
		a.KVEventsPort = n
	}
	return nil
}

// readKVTransfer reads --kv-transfer-config and notes a Mooncake store
// connector, top-level or inside a MultiConnector.
func (a *VLLMArgs) readKVTransfer(s string) error {
	m, err := jsonObject(s)
	if err != nil {
		return err
	}
	if _, ok := m["kv_connector"].(string); !ok {
		return fmt.Errorf("kv_connector: want a connector name, got %v", m["kv_connector"])
	}
	a.KVTransfer = m
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if c, _ := x["kv_connector"].(string); c == "MooncakeStoreConnector" {
				a.MooncakeStore = true
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(m)
	return nil
}

// vllmDefaultRPCPort is vLLM's data_parallel_rpc_port default.
const vllmDefaultRPCPort = 29550

// ParseVLLMArgs reads the rendered dynamo.vllm command and applies the
// checks vLLM makes before it starts. Errors are one line, in argparse's
// shape (`prog: error: ...`).
func ParseVLLMArgs(argv []string) (VLLMArgs, error) {
	a := VLLMArgs{Mode: "agg", TP: 1, PP: 1, DP: 1, DPRPCPort: vllmDefaultRPCPort}
	usage := func(format string, args ...any) error {
		return fmt.Errorf("%s: error: "+format, append([]any{vllmProg}, args...)...)
	}
	words, ok := moduleArgs(argv, "dynamo.vllm")
	if len(argv) >= 2 && path.Base(argv[0]) == "vllm" && argv[1] == "serve" {
		// `vllm serve MODEL [flags]` (frontend.type vllm).
		words, ok, a.Serve, a.Port, a.Host = argv[2:], true, true, 8000, "0.0.0.0"
		if len(words) > 0 && !strings.HasPrefix(words[0], "-") {
			a.Model, words = words[0], words[1:]
		}
	}
	if !ok {
		return a, usage("no `python3 -m dynamo.vllm` or `vllm serve` in the command %q", strings.Join(argv, " "))
	}
	a.NNodes, a.MasterPort = 1, vllmMasterPort
	fa, err := parseFlags(words)
	if err != nil {
		return a, usage("%v", err)
	}
	str, num, flag := fa.setStr, fa.setInt, fa.isSet
	str(&a.Model, "model")
	str(&a.ServedModelName, "served-model-name")
	str(&a.Mode, "disaggregation-mode")
	if flag("is-prefill-worker") {
		a.Mode = "prefill"
	}
	if flag("is-decode-worker") {
		a.Mode = "decode"
	}
	num(&a.TP, "tensor-parallel-size")
	num(&a.PP, "pipeline-parallel-size")
	num(&a.DP, "data-parallel-size")
	localSet := num(&a.DPLocal, "data-parallel-size-local")
	num(&a.DPStartRank, "data-parallel-start-rank")
	str(&a.DPAddress, "data-parallel-address")
	num(&a.DPRPCPort, "data-parallel-rpc-port")
	a.HybridLB = flag("data-parallel-hybrid-lb")
	a.ExpertParallel = flag("enable-expert-parallel")
	num(&a.MaxModelLen, "max-model-len")
	num(&a.NNodes, "nnodes")
	num(&a.NodeRankFlag, "node-rank")
	str(&a.MasterAddr, "master-addr")
	num(&a.MasterPort, "master-port")
	a.Headless = flag("headless")
	str(&a.Host, "host")
	num(&a.Port, "port")
	var devices, spec, kvEvents, kvTransfer string
	str(&devices, "device-ids")
	specSet := str(&spec, "speculative-config")
	kvEventsSet := str(&kvEvents, "kv-events-config")
	kvTransferSet := str(&kvTransfer, "kv-transfer-config")
	if err := errors.Join(fa.errs...); err != nil {
		return a, usage("%v", err)
	}
	for _, n := range fa.names() {
		if !vllmKnown[n] {
			a.Unknown = append(a.Unknown, n)
		}
	}
	if a.Model == "" {
		return a, usage("the following arguments are required: --model")
	}
	if a.NNodes < 1 || a.NodeRankFlag < 0 || a.NodeRankFlag >= a.NNodes {
		return a, usage("ValueError: node_rank %d must be in [0, nnodes %d)", a.NodeRankFlag, a.NNodes)
	}
	if a.NNodes > 1 && a.MasterAddr == "" {
		return a, usage("ValueError: nnodes %d needs --master-addr (the rank-0 node's address): the default 127.0.0.1 reaches no other node", a.NNodes)
	}
	if a.Serve && a.NodeRankFlag > 0 && !a.Headless {
		return a, usage("ValueError: node_rank %d runs no API server: pass --headless (only node rank 0 serves)", a.NodeRankFlag)
	}
	switch a.Mode {
	case "agg", "prefill", "decode":
	default:
		return a, usage("argument --disaggregation-mode: invalid choice: '%s' (choose from 'agg', 'prefill', 'decode')", a.Mode)
	}
	if !localSet {
		a.DPLocal = a.DP
	}
	if devices != "" {
		a.DeviceIDs = len(strings.Split(devices, ","))
	}
	if specSet {
		if err := a.readSpec(spec); err != nil {
			return a, usage("argument --speculative-config: %v", err)
		}
	}
	if kvEventsSet {
		if err := a.readKVEvents(kvEvents); err != nil {
			return a, usage("argument --kv-events-config: %v", err)
		}
	}
	if kvTransferSet {
		if err := a.readKVTransfer(kvTransfer); err != nil {
			return a, usage("argument --kv-transfer-config: %v", err)
		}
	}
	if err := a.check(); err != nil {
		return a, usage("%v", err)
	}
	return a, nil
}

// readSpec reads --speculative-config, a JSON object (vLLM parses it with
// json.loads into SpeculativeConfig). InferenceX's perf runs add
// rejection_sample_method "synthetic" and synthetic_acceptance_length
// (runners/synthetic_injectors/vllm.py): the engine then emits that mean
// acceptance length instead of running the draft model.
func (a *VLLMArgs) readSpec(s string) error {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return fmt.Errorf("want a JSON object, got %q", s)
	}
	a.Spec = m
	a.SpecTokens = 1 // MTP methods default to the model's one next-token layer
	intOf := func(key string) (int, bool, error) {
		v, ok := m[key]
		if !ok {
			return 0, false, nil
		}
		n, isNum := v.(json.Number)
		i, err := strconv.Atoi(string(n))
		if !isNum || err != nil || i < 1 {
			return 0, true, fmt.Errorf("%s: want an integer >= 1, got %v", key, v)
		}
		return i, true, nil
	}
	if n, ok, err := intOf("num_speculative_tokens"); err != nil {
		return err
	} else if ok {
		a.SpecTokens = n
	}
	method, _ := m["rejection_sample_method"].(string)
	al, hasAL := m["synthetic_acceptance_length"]
	switch {
	case method == "synthetic" && !hasAL:
		return errors.New("rejection_sample_method synthetic needs synthetic_acceptance_length")
	case method == "synthetic":
		n, isNum := al.(json.Number)
		v, err := strconv.ParseFloat(string(n), 64)
		// A step accepts at most the draft tokens plus the verified one.
		if !isNum || err != nil || v < 1 || v > float64(a.SpecTokens+1) {
			return fmt.Errorf("synthetic_acceptance_length: want a number in [1, num_speculative_tokens+1 = %d], got %v", a.SpecTokens+1, al)
		}
		a.SyntheticAL = v
	case hasAL:
		return fmt.Errorf("synthetic_acceptance_length is set but rejection_sample_method is %q, not synthetic", method)
	}
	return nil
}

// check mirrors the data-parallel layouts vLLM cannot run (vllm
// ParallelConfig and the DP engine-core startup): a process runs ranks
// [start, start+local) of a group of data_parallel_size, so local may not
// exceed the group nor the range run past it; ranks on other nodes
// rendezvous at --data-parallel-address (vLLM's default, 127.0.0.1, cannot
// reach another node, so the group never forms: refused rather than
// hanging); and the process must have a GPU for each of its local ranks'
// tp x pp workers.
func (a VLLMArgs) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"tensor_parallel_size", a.TP}, {"pipeline_parallel_size", a.PP}, {"data_parallel_size", a.DP}, {"data_parallel_size_local", a.DPLocal}} {
		if f.v < 1 {
			return fmt.Errorf("ValueError: %s must be >= 1, got %d", f.name, f.v)
		}
	}
	if a.DPLocal > a.DP {
		return fmt.Errorf("ValueError: data_parallel_size_local (%d) must be <= data_parallel_size (%d)", a.DPLocal, a.DP)
	}
	if a.DPStartRank < 0 || a.DPStartRank+a.DPLocal > a.DP {
		return fmt.Errorf("ValueError: data_parallel_start_rank %d + data_parallel_size_local %d runs past data_parallel_size %d", a.DPStartRank, a.DPLocal, a.DP)
	}
	if a.DPStartRank%a.DPLocal != 0 {
		return fmt.Errorf("ValueError: data_parallel_start_rank %d is not a multiple of data_parallel_size_local %d (each node runs a whole block of ranks)", a.DPStartRank, a.DPLocal)
	}
	if a.DP > a.DPLocal && a.DPAddress == "" {
		return fmt.Errorf("ValueError: data_parallel_size %d spans nodes (%d local) but --data-parallel-address (the rank-0 node's address) is not set", a.DP, a.DPLocal)
	}
	if (a.TP*a.PP*a.DPLocal)%a.NNodes != 0 {
		return fmt.Errorf("ValueError: tensor_parallel_size %d x pipeline_parallel_size %d x data_parallel_size_local %d does not split over nnodes %d", a.TP, a.PP, a.DPLocal, a.NNodes)
	}
	if per := a.TP * a.PP * a.DPLocal / a.NNodes; a.DeviceIDs > 0 && per != a.DeviceIDs {
		return fmt.Errorf("ValueError: --device-ids lists %d GPUs but tensor_parallel_size %d x pipeline_parallel_size %d x data_parallel_size_local %d over %d node(s) = %d per node", a.DeviceIDs, a.TP, a.PP, a.DPLocal, a.NNodes, per)
	}
	return nil
}

// Acceptance is the simulated engine's speculative acceptance length: the
// synthetic one when the speculative config asks for it, else the
// simulator's own draft chain over num_speculative_tokens, 1 without
// speculation.
func (a VLLMArgs) Acceptance() (al float64, synthetic bool) {
	switch {
	case a.SyntheticAL > 0:
		return a.SyntheticAL, true
	case a.Spec != nil:
		return ownAcceptance(a.SpecTokens + 1), false
	}
	return 1, false
}

func (a VLLMArgs) spec() workerSpec {
	al, _ := a.Acceptance()
	ep := 1
	if a.ExpertParallel {
		ep = a.TP * a.DP
	}
	s := workerSpec{Model: cmp.Or(a.ServedModelName, a.Model), Mode: a.Mode, Component: a.Component(),
		GPUs: a.GPUs(), EP: ep, DP: a.DP, DPA: a.DP > 1, NNodes: a.Nodes(), NodeRank: a.NodeRank(),
		ContextLength: a.MaxModelLen, AL: al, Direct: a.Serve}
	switch {
	case a.NNodes > 1: // ranks across nodes rendezvous at the master
		s.NNodes, s.NodeRank = a.NNodes, a.NodeRankFlag
		s.GroupAddr = net.JoinHostPort(a.MasterAddr, strconv.Itoa(a.MasterPort))
	case s.NNodes > 1:
		s.GroupAddr = net.JoinHostPort(a.DPAddress, strconv.Itoa(a.DPRPCPort))
	}
	if a.Serve {
		s.Host, s.Port = a.Host, a.Port
	}
	return s
}

// runVLLM runs one process of a vLLM worker: srt-slurm starts one per node
// (--data-parallel-size-local ranks each, --data-parallel-hybrid-lb). The
// process holding rank 0 leads: it waits for the others at
// --data-parallel-address:--data-parallel-rpc-port (where vLLM's DP
// coordinator listens), registers the worker once and models all of it;
// the others join and hold their place, as the sglang worker's group does.
func runVLLM(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	a, err := ParseVLLMArgs(argv)
	if err != nil {
		return err
	}
	_, perNode, err := stepGPUs(o.Getenv)
	if err != nil {
		return err
	}
	if need := a.TP * a.PP * a.DPLocal / a.NNodes; a.DeviceIDs == 0 && need > perNode {
		return fmt.Errorf("%s: error: ValueError: tensor_parallel_size %d x pipeline_parallel_size %d x data_parallel_size_local %d needs %d GPUs per node, the node has %d",
			vllmProg, a.TP, a.PP, a.DPLocal, need, perNode)
	}
	if len(a.Unknown) > 0 {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: accepted and ignored %d vLLM flags: --%s\n", len(a.Unknown), strings.Join(a.Unknown, " --"))
	}
	if a.MooncakeStore {
		st, err := vllmMooncakeStore(o.Getenv, mounts)
		if err != nil {
			return fmt.Errorf("%s: %v", vllmProg, err)
		}
		if err := joinMooncake(ctx, st, fmt.Sprintf("vllm-%s-rank%d", a.Mode, a.DPStartRank)); err != nil {
			return fmt.Errorf("%s: %v", vllmProg, err)
		}
		fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED MooncakeStoreConnector joined the master at %s as %s\n", st.master, st.local)
	}
	if a.KVEventsPort > 0 {
		// The zmq publisher binds its endpoint at start-up: a port taken on
		// the node fails the worker, as it fails vLLM.
		pub, err := net.Listen("tcp", o.bind(a.KVEventsPort))
		if err != nil {
			return fmt.Errorf("%s: zmq.error.ZMQError: Address already in use (KV events endpoint port %d): %v", vllmProg, a.KVEventsPort, err)
		}
		defer pub.Close()
		fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED KV events publisher (topic %v) on %s\n", a.KVEvents["topic"], pub.Addr())
	}
	s := a.spec()
	if !a.Serve || o.BindHost != "" {
		s.Host = o.BindHost
	}
	al, synthetic := a.Acceptance()
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED vllm %s worker node %d/%d tp %d pp %d dp %d (local %d from rank %d) expert-parallel %v on %d GPUs, acceptance length %.3g (synthetic %v)\n",
		a.Mode, s.NodeRank, s.NNodes, a.TP, a.PP, a.DP, a.DPLocal, a.DPStartRank, a.ExpertParallel, a.GPUs(), al, synthetic)
	return runSimWorker(ctx, s, o, mounts)
}

// vllmMooncakeStore is MooncakeStoreConfig.load_from_env: the JSON file
// MOONCAKE_CONFIG_PATH names (srt-slurm writes it into /logs), its master
// address, and the worker's own hostname (MOONCAKE_LOCAL_HOSTNAME wins).
func vllmMooncakeStore(getenv func(string) string, mounts Mounts) (mooncakeStore, error) {
	p := getenv("MOONCAKE_CONFIG_PATH")
	if p == "" {
		return mooncakeStore{}, errors.New("ValueError: The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")
	}
	data, err := os.ReadFile(mounts.Host(p))
	if err != nil {
		return mooncakeStore{}, fmt.Errorf("MooncakeStoreConfig: cannot read MOONCAKE_CONFIG_PATH %s: %v", p, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil || cfg == nil {
		return mooncakeStore{}, fmt.Errorf("MooncakeStoreConfig: %s is not a JSON object: %v", p, err)
	}
	st := mooncakeStore{}
	st.master, _ = cfg["master_server_address"].(string)
	st.metadata, _ = cfg["metadata_server"].(string)
	st.local, _ = cfg["local_hostname"].(string)
	if h := getenv("MOONCAKE_LOCAL_HOSTNAME"); h != "" {
		st.local = h
	}
	if st.master == "" {
		return st, fmt.Errorf("MooncakeStoreConfig: %s has no master_server_address", p)
	}
	if st.local == "" {
		st.local = "localhost"
	}
	return st, nil
}
