package srtlaunch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
)

// The recipe features InferenceX's GB200/GB300 recipes use beyond
// srt-slurm's own GB200 recipes: the Mooncake KV store (a mooncake-master
// service, schema 1's backend.mooncake_kv_store) and DCGM power telemetry
// (config.Telemetry). config decodes and checks them as srt-slurm's schema
// does; this file renders them.

// mooncakeFile is what srt-slurm writes for vLLM's MooncakeStoreConnector.
const mooncakeFile = "mooncake_store_config.json"

// Ports of the Mooncake master (srtctl/ports.py).
const (
	mooncakeMasterPort   = 8700
	mooncakeMetadataPort = 8701
	mooncakeMetricsPort  = 8702
)

// mooncakeMasterCommand is do_sweep._build_mooncake_master_command: the
// master with its embedded HTTP metadata server and metrics, then the
// recipe's extra arguments.
func mooncakeMasterCommand(m *config.MooncakeMaster) []string {
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
	for _, a := range m.Args {
		cmd = append(cmd, pyStr(a))
	}
	return cmd
}

// mooncakeWorkerEnv adds get_mooncake_worker_env: the worker's own address
// (schema 1's mooncake env may override it), that env, then the master's
// addresses srt-slurm stamps (and, for vLLM, the store config's path).
func (s *spec) mooncakeWorkerEnv(e *config.Map, infraAddr, localAddr string) {
	m := s.Services.Mooncake
	if m == nil {
		return
	}
	e.Set("MOONCAKE_LOCAL_HOSTNAME", localAddr)
	for _, k := range keysOf(m.Env) {
		e.Set(k, pyStr(m.Env.Vals[k]))
	}
	e.Set("MOONCAKE_MASTER", fmt.Sprintf("%s:%d", infraAddr, mooncakeMasterPort))
	e.Set("MOONCAKE_TE_META_DATA_SERVER", fmt.Sprintf("http://%s:%d/metadata", infraAddr, mooncakeMetadataPort))
	if s.Engine.Type == "vllm" {
		e.Set("MOONCAKE_CONFIG_PATH", "/logs/"+mooncakeFile)
	}
}

// mooncakeStoreConfig is build_mooncake_store_config as json.dumps(indent=2)
// writes it: the recipe's store_config with master_server_address forced
// to the infra node.
func (s *spec) mooncakeStoreConfig(infraAddr string) string {
	out := config.NewMap()
	if sc := s.Services.Mooncake.StoreConfig; sc != nil {
		out = sc.Clone()
	}
	out.Set("master_server_address", fmt.Sprintf("%s:%d", infraAddr, mooncakeMasterPort))
	return pyJSONDump(out, 2)
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
func powerTelemetry(t *config.Telemetry, s *spec, procs []*workerProc, ns *nodes, opt Options) *PowerTelemetry {
	p := &PowerTelemetry{Dir: opt.Paths.LogDir + "/" + t.StorageSubdir, JobID: opt.JobID, RunName: s.Name + "_" + opt.JobID,
		Interval: t.Interval, StartupTimeout: t.StartupTimeout, RequestTimeout: t.RequestTimeout, JoinTimeout: t.JoinTimeout,
		Required: t.Required, Port: t.ExporterPort, ExporterImage: t.ExporterImage, ExporterCommand: t.ExporterCommand}
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
	for _, c := range s.Benchmark.SABench.ConcurrencyList {
		p.Windows = append(p.Windows, PowerWindow{BenchmarkType: s.Benchmark.Type, Concurrency: c})
	}
	return p
}
