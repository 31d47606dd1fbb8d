package srtlaunch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

// The expected values below follow srt-slurm v1.0.68 (c88ef731):
// cli/do_sweep.py start_mooncake_master, backends/vllm.py
// (get_mooncake_worker_env, build_mooncake_store_config,
// get_kv_events_config_for_mode, the direct-vLLM branch of
// build_worker_command), backends/sglang.py get_mooncake_worker_env,
// cli/mixins/benchmark_stage.py and cli/mixins/telemetry_stage.py; the
// two benchmark fields follow the versions named in features.go.

func parse(t *testing.T, y string) *config.Recipe {
	t.Helper()
	r, err := config.ParseRecipe("x.yaml", []byte(y), "")
	require.NoError(t, err)
	return r
}

func renderYAML(t *testing.T, y string) *Rendered {
	t.Helper()
	r := parse(t, y)
	fp, err := r.Footprint(0)
	require.NoError(t, err)
	out, err := Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths("M"), JobID: "7"})
	require.NoError(t, err)
	return out
}

func renderErr(t *testing.T, y string) error {
	t.Helper()
	r, err := config.ParseRecipe("x.yaml", []byte(y), "")
	if err != nil {
		return err
	}
	fp, err := r.Footprint(0)
	require.NoError(t, err)
	_, err = Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths("M"), JobID: "7"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "\n", "one-line errors")
	return err
}

func byOutput(t *testing.T, r *Rendered, name string) *Process {
	t.Helper()
	for _, p := range r.Processes {
		if strings.HasSuffix(p.Output, "/"+name) {
			return p
		}
	}
	t.Fatalf("no process %s in %v", name, outputs(r.Processes))
	return nil
}

const vllmMooncake = `name: mc
model: {path: /m/M, container: vllm-img}
resources: {gpu_type: gb300, gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}
frontend: {enable_multiple_frontends: false}
srun_options: {container-remap-root: ""}
backend:
  type: vllm
  connector: null
  mooncake_kv_store:
    container: mc-img
    master_extra_args: ["--max_threads=4"]
    env: {MC_TE_METRIC: "0", MOONCAKE_LOCAL_HOSTNAME: rdma0}
    store_config:
      metadata_server: P2PHANDSHAKE
      global_segment_size: 64GB
      protocol: rdma
      enable_offload: false
      port: 12345
  vllm_config:
    aggregated: {tensor-parallel-size: 8}
`

func TestMooncakeVLLM(t *testing.T) {
	r := renderYAML(t, vllmMooncake)
	assert.Equal(t, []string{"infra.out", "mooncake_master.out", "gb300-01_agg_w0.out", "gb300-02_agg_w0.out", "gb300-01_frontend_0.out"}, outputs(r.Processes),
		"the master starts after infra and before the workers")
	m := byOutput(t, r, "mooncake_master.out")
	assert.Equal(t, RoleMooncake, m.Role)
	assert.Equal(t, []string{"mooncake_master", "--port=8700", "--enable_http_metadata_server=true", "--http_metadata_server_port=8701",
		"--eviction_high_watermark_ratio=0.9", "--default_kv_lease_ttl=10000", "--rpc_thread_num=16", "--enable_metric_reporting=true",
		"--metrics_port=8702", "--max_threads=4"}, m.Command)
	assert.Equal(t, []string{"gb300-01"}, m.Nodelist, "on the infra node")
	assert.Equal(t, "mc-img", m.ContainerImage, "mooncake_kv_store.container")
	assert.Zero(t, m.Env.Len(), "the master gets no environment")
	assert.Zero(t, m.SrunOptions.Len(), "nor the recipe's srun options")
	assert.Equal(t, "bash -c 'mooncake_master --port=8700 --enable_http_metadata_server=true --http_metadata_server_port=8701 "+
		"--eviction_high_watermark_ratio=0.9 --default_kv_lease_ttl=10000 --rpc_thread_num=16 --enable_metric_reporting=true "+
		"--metrics_port=8702 --max_threads=4'", shJoin(m.Argv[len(m.Argv)-3:]), "bash-wrapped, no preamble")

	assert.Equal(t, `{
  "metadata_server": "P2PHANDSHAKE",
  "global_segment_size": "64GB",
  "protocol": "rdma",
  "enable_offload": false,
  "port": 12345,
  "master_server_address": "10.0.0.1:8700"
}`, r.Files["mooncake_store_config.json"], "json.dumps(indent=2): typed values, the master's address forced last")

	w1 := byOutput(t, r, "gb300-02_agg_w0.out")
	keys := w1.EnvKeys()
	assert.Equal(t, []string{"VLLM_PORT", "MOONCAKE_LOCAL_HOSTNAME", "MC_TE_METRIC", "MOONCAKE_MASTER", "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_CONFIG_PATH"},
		keys[len(keys)-6:], "after the process ports, in get_mooncake_worker_env's order")
	e := env(w1)
	assert.Equal(t, "rdma0", e["MOONCAKE_LOCAL_HOSTNAME"], "the recipe's env overrides the worker's own address")
	assert.Equal(t, "10.0.0.1:8700", e["MOONCAKE_MASTER"])
	assert.Equal(t, "http://10.0.0.1:8701/metadata", e["MOONCAKE_TE_META_DATA_SERVER"])
	assert.Equal(t, "/logs/mooncake_store_config.json", e["MOONCAKE_CONFIG_PATH"])
}

func TestMooncakeSGLang(t *testing.T) {
	r := renderYAML(t, `name: mc
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1, decode_nodes: 1, decode_workers: 1}
backend:
  type: sglang
  mooncake_kv_store: {env: {MOONCAKE_PROTOCOL: rdma}}
`)
	m := byOutput(t, r, "mooncake_master.out")
	assert.Equal(t, "{CONTAINER_IMAGE}", m.ContainerImage, "the job's image when no container is named")
	assert.NotContains(t, r.Files, "mooncake_store_config.json", "no store config for SGLang")
	d := env(byOutput(t, r, "gb200-02_decode_w0.out"))
	assert.Equal(t, "10.0.0.2", d["MOONCAKE_LOCAL_HOSTNAME"], "each worker's own address")
	assert.Equal(t, "rdma", d["MOONCAKE_PROTOCOL"])
	assert.Equal(t, "10.0.0.1:8700", d["MOONCAKE_MASTER"])
	assert.NotContains(t, d, "MOONCAKE_CONFIG_PATH")

	base := "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpus_per_node: 4, agg_nodes: 1}\n"
	assert.ErrorContains(t, renderErr(t, base+"backend: {type: trtllm, mooncake_kv_store: {env: {}}}\n"), "backend.mooncake_kv_store: unknown field (srt-slurm rejects it) for engine trtllm")
	assert.ErrorContains(t, renderErr(t, base+"backend: {type: sglang, mooncake_kv_store: {store_config: {a: 1}}}\n"),
		"backend.mooncake_kv_store.store_config: unknown field")
}

func TestVLLMKVEvents(t *testing.T) {
	disagg := func(kv string) *Rendered {
		return renderYAML(t, `name: kv
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1, decode_nodes: 1, decode_workers: 1}
frontend: {enable_multiple_frontends: false}
backend:
  type: vllm
  kv_events_config: `+kv+`
  vllm_config: {prefill: {max-num-seqs: 8}, decode: {max-num-seqs: 8}}
`)
	}
	kvArg := func(p *Process) string {
		for i, a := range p.Command {
			if a == "--kv-events-config" {
				assert.Equal(t, "--dump-config-to", p.Command[i-2], "after the config dump, before the recipe's flags")
				return p.Command[i+1]
			}
		}
		return ""
	}
	r := disagg("true")
	assert.Equal(t, `{"publisher": "zmq", "topic": "kv-events", "enable_kv_cache_events": true, "endpoint": "tcp://*:5200"}`,
		kvArg(byOutput(t, r, "gb200-01_prefill_w0.out")))
	assert.Equal(t, `{"publisher": "zmq", "topic": "kv-events", "enable_kv_cache_events": true, "endpoint": "tcp://*:5201"}`,
		kvArg(byOutput(t, r, "gb200-02_decode_w0.out")), "one port per process from 5200")

	r = disagg("{decode: {topic: dec, buffer_steps: 4}}")
	assert.Empty(t, kvArg(byOutput(t, r, "gb200-01_prefill_w0.out")), "a mode the mapping does not list publishes nothing")
	assert.Equal(t, `{"publisher": "zmq", "topic": "dec", "enable_kv_cache_events": true, "buffer_steps": 4, "endpoint": "tcp://*:5201"}`,
		kvArg(byOutput(t, r, "gb200-02_decode_w0.out")), "the mode's mapping overrides with typed values")

	agg := renderYAML(t, `name: kv
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 1}
backend: {type: vllm, kv_events_config: true}
`)
	assert.Empty(t, kvArg(byOutput(t, agg, "gb200-01_agg_w0.out")), "true covers prefill and decode, not agg")
}

const directVLLM = `name: dv
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}
frontend: {type: vllm, enable_multiple_frontends: false}
backend:
  type: vllm
  vllm_config:
    aggregated: {tensor-parallel-size: 8, host: 1.2.3.4, api-server-count: 2, connector: nixl}
benchmark: {type: custom, command: run.sh}
`

func TestDirectVLLMFrontend(t *testing.T) {
	r := renderYAML(t, directVLLM)
	assert.Equal(t, []string{"gb200-01_agg_w0.out", "gb200-02_agg_w0.out", "benchmark.out"}, outputs(r.Processes),
		"no etcd/NATS and no frontend process: vllm serve binds the public port")
	assert.Equal(t, []string{"vllm", "serve", "/model", "--host", "0.0.0.0", "--port", "8000", "--master-addr", "10.0.0.1", "--nnodes", "2",
		"--node-rank", "0", "--device-ids", "0,1,2,3", "--api-server-count", "2", "--served-model-name", "M", "--tensor-parallel-size", "8"},
		r.Processes[0].Command, "the recipe's host and connector dropped, the served name defaulted")
	assert.Equal(t, []string{"vllm", "serve", "/model", "--master-addr", "10.0.0.1", "--nnodes", "2", "--node-rank", "1", "--headless",
		"--device-ids", "0,1,2,3", "--served-model-name", "M", "--tensor-parallel-size", "8"},
		r.Processes[1].Command, "headless ranks drop API-server flags")
	b := env(r.Processes[2])
	assert.Equal(t, "10.0.0.1:8000", b["SRT_AGG_ENDPOINTS"], "metrics on the public port")
	assert.Equal(t, "vllm", b["SRTCTL_FRONTEND_TYPE"])
	assert.Equal(t, "http://10.0.0.1:8000/metrics", b["AIPERF_SERVER_METRICS_URLS"])
	assert.Equal(t, "gb200-01", r.PublicNode)

	base := "name: x\nmodel: {path: /m/M, container: img}\n"
	assert.ErrorContains(t, renderErr(t, base+"resources: {gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}\nfrontend: {type: vllm}\nbackend: {type: vllm}\n"),
		"set frontend.enable_multiple_frontends: false")
	assert.ErrorContains(t, renderErr(t, base+"resources: {gpus_per_node: 4, agg_nodes: 2, agg_workers: 2}\nfrontend: {type: vllm, enable_multiple_frontends: false}\nbackend: {type: vllm}\n"),
		"exactly one aggregate worker, got 2")
	assert.ErrorContains(t, renderErr(t, base+"resources: {gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1, decode_nodes: 1, decode_workers: 1}\nfrontend: {type: vllm, enable_multiple_frontends: false}\nbackend: {type: vllm}\n"),
		"aggregate vLLM jobs only")
}

func TestCustomBenchEndpointsPerFrontend(t *testing.T) {
	router := renderYAML(t, `name: rt
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4, agg_nodes: 1, agg_workers: 2}
frontend: {type: sglang, enable_multiple_frontends: false}
backend: {type: sglang, aggregated_environment: {DYN_KVBM_METRICS_PORT: "6880"}}
benchmark: {type: custom, command: run.sh}
`)
	b := env(byOutput(t, router, "benchmark.out"))
	assert.Equal(t, "10.0.0.1,10.0.0.1", b["SRT_AGG_IPS"], "one IP per logical worker, repeated when co-located")
	assert.Equal(t, "10.0.0.1:6100,10.0.0.1:6132", b["SRT_AGG_ENDPOINTS"], "the SGLang router's workers answer on their HTTP ports")
	assert.Equal(t, "http://10.0.0.1:6100/metrics,http://10.0.0.1:6132/metrics,http://10.0.0.1:6880/metrics", b["AIPERF_SERVER_METRICS_URLS"],
		"logical workers in topology order, then KVBM's port, deduplicated")

	optOut := renderYAML(t, `name: rt
model: {path: /m/M, container: img}
resources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 1}
backend: {type: sglang}
benchmark: {type: custom, command: run.sh, aiperf_server_metrics: false}
`)
	assert.NotContains(t, env(byOutput(t, optOut, "benchmark.out")), "AIPERF_SERVER_METRICS_URLS")
	assert.Equal(t, "10.0.0.1:7500", env(byOutput(t, optOut, "benchmark.out"))["SRT_AGG_ENDPOINTS"], "dynamo: the system port")
	assert.ErrorContains(t, renderErr(t, "name: x\nmodel: {path: /m/M, container: img}\nresources: {gpus_per_node: 4, agg_nodes: 1}\nbackend: {type: sglang}\n"+
		"benchmark: {type: sa-bench, isl: 1, osl: 1, concurrencies: [1], aiperf_server_metrics: true}\n"), "x.yaml:5: benchmark.aiperf_server_metrics: applies to benchmark.type custom")
}

func TestTokenizerMode(t *testing.T) {
	base := "name: tm\nmodel: {path: /m/M, container: img}\nresources: {gpu_type: gb300, gpus_per_node: 4, agg_nodes: 1}\nbackend: {type: sglang}\n"
	plain := byOutput(t, renderYAML(t, base+"benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: \"2\"}\n"), "benchmark.out").Command
	with := byOutput(t, renderYAML(t, base+"benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: \"2\", tokenizer_mode: deepseek_v4}\n"), "benchmark.out").Command
	require.Len(t, plain, 2+19, "v1.0.68's 19 positional arguments")
	assert.Equal(t, append(append([]string(nil), plain...), "deepseek_v4"), with, "the mode follows them as the next positional argument")
	assert.ErrorContains(t, renderErr(t, base+"benchmark: {type: custom, command: x, tokenizer_mode: auto}\n"), "benchmark.tokenizer_mode: is an SA-Bench option")
}

const telemetryRecipe = `name: pw
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 2, gpus_per_prefill: 2, decode_nodes: 1, decode_workers: 1}
frontend: {enable_multiple_frontends: false}
srun_options: {container-remap-root: ""}
backend: {type: sglang}
benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: "1x4"}
telemetry:
  enabled: true
  provider: dcgm-power
  default_frequency: 1.0
  storage_subdir: power
  required: true
  startup_timeout_seconds: 120
  request_timeout_seconds: 2
  collector_join_timeout_seconds: 10
  dcgm_exporter: {container_image: dcgm-exporter, port: 19401}
`

func TestTelemetry(t *testing.T) {
	r := renderYAML(t, telemetryRecipe)
	assert.Equal(t, []string{"infra.out", "gb300-01_prefill_w0.out", "gb300-01_prefill_w1.out", "gb300-02_decode_w0.out",
		"gb300-01_frontend_0.out", "telemetry_dcgm_exporter.out", "benchmark.out"}, outputs(r.Processes), "the exporters start after the frontends")
	ex := byOutput(t, r, "telemetry_dcgm_exporter.out")
	assert.Equal(t, RoleTelemetry, ex.Role)
	assert.Equal(t, []string{"srun", "--jobid", "7", "--overlap", "--nodes", "2", "--ntasks", "2", "--nodelist", "gb300-01,gb300-02",
		"--output", "{LOG_DIR}/telemetry_dcgm_exporter.out", "--container-image", "dcgm-exporter", "--no-container-entrypoint",
		"--no-container-mount-home", "--container-mounts", "{LOG_DIR}:/logs,{MODEL_DIR:M}:/model,{SRT_ROOT}/configs:/configs," +
			"{SRT_ROOT}/src/srtctl/runtime_scripts:/srtctl-runtime,{SRT_ROOT}/src/srtctl/benchmarks/scripts:/srtctl-benchmarks,{INFMAX_WORKSPACE}:/infmax-workspace",
		"--container-remap-root", "dcgm-exporter", "--collect-interval=100", "--address", ":19401"}, ex.Argv,
		"one srun, one task per worker node, the recipe's srun options, no bash wrapper (the image is distroless)")
	assert.Equal(t, "/logs/power/windows", env(byOutput(t, r, "benchmark.out"))["SRT_MEASUREMENT_WINDOW_DIR"])

	p := r.Power
	require.NotNil(t, p)
	assert.Equal(t, "{LOG_DIR}/power", p.Dir)
	assert.Equal(t, "pw_7", p.RunName)
	assert.Equal(t, []string{"gb300-01", "gb300-02"}, p.Nodes)
	assert.Equal(t, []string{"10.0.0.1", "10.0.0.2"}, p.Addrs)
	assert.Equal(t, "dcgm-exporter --collect-interval=100 --address :19401", p.ExporterCommand)
	assert.Equal(t, []PowerWindow{{"sa-bench", 1}, {"sa-bench", 4}}, p.Windows)
	require.Len(t, p.Devices, 8)
	assert.Equal(t, PowerDevice{Hostname: "gb300-01", GPUIndex: 2, Assignments: []PowerAssignment{{WorkerRole: "prefill", WorkerIndex: 1}}}, p.Devices[2],
		"two half-node prefill workers share the first node")
	assert.Equal(t, PowerDevice{Hostname: "gb300-02", GPUIndex: 3, Assignments: []PowerAssignment{{WorkerRole: "decode"}}}, p.Devices[7])
	assert.Equal(t, []float64{1, 120, 2, 10}, []float64{p.Interval, p.StartupTimeout, p.RequestTimeout, p.JoinTimeout})
	assert.True(t, p.Required)

	off := strings.Replace(telemetryRecipe, "enabled: true", "enabled: false", 1)
	assert.Nil(t, renderYAML(t, off).Power)
	for _, tc := range []struct{ from, to, want string }{
		{"provider: dcgm-power", "provider: scraper", `x.yaml:10: telemetry.provider: "scraper" is not launched by sweepflow yet (dcgm-power)`},
		{"port: 19401", "port: 0", "x.yaml:17: telemetry.dcgm_exporter.port: must be in 1..65535"},
		{"collector_join_timeout_seconds: 10", "collector_join_timeout_seconds: 10\n  sample_rate: 3", "telemetry.sample_rate: unknown field"},
		{"collector_join_timeout_seconds: 10", "collector_join_timeout_seconds: 2", "greater than telemetry.request_timeout_seconds"},
		{"default_frequency: 1.0", "default_frequency: 5", "exceeds the 3s max sample gap"},
		{"storage_subdir: power", "storage_subdir: ../up", "x.yaml:12: telemetry.storage_subdir: must be a safe relative path"},
		{`concurrencies: "1x4"`, `concurrencies: "4x4"`, "x.yaml:7: benchmark.concurrencies: telemetry requires a non-empty list of unique positive concurrencies"},
		{"benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: \"1x4\"}", "benchmark: {type: custom, command: x}", "x.yaml:8: telemetry: requires benchmark.type: sa-bench"},
	} {
		assert.ErrorContains(t, renderErr(t, strings.Replace(telemetryRecipe, tc.from, tc.to, 1)), tc.want)
	}
}

func TestWorkersSmallerThanANode(t *testing.T) {
	// gpus_per_node 2 on a 4-GPU GB300 node: srt-slurm's topology packs by
	// the recipe's count, so two one-GPU workers share GPUs 0 and 1 and
	// each gets CUDA_VISIBLE_DEVICES; a two-GPU worker fills the recipe's
	// node and gets none.
	r := renderYAML(t, `name: half
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 2, agg_nodes: 1, agg_workers: 2}
backend: {type: sglang}
`)
	assert.Equal(t, "0", env(byOutput(t, r, "gb300-01_agg_w0.out"))["CUDA_VISIBLE_DEVICES"])
	assert.Equal(t, "1", env(byOutput(t, r, "gb300-01_agg_w1.out"))["CUDA_VISIBLE_DEVICES"])
	one := renderYAML(t, "name: half\nmodel: {path: /m/M, container: img}\nresources: {gpu_type: gb300, gpus_per_node: 2, agg_nodes: 1, agg_workers: 1}\nbackend: {type: sglang}\n")
	assert.NotContains(t, env(byOutput(t, one, "gb300-01_agg_w0.out")), "CUDA_VISIBLE_DEVICES")
}

// TestPlacements: srt-slurm's frontend.orchestrator_placement first_decode
// and benchmark.client_placement last_decode (topology.placed_node) put the
// single frontend on the first decode leader's node and the benchmark on the
// last one's; the benchmark targets the frontend there. Schema 2 spells them
// placement.node.
func TestPlacements(t *testing.T) {
	const v1 = `name: pl
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1, decode_nodes: 2, decode_workers: 2}
frontend: {enable_multiple_frontends: false, orchestrator_placement: first_decode}
backend: {type: sglang}
benchmark: {type: custom, command: run.sh, client_placement: last_decode}
`
	const v2 = `schema: 2
name: pl
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4}
engine: sglang
roles:
  prefill: {nodes: 1, workers: 1}
  decode: {nodes: 2, workers: 2}
frontend: {enable_multiple_frontends: false, placement: {node: first_decode}}
benchmark: {type: custom, command: run.sh, placement: {node: last_decode}}
`
	for _, src := range []string{v1, v2} {
		r := renderYAML(t, src)
		assert.Equal(t, []string{"infra.out", "gb300-01_prefill_w0.out", "gb300-02_decode_w0.out", "gb300-03_decode_w1.out",
			"gb300-02_frontend_0.out", "benchmark.out"}, outputs(r.Processes))
		assert.Equal(t, []string{"gb300-01"}, byOutput(t, r, "infra.out").Nodelist, "etcd/NATS stay on the head")
		assert.Equal(t, []string{"gb300-03"}, byOutput(t, r, "benchmark.out").Nodelist)
		assert.Equal(t, "10.0.0.2", env(byOutput(t, r, "benchmark.out"))["SRT_FRONTEND_HOST"])
		assert.Equal(t, "gb300-02", r.PublicNode)
	}
	assert.ErrorContains(t, renderErr(t, strings.Replace(v1, "prefill_nodes: 1, prefill_workers: 1, decode_nodes: 2, decode_workers: 2", "agg_nodes: 1", 1)),
		"placement first_decode but the recipe has no decode workers")
}

// TestDedicatedRolesShareANode: with the benchmark colocated with the
// frontend (srt-slurm's default) the dedicated frontend and client share
// one reserved node, the allocation's last (submit.py asks for one extra
// node, runtime.Nodes.from_slurm carves it); apart, each takes its own.
func TestDedicatedRolesShareANode(t *testing.T) {
	base := "name: d\nmodel: {path: /m/M, container: img}\nresources: {gpu_type: gb200, gpus_per_node: 4, agg_nodes: 2, agg_workers: 1}\n" +
		"backend: {type: sglang}\nfrontend: {dedicated_node: true, enable_multiple_frontends: false}\n"
	r := renderYAML(t, base+"benchmark: {type: custom, command: run.sh, client_dedicated_node: true}\n")
	assert.Equal(t, []string{"gb200-03"}, byOutput(t, r, "infra.out").Nodelist)
	assert.Equal(t, []string{"gb200-03"}, byOutput(t, r, "gb200-03_frontend_0.out").Nodelist)
	assert.Equal(t, []string{"gb200-03"}, byOutput(t, r, "benchmark.out").Nodelist)
	assert.Equal(t, []string{"gb200-01"}, byOutput(t, r, "gb200-01_agg_w0.out").Nodelist)

	r = renderYAML(t, base+"benchmark: {type: custom, command: run.sh, client_dedicated_node: true, colocate_with_frontend: false}\n")
	assert.Equal(t, []string{"gb200-01"}, byOutput(t, r, "gb200-01_frontend_0.out").Nodelist)
	assert.Equal(t, []string{"gb200-04"}, byOutput(t, r, "benchmark.out").Nodelist)
	assert.Equal(t, []string{"gb200-02"}, byOutput(t, r, "gb200-02_agg_w0.out").Nodelist)
}
