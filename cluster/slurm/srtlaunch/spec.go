package srtlaunch

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// spec is the part of an srt-slurm recipe that decides the process set,
// with srt-slurm's defaults applied.
type spec struct {
	name string

	modelPath string // model.path: alias, absolute path or hf:<id>
	container string // model.container

	gpusPerNode             int
	prefillWorkers          int
	decodeWorkers           int
	aggWorkers              int
	gpusPerPrefill          int
	gpusPerDecode           int
	gpusPerAgg              int
	aggNodes                int // resources.agg_nodes as written (0: not given)
	spreadWorkers           bool
	nodesNeeded             int
	infraDedicated          bool
	natsMaxPayloadMB        string // "" when not given
	frontendDedicated       bool
	clientDedicated         bool
	colocateDedicated       bool
	frontendType            string
	multipleFrontends       bool
	numAdditionalFrontends  int
	nginxContainer          string
	nginxRaiseUlimit        bool
	nginxSessionAffinity    bool
	nginxAffinityHeader     string
	nginxKeepalive          string
	backendType             string // sglang or trtllm
	gpuType                 string // resources.gpu_type
	numaBind                *bool  // backend.numa_memory_bind; nil: by gpu_type
	publishEvents           bool   // backend.publish_events_and_metrics
	vllm                    vllmSpec
	frontendArgs            *ordered // values already Python-typed (anyVals)
	frontendEnv             *ordered
	benchType               string
	benchCommand            string
	bench                   *yaml.Node // the benchmark section, for the runner's own fields
	benchEnv                *ordered
	benchImage              string
	modeEnv                 map[string]*ordered // prefill, decode, agg; nil when the block is absent
	modeConfig              map[string]*ordered // sglang_config per mode (anyVals)
	kvEvents                any
	environment             *ordered
	srunOptions             *ordered
	extraMounts             []string
	setupScript             string
	dynamoInstall           bool
	dynamoVersion           string
	dynamoHash              string
	dynamoTopOfTree         bool
	dynamoWheel             string
	requestPlane            string
	eventPlane              string
	servedModelNameFallback bool

	// features.go: InferenceX's recipe features beyond srt-slurm's own GB200 recipes.
	mooncake            *mooncakeSpec  // backend.mooncake_kv_store; nil when absent
	telemetry           *telemetrySpec // telemetry with enabled: true; nil when off
	tokenizerMode       string         // benchmark.tokenizer_mode
	aiperfServerMetrics bool           // benchmark.aiperf_server_metrics (default true)
}

// modeBlocks maps srt-slurm's worker modes to the recipe's key suffixes.
var modeBlocks = []struct{ mode, env, cfg string }{
	{"prefill", "prefill_environment", "prefill"},
	{"decode", "decode_environment", "decode"},
	{"agg", "aggregated_environment", "aggregated"},
}

func get(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if deref(n.Content[i]).Value == key {
			v := deref(n.Content[i+1])
			if v != nil && v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				return nil
			}
			return v
		}
	}
	return nil
}

func scalar(n *yaml.Node, field string) (any, error) {
	if n == nil {
		return nil, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("recipe field %s: expected a scalar", field)
	}
	v, err := strictyaml.ScalarValue(n)
	if err != nil {
		return nil, fmt.Errorf("recipe field %s: %v", field, err)
	}
	return v, nil
}

func optString(n *yaml.Node, field, def string) (string, error) {
	v, err := scalar(n, field)
	if err != nil || v == nil {
		return def, err
	}
	return pyStr(v), nil
}

func optBool(n *yaml.Node, field string, def bool) (bool, error) {
	v, err := scalar(n, field)
	if err != nil || v == nil {
		return def, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("recipe field %s: expected true or false, got %q", field, pyStr(v))
	}
	return b, nil
}

func optInt(n *yaml.Node, field string, def int) (int, error) {
	v, err := scalar(n, field)
	if err != nil || v == nil {
		return def, err
	}
	i, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("recipe field %s: expected an integer, got %q", field, pyStr(v))
	}
	return int(i), nil
}

// strMap reads a mapping of scalars as strings, in YAML order.
func strMap(n *yaml.Node, field string) (*ordered, error) {
	out := newOrdered()
	if n == nil {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("recipe field %s: expected a mapping", field)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i]).Value
		v, err := scalar(deref(n.Content[i+1]), field+"."+k)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		out.Set(k, pyStr(v))
	}
	return out, nil
}

// anyMap reads a mapping with Python-typed values, in YAML order.
func anyMap(n *yaml.Node, field string) (*ordered, error) {
	if n == nil {
		return &ordered{}, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("recipe field %s: expected a mapping", field)
	}
	v, err := pyValue(n)
	if err != nil {
		return nil, fmt.Errorf("recipe field %s: %v", field, err)
	}
	return v.(*ordered), nil
}

// unsupported lists recipe features that change the process set and that
// this launcher does not render yet; refusing beats launching something else.
var unsupported = []string{"container_mounts", "services", "profiling.enabled",
	"observability.enabled", "resources.het_jobs", "resources.pack_multinode_workers", "frontend.placement"}

func parseSpec(r *config.Recipe) (*spec, error) {
	doc := deref(r.Doc)
	if doc == nil || doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("recipe %s: not a mapping", r.Display)
	}
	for _, path := range unsupported {
		n := doc
		for _, part := range strings.Split(path, ".") {
			n = get(n, part)
		}
		if n == nil {
			continue
		}
		if n.Kind == yaml.ScalarNode {
			if v, _ := strictyaml.ScalarValue(n); v == false || v == nil {
				continue
			}
		}
		return nil, fmt.Errorf("recipe %s: %s is not supported by the engine launcher yet", r.Display, path)
	}
	s := &spec{name: r.Name, modelPath: r.Model.Path, container: r.Model.Container, modeEnv: map[string]*ordered{}, modeConfig: map[string]*ordered{}}
	if s.name == "" {
		return nil, fmt.Errorf("recipe %s: name is missing", r.Display)
	}
	if s.modelPath == "" {
		return nil, fmt.Errorf("recipe %s: model.path is missing", r.Display)
	}
	fp, err := r.Footprint(0)
	if err != nil {
		return nil, err
	}
	res := r.Resources
	s.gpusPerNode = res.GPUsPerNode
	s.nodesNeeded = fp.Nodes
	if res.Disaggregated {
		s.prefillWorkers, s.decodeWorkers = res.PrefillWorkers, res.DecodeWorkers
		s.gpusPerPrefill, s.gpusPerDecode = fp.GPUsPerPrefill, fp.GPUsPerDecode
	} else {
		s.aggWorkers = max(res.AggWorkers, 1)
		s.gpusPerAgg = fp.GPUsPerPrefill
		s.aggNodes = res.AggNodes
	}
	resN := get(doc, "resources")
	if s.spreadWorkers, err = optBool(get(resN, "spread_workers"), "resources.spread_workers", false); err != nil {
		return nil, err
	}

	infra := get(doc, "infra")
	s.infraDedicated = r.Infra.EtcdNATSDedicatedNode
	if s.natsMaxPayloadMB, err = optString(get(infra, "nats_max_payload_mb"), "infra.nats_max_payload_mb", ""); err != nil {
		return nil, err
	}

	fe := get(doc, "frontend")
	if s.frontendType, err = optString(get(fe, "type"), "frontend.type", "dynamo"); err != nil {
		return nil, err
	}
	if s.frontendType != "dynamo" && s.frontendType != "sglang" && s.frontendType != "vllm" {
		return nil, fmt.Errorf("recipe %s: frontend.type %q is not supported by the engine launcher yet (dynamo, sglang, vllm)", r.Display, s.frontendType)
	}
	if s.multipleFrontends, err = optBool(get(fe, "enable_multiple_frontends"), "frontend.enable_multiple_frontends", true); err != nil {
		return nil, err
	}
	if s.numAdditionalFrontends, err = optInt(get(fe, "num_additional_frontends"), "frontend.num_additional_frontends", 9); err != nil {
		return nil, err
	}
	if s.nginxContainer, err = optString(get(fe, "nginx_container"), "frontend.nginx_container", "nginx:1.27.4"); err != nil {
		return nil, err
	}
	if s.nginxRaiseUlimit, err = optBool(get(fe, "nginx_raise_ulimit"), "frontend.nginx_raise_ulimit", false); err != nil {
		return nil, err
	}
	if s.nginxSessionAffinity, err = optBool(get(fe, "nginx_session_affinity"), "frontend.nginx_session_affinity", false); err != nil {
		return nil, err
	}
	if s.nginxAffinityHeader, err = optString(get(fe, "nginx_session_affinity_header"), "frontend.nginx_session_affinity_header", "X-Dynamo-Session-ID"); err != nil {
		return nil, err
	}
	if s.nginxKeepalive, err = optString(get(fe, "nginx_keepalive_timeout"), "frontend.nginx_keepalive_timeout", "600s"); err != nil {
		return nil, err
	}
	if s.frontendDedicated, err = optBool(get(fe, "dedicated_node"), "frontend.dedicated_node", false); err != nil {
		return nil, err
	}
	if s.frontendArgs, err = anyMap(get(fe, "args"), "frontend.args"); err != nil {
		return nil, err
	}
	if s.frontendEnv, err = strMap(get(fe, "env"), "frontend.env"); err != nil {
		return nil, err
	}

	bench := get(doc, "benchmark")
	s.bench = bench
	if s.benchType, err = optString(get(bench, "type"), "benchmark.type", "manual"); err != nil {
		return nil, err
	}
	switch s.benchType {
	case "custom":
		if s.benchCommand, err = optString(get(bench, "command"), "benchmark.command", ""); err != nil {
			return nil, err
		}
		if s.benchCommand == "" {
			return nil, fmt.Errorf("recipe %s: benchmark.command is required for benchmark.type custom", r.Display)
		}
	case "manual":
	default:
		if _, ok := benchRunners[s.benchType]; !ok {
			return nil, fmt.Errorf("recipe %s: benchmark.type %q is not supported by the engine launcher yet (%s)", r.Display, s.benchType, strings.Join(benchTypes(), ", "))
		}
		if err := benchRunners[s.benchType].validate(bench); err != nil {
			return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
		}
	}
	if s.benchEnv, err = strMap(get(bench, "env"), "benchmark.env"); err != nil {
		return nil, err
	}
	if s.benchImage, err = optString(get(bench, "container_image"), "benchmark.container_image", ""); err != nil {
		return nil, err
	}
	if s.clientDedicated, err = optBool(get(bench, "client_dedicated_node"), "benchmark.client_dedicated_node", false); err != nil {
		return nil, err
	}
	if s.colocateDedicated, err = optBool(get(bench, "colocate_with_frontend"), "benchmark.colocate_with_frontend", true); err != nil {
		return nil, err
	}

	be := get(doc, "backend")
	if be == nil {
		return nil, fmt.Errorf("recipe %s: backend is missing", r.Display)
	}
	// srt-slurm's backend section defaults to SGLang; most of its GB200
	// recipes do not write the type.
	if s.backendType, err = optString(get(be, "type"), "backend.type", "sglang"); err != nil {
		return nil, err
	}
	if s.gpuType, err = optString(get(resN, "gpu_type"), "resources.gpu_type", ""); err != nil {
		return nil, err
	}
	cfgKey := "sglang_config"
	switch s.backendType {
	case "sglang":
	case "trtllm":
		cfgKey = "trtllm_config"
		if err := s.parseTRTLLM(be, r.Display); err != nil {
			return nil, err
		}
	case "vllm":
		cfgKey = "vllm_config"
		if err := s.parseVLLM(be, r.Display); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("recipe %s: backend.type %q is not supported by the engine launcher (sglang, trtllm, vllm)", r.Display, s.backendType)
	}
	if s.frontendType == "vllm" && s.backendType != "vllm" {
		return nil, fmt.Errorf("recipe %s: frontend.type: vllm requires backend.type: vllm (got %s)", r.Display, s.backendType)
	}
	sc := get(be, cfgKey)
	for _, b := range modeBlocks {
		if n := get(be, b.env); n != nil {
			if s.modeEnv[b.mode], err = strMap(n, "backend."+b.env); err != nil {
				return nil, err
			}
		}
		if s.modeConfig[b.mode], err = anyMap(get(sc, b.cfg), "backend."+cfgKey+"."+b.cfg); err != nil {
			return nil, err
		}
	}
	if kv := get(be, "kv_events_config"); kv != nil {
		if s.kvEvents, err = pyValue(kv); err != nil {
			return nil, err
		}
	}
	if err := s.parseMooncake(be, r.Display); err != nil {
		return nil, err
	}
	if err := s.parseBenchExtras(r.Display); err != nil {
		return nil, err
	}
	if err := s.parseTelemetry(doc, r.Display); err != nil {
		return nil, err
	}

	if s.environment, err = strMap(get(doc, "environment"), "environment"); err != nil {
		return nil, err
	}
	if s.srunOptions, err = strMap(get(doc, "srun_options"), "srun_options"); err != nil {
		return nil, err
	}
	if em := get(doc, "extra_mount"); em != nil {
		if em.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("recipe %s: extra_mount must be a list of host:container", r.Display)
		}
		for _, m := range em.Content {
			v := deref(m).Value
			if !strings.Contains(v, ":") {
				return nil, fmt.Errorf("recipe %s: extra_mount %q is not host:container", r.Display, v)
			}
			s.extraMounts = append(s.extraMounts, v)
		}
	}
	if s.setupScript, err = optString(get(doc, "setup_script"), "setup_script", ""); err != nil {
		return nil, err
	}

	dy := get(doc, "dynamo")
	if s.dynamoInstall, err = optBool(get(dy, "install"), "dynamo.install", true); err != nil {
		return nil, err
	}
	if s.dynamoVersion, err = optString(get(dy, "version"), "dynamo.version", "0.8.0"); err != nil {
		return nil, err
	}
	if s.dynamoHash, err = optString(get(dy, "hash"), "dynamo.hash", ""); err != nil {
		return nil, err
	}
	if s.dynamoTopOfTree, err = optBool(get(dy, "top_of_tree"), "dynamo.top_of_tree", false); err != nil {
		return nil, err
	}
	if s.dynamoWheel, err = optString(get(dy, "wheel"), "dynamo.wheel", ""); err != nil {
		return nil, err
	}
	var sources []string
	for name, on := range map[string]bool{"hash": s.dynamoHash != "", "top_of_tree": s.dynamoTopOfTree, "wheel": s.dynamoWheel != ""} {
		if on {
			sources = append(sources, name)
		}
	}
	if len(sources) > 1 {
		return nil, fmt.Errorf("recipe %s: dynamo: give only one of hash, top_of_tree and wheel", r.Display)
	}
	if len(sources) == 1 {
		s.dynamoVersion = "" // another install source replaces the default pip version
	}
	if strings.HasSuffix(s.dynamoWheel, ".whl") || strings.Contains(s.dynamoWheel, "/") {
		return nil, fmt.Errorf("recipe %s: dynamo.wheel must be a package version like 1.2.0.dev20260426, not a file name", r.Display)
	}
	if s.requestPlane, err = optString(get(dy, "request_plane"), "dynamo.request_plane", "tcp"); err != nil {
		return nil, err
	}
	switch s.requestPlane {
	case "nats", "tcp", "http":
	default:
		return nil, fmt.Errorf("recipe %s: dynamo.request_plane %q must be nats, tcp or http", r.Display, s.requestPlane)
	}
	if s.eventPlane, err = optString(get(dy, "event_plane"), "dynamo.event_plane", ""); err != nil {
		return nil, err
	}
	return s, nil
}

// installsDynamo: workers and frontends install dynamo in their preamble.
func (s *spec) installsDynamo() bool { return s.frontendType == "dynamo" && s.dynamoInstall }

// wheelEnv is what srt-slurm derives from dynamo.wheel for its setup scripts.
func (s *spec) wheelEnv() *ordered {
	env := newOrdered()
	if s.dynamoWheel != "" {
		env.Set("DYNAMO_WHEEL_NAME", "ai_dynamo-"+s.dynamoWheel+"-py3-none-any.whl")
		env.Set("DYNAMO_VERSION", s.dynamoWheel)
	}
	return env
}

// Golden-AL rewrite (InferenceX runners/inject_synthetic_acceptance.py): the
// three variables go first in every worker environment block the recipe has.
var syntheticKeys = []string{"SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE"}

// injectSyntheticAcceptance applies InferenceX's injector for the recipe's
// framework (runners/synthetic_injectors: dynamo-sglang, dynamo-vllm); a
// framework without one cannot run a spec-decode recipe in perf mode.
func (s *spec) injectSyntheticAcceptance(al float64) error {
	switch s.backendType {
	case "vllm":
		return s.injectVLLMSynthetic(al)
	case "trtllm":
		for _, b := range modeBlocks {
			if cfg := s.modeConfig[b.mode]; cfg.anyVals["speculative_config"] != nil || cfg.anyVals["speculative-config"] != nil {
				return fmt.Errorf("InferenceX has no synthetic-acceptance injector for trtllm (backend.trtllm_config.%s.speculative_config): a throughput run cannot pin its acceptance length", b.cfg)
			}
		}
		return nil // no draft model, nothing to pin
	}
	return s.injectSGLangSynthetic(strconv.FormatFloat(al, 'f', -1, 64))
}

func (s *spec) injectSGLangSynthetic(al string) error {
	for _, b := range modeBlocks {
		env := s.modeEnv[b.mode]
		if env == nil {
			continue
		}
		for _, k := range syntheticKeys {
			if env.Has(k) {
				return fmt.Errorf("recipe already sets %s in backend.%s; synthetic acceptance is injected by the launcher", k, b.env)
			}
		}
		out := newOrdered()
		out.Set(syntheticKeys[0], al)
		out.Set(syntheticKeys[1], "match-expected")
		out.Set(syntheticKeys[2], "real-draft-token")
		for _, k := range env.keys {
			out.Set(k, env.vals[k])
		}
		s.modeEnv[b.mode] = out
	}
	return nil
}
