package srtlaunch

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// The recipe sections InferenceX's GB200/GB300 recipes use beyond srt-slurm's
// own GB200 recipes, read in parseSpec's style: the Mooncake KV store
// (backend.mooncake_kv_store), DCGM power telemetry (telemetry) and the
// benchmark fields srt-slurm v1.0.68 does not know (benchmark.tokenizer_mode,
// benchmark.aiperf_server_metrics). Each is kept as srt-slurm's schema
// validates it: an unknown field is refused by name.

// mooncakeSpec is backend.mooncake_kv_store (srt-slurm v1.0.68
// MooncakeKVStoreConfig for sglang, VLLMMooncakeKVStoreConfig for vllm).
type mooncakeSpec struct {
	container       string   // "" runs the master in the job's image
	env             *ordered // worker environment, between MOONCAKE_LOCAL_HOSTNAME and the stamped keys
	masterExtraArgs []string
	storeConfig     *ordered // vllm only: the JSON written to mooncake_store_config.json (typed values)
}

// telemetrySpec is telemetry with provider dcgm-power (srt-slurm v1.0.68
// TelemetryConfig; provider as the mainline power lineage names it).
type telemetrySpec struct {
	image          string // dcgm_exporter.container_image
	port           int
	command        string // the exporter command as resolve_exporter_command resolves it
	interval       float64
	storageSubdir  string
	required       bool
	startupTimeout float64
	requestTimeout float64
	joinTimeout    float64
	concurrencies  []int
}

// dcgmExporterCommand is srt-slurm's DCGM_EXPORTER_COMMAND_TEMPLATE: 100 ms
// NVML sampling, the exporter listening on the recipe's port.
const dcgmExporterCommand = "dcgm-exporter --collect-interval=100 --address :{port}"

// Limits srt-slurm's _validate_dcgm_power checks the telemetry block against.
const (
	powerMaxSampleGap      = 3.0 // seconds; a longer collector period fails every window
	powerCycleTimeoutGrace = 1.0 // seconds added to each collect cycle's deadline
)

// mooncakeFile is what srt-slurm writes for vLLM's MooncakeStoreConnector.
const mooncakeFile = "mooncake_store_config.json"

// Ports of the Mooncake master (srtctl/ports.py).
const (
	mooncakeMasterPort   = 8700
	mooncakeMetadataPort = 8701
	mooncakeMetricsPort  = 8702
)

// keysIn refuses a mapping key outside allowed, as srt-slurm's schema does.
func keysIn(n *yaml.Node, field string, allowed ...string) error {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("recipe field %s: expected a mapping", field)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i]).Value
		if indexOf(allowed, k) < 0 {
			return fmt.Errorf("recipe field %s.%s: unknown field (srt-slurm accepts %s)", field, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// optFloat reads a number (an int is a float, as marshmallow's Float takes it).
func optFloat(n *yaml.Node, field string, def float64) (float64, error) {
	v, err := scalar(n, field)
	if err != nil || v == nil {
		return def, err
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("recipe field %s: expected a number, got %q", field, pyStr(v))
}

// parseMooncake reads backend.mooncake_kv_store; config has refused the
// fields srt-slurm refuses (a store on trtllm, store_config outside vllm).
func (s *spec) parseMooncake(be *yaml.Node, display string) error {
	mk := get(be, "mooncake_kv_store")
	if mk == nil {
		return nil
	}
	field := "backend.mooncake_kv_store"
	m := &mooncakeSpec{}
	var err error
	if m.container, err = optString(get(mk, "container"), field+".container", ""); err != nil {
		return err
	}
	if m.env, err = strMap(get(mk, "env"), field+".env"); err != nil {
		return err
	}
	if n := get(mk, "master_extra_args"); n != nil {
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("recipe %s: %s.master_extra_args must be a list of strings", display, field)
		}
		for _, a := range n.Content {
			v, err := scalar(deref(a), field+".master_extra_args")
			if err != nil {
				return err
			}
			m.masterExtraArgs = append(m.masterExtraArgs, pyStr(v))
		}
	}
	if n := get(mk, "store_config"); n != nil {
		if m.storeConfig, err = anyMap(n, field+".store_config"); err != nil {
			return err
		}
	}
	s.mooncake = m
	return nil
}

// mooncakeMasterCommand is do_sweep._build_mooncake_master_command: the
// master with its embedded HTTP metadata server and metrics, then the
// recipe's extra arguments.
func mooncakeMasterCommand(m *mooncakeSpec) []string {
	cmd := []string{"mooncake_master",
		"--port=" + strconv.Itoa(mooncakeMasterPort),
		"--enable_http_metadata_server=true",
		"--http_metadata_server_port=" + strconv.Itoa(mooncakeMetadataPort),
		"--eviction_high_watermark_ratio=0.9",
		"--default_kv_lease_ttl=10000",
		"--rpc_thread_num=16",
		"--enable_metric_reporting=true",
		"--metrics_port=" + strconv.Itoa(mooncakeMetricsPort),
	}
	return append(cmd, m.masterExtraArgs...)
}

// mooncakeWorkerEnv adds get_mooncake_worker_env: the worker's own address
// (the recipe's env may override it), the recipe's env, then the master's
// addresses srt-slurm stamps (and, for vLLM, the store config's path).
func (s *spec) mooncakeWorkerEnv(e *ordered, infraAddr, localAddr string) {
	m := s.mooncake
	if m == nil {
		return
	}
	e.Set("MOONCAKE_LOCAL_HOSTNAME", localAddr)
	for _, k := range m.env.keys {
		e.Set(k, m.env.vals[k])
	}
	e.Set("MOONCAKE_MASTER", fmt.Sprintf("%s:%d", infraAddr, mooncakeMasterPort))
	e.Set("MOONCAKE_TE_META_DATA_SERVER", fmt.Sprintf("http://%s:%d/metadata", infraAddr, mooncakeMetadataPort))
	if s.backendType == "vllm" {
		e.Set("MOONCAKE_CONFIG_PATH", "/logs/"+mooncakeFile)
	}
}

// mooncakeStoreConfig is build_mooncake_store_config as json.dumps(indent=2)
// writes it: the recipe's store_config with master_server_address forced
// to the infra node.
func (s *spec) mooncakeStoreConfig(infraAddr string) string {
	out := &ordered{}
	if sc := s.mooncake.storeConfig; sc != nil {
		for _, k := range sc.keys {
			out.setAny(k, sc.anyVals[k])
		}
	}
	out.setAny("master_server_address", fmt.Sprintf("%s:%d", infraAddr, mooncakeMasterPort))
	return pyJSONDump(out, 2)
}

var telemetryFields = []string{"enabled", "provider", "dcgm_exporter", "default_frequency", "storage_subdir", "required",
	"startup_timeout_seconds", "request_timeout_seconds", "collector_join_timeout_seconds"}

// parseTelemetry reads the telemetry block; only an enabled dcgm-power
// block launches anything, and it is checked as srt-slurm's
// _validate_dcgm_power checks it, so a run that could never publish is
// refused before nodes are requested.
func (s *spec) parseTelemetry(doc *yaml.Node, display string) error {
	tn := get(doc, "telemetry")
	if tn == nil {
		return nil
	}
	if err := keysIn(tn, "telemetry", telemetryFields...); err != nil {
		return fmt.Errorf("recipe %s: %v", display, err)
	}
	on, err := optBool(get(tn, "enabled"), "telemetry.enabled", false)
	if err != nil || !on {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("recipe %s: "+format, append([]any{display}, args...)...)
	}
	provider, err := optString(get(tn, "provider"), "telemetry.provider", "dcgm-power")
	if err != nil {
		return err
	}
	if provider != "dcgm-power" {
		return fail("telemetry.provider %q is not supported by the engine launcher yet (dcgm-power)", provider)
	}
	t := &telemetrySpec{}
	ex := get(tn, "dcgm_exporter")
	if ex == nil {
		return fail("telemetry.dcgm_exporter is required when telemetry is enabled")
	}
	if err := keysIn(ex, "telemetry.dcgm_exporter", "container_image", "port", "command"); err != nil {
		return fmt.Errorf("recipe %s: %v", display, err)
	}
	if t.image, err = optString(get(ex, "container_image"), "telemetry.dcgm_exporter.container_image", ""); err != nil {
		return err
	}
	if t.image == "" {
		return fail("telemetry.dcgm_exporter.container_image must be non-empty")
	}
	if t.port, err = optInt(get(ex, "port"), "telemetry.dcgm_exporter.port", 0); err != nil {
		return err
	}
	if t.port < 1 || t.port > 65535 {
		return fail("telemetry.dcgm_exporter.port must be in 1..65535")
	}
	// resolve_exporter_command: the recipe's command (with {port}) or the template.
	cmd := dcgmExporterCommand
	if c, err := optString(get(ex, "command"), "telemetry.dcgm_exporter.command", ""); err != nil {
		return err
	} else if c != "" {
		cmd = c
	}
	t.command = strings.ReplaceAll(cmd, "{port}", strconv.Itoa(t.port))
	for _, f := range []struct {
		key string
		dst *float64
		def float64
	}{{"default_frequency", &t.interval, 1.0}, {"startup_timeout_seconds", &t.startupTimeout, 30}, {"request_timeout_seconds", &t.requestTimeout, 2}} {
		if *f.dst, err = optFloat(get(tn, f.key), "telemetry."+f.key, f.def); err != nil {
			return err
		}
		if math.IsInf(*f.dst, 0) || math.IsNaN(*f.dst) || *f.dst <= 0 {
			return fail("telemetry.%s must be finite and positive", f.key)
		}
	}
	if t.interval > powerMaxSampleGap {
		return fail("telemetry.default_frequency=%s exceeds the %gs max sample gap srt-slurm's power validator accepts", pyjson.FloatRepr(t.interval), powerMaxSampleGap)
	}
	// v1.0.68 defaults the join budget to two full collect cycles plus 2 s
	// and requires more than two cycles; the power lineage InferenceX pins
	// (edwingao28/srt-slurm, where provider comes from) only requires more
	// than one request timeout, which its recipes' 10 s with 2 s requests
	// meet. That lineage's check is the one followed.
	if t.joinTimeout, err = optFloat(get(tn, "collector_join_timeout_seconds"), "telemetry.collector_join_timeout_seconds",
		2*(2*t.requestTimeout+powerCycleTimeoutGrace)+2); err != nil {
		return err
	}
	if math.IsInf(t.joinTimeout, 0) || math.IsNaN(t.joinTimeout) || t.joinTimeout <= t.requestTimeout {
		return fail("telemetry.collector_join_timeout_seconds must be finite and greater than telemetry.request_timeout_seconds")
	}
	if t.storageSubdir, err = optString(get(tn, "storage_subdir"), "telemetry.storage_subdir", "power"); err != nil {
		return err
	}
	if !safeSubpath(t.storageSubdir) {
		return fail("telemetry.storage_subdir must be a safe relative path below the run log directory")
	}
	if t.required, err = optBool(get(tn, "required"), "telemetry.required", false); err != nil {
		return err
	}
	if s.benchType != "sa-bench" {
		return fail("telemetry requires benchmark.type: sa-bench (power samples are matched to SA-Bench's measurement windows)")
	}
	if s.infraDedicated {
		return fail("telemetry requires infra.etcd_nats_dedicated_node: false (a dedicated infra node moves the head off the host that collects the samples)")
	}
	if t.concurrencies, err = concurrencyList(s.bench); err != nil {
		return fmt.Errorf("recipe %s: %v", display, err)
	}
	seen := map[int]bool{}
	for _, c := range t.concurrencies {
		if c <= 0 || seen[c] {
			t.concurrencies = nil
			break
		}
		seen[c] = true
	}
	if len(t.concurrencies) == 0 {
		return fail("telemetry requires a non-empty list of unique positive benchmark.concurrencies")
	}
	s.telemetry = t
	return nil
}

// safeSubpath is srt-slurm's _is_safe_relative_subpath.
func safeSubpath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == ".." {
			return false
		}
	}
	return path.Clean(p) != "."
}

// concurrencyList is BenchmarkConfig.get_concurrency_list: "4x8" or a list.
func concurrencyList(b *yaml.Node) ([]int, error) {
	v, err := benchValue(b, "concurrencies")
	if err != nil || v == nil {
		return nil, err
	}
	var parts []any
	switch x := v.(type) {
	case string:
		for _, p := range strings.Split(x, "x") {
			parts = append(parts, p)
		}
	case []any:
		parts = x
	default:
		parts = []any{x}
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		var n int64
		switch y := p.(type) {
		case int64:
			n = y
		case string:
			if n, err = strconv.ParseInt(strings.TrimSpace(y), 10, 64); err != nil {
				return nil, fmt.Errorf("recipe field benchmark.concurrencies: %q is not an integer", y)
			}
		default:
			return nil, fmt.Errorf("recipe field benchmark.concurrencies: %s is not an integer", pyRepr(p))
		}
		out = append(out, int(n))
	}
	return out, nil
}

// parseBenchExtras reads the two benchmark fields InferenceX recipes use
// that v1.0.68 lacks: tokenizer_mode (srt-slurm 4261dba6, "Add SA-Bench
// DeepSeek V4 tokenizer mode": SA-Bench's --tokenizer-mode, passed as
// bench.sh's next positional argument) and aiperf_server_metrics (the
// custom-benchmark opt-in of cquil11/srt-slurm-nv de59739b that mainline
// #276 made the default, which v1.0.68 has: false opts a custom benchmark
// out of AIPERF_SERVER_METRICS_URLS).
func (s *spec) parseBenchExtras(display string) error {
	var err error
	if s.tokenizerMode, err = optString(get(s.bench, "tokenizer_mode"), "benchmark.tokenizer_mode", ""); err != nil {
		return err
	}
	if s.tokenizerMode != "" && s.benchType != "sa-bench" {
		return fmt.Errorf("recipe %s: benchmark.tokenizer_mode is an SA-Bench option; benchmark.type %q does not take it", display, s.benchType)
	}
	s.aiperfServerMetrics = true
	if n := get(s.bench, "aiperf_server_metrics"); n != nil {
		if s.aiperfServerMetrics, err = optBool(n, "benchmark.aiperf_server_metrics", true); err != nil {
			return err
		}
		if s.benchType != "custom" {
			return fmt.Errorf("recipe %s: benchmark.aiperf_server_metrics applies to benchmark.type custom; %q gets its metrics URLs from its runner", display, s.benchType)
		}
	}
	return nil
}

// PowerTelemetry is the collector srt-slurm's orchestrator runs on the head
// node for telemetry dcgm-power (core/power/session.py): it polls every
// worker node's DCGM exporter and writes <log dir>/<storage_subdir>/
// samples.csv and manifest.json. The exporters are rendered processes
// (RoleTelemetry); the collector is the launcher's part.
type PowerTelemetry struct {
	Dir             string        `json:"dir"` // host path of the artifacts: <log dir>/<storage_subdir>
	JobID           string        `json:"job_id"`
	RunName         string        `json:"run_name"` // <recipe name>_<job id>
	Interval        float64       `json:"sample_interval_seconds"`
	StartupTimeout  float64       `json:"startup_timeout_seconds"`
	RequestTimeout  float64       `json:"request_timeout_seconds"`
	JoinTimeout     float64       `json:"collector_join_timeout_seconds"`
	Required        bool          `json:"required"`
	Port            int           `json:"exporter_port"`
	ExporterImage   string        `json:"exporter_image"`
	ExporterCommand string        `json:"exporter_command"`
	Nodes           []string      `json:"nodes"` // the worker nodes, sorted
	Addrs           []string      `json:"addrs"` // Nodes[i]'s address
	Devices         []PowerDevice `json:"expected_devices"`
	Windows         []PowerWindow `json:"expected_windows"`
}

// PowerDevice is a GPU the run must sample (power/topology.py ExpectedDevice).
type PowerDevice struct {
	Hostname    string            `json:"hostname"`
	GPUIndex    int               `json:"gpu_index"`
	Assignments []PowerAssignment `json:"assignments"`
}

// PowerAssignment is one worker process's claim on a GPU.
type PowerAssignment struct {
	WorkerRole    string `json:"worker_role"`
	WorkerIndex   int    `json:"worker_index"`
	WorkerProcess int    `json:"worker_process"`
	HetGroup      *int   `json:"het_group"`
}

// PowerWindow is one measured concurrency the benchmark must record.
type PowerWindow struct {
	BenchmarkType string `json:"benchmark_type"`
	Concurrency   int    `json:"concurrency"`
}

// powerTelemetry derives the collector's settings as start_power_telemetry
// does: the worker nodes, every GPU a worker process holds, one window per
// concurrency.
func powerTelemetry(t *telemetrySpec, s *spec, procs []*workerProc, ns *nodes, opt Options) *PowerTelemetry {
	p := &PowerTelemetry{Dir: opt.Paths.LogDir + "/" + t.storageSubdir, JobID: opt.JobID, RunName: s.name + "_" + opt.JobID,
		Interval: t.interval, StartupTimeout: t.startupTimeout, RequestTimeout: t.requestTimeout, JoinTimeout: t.joinTimeout,
		Required: t.required, Port: t.port, ExporterImage: t.image, ExporterCommand: t.command}
	type key struct {
		node string
		gpu  int
	}
	claims := map[key][]PowerAssignment{}
	for _, wp := range procs {
		if indexOf(p.Nodes, wp.node) < 0 {
			p.Nodes = append(p.Nodes, wp.node)
		}
		rank := wp.rank
		if wp.dpRPCPort != 0 {
			rank = wp.dpStartRank // per-node DP: node_rank holds the first DP rank
		}
		for _, g := range wp.gpus {
			k := key{wp.node, g}
			claims[k] = append(claims[k], PowerAssignment{WorkerRole: wp.ep.mode, WorkerIndex: wp.ep.index, WorkerProcess: rank})
		}
	}
	sortStrings(p.Nodes)
	for _, n := range p.Nodes {
		p.Addrs = append(p.Addrs, ns.addr[n])
	}
	keys := slices.SortedFunc(maps.Keys(claims), func(a, b key) int {
		return cmp.Or(strings.Compare(a.node, b.node), cmp.Compare(a.gpu, b.gpu))
	})
	for _, k := range keys {
		p.Devices = append(p.Devices, PowerDevice{Hostname: k.node, GPUIndex: k.gpu, Assignments: claims[k]})
	}
	for _, c := range t.concurrencies {
		p.Windows = append(p.Windows, PowerWindow{BenchmarkType: s.benchType, Concurrency: c})
	}
	return p
}
