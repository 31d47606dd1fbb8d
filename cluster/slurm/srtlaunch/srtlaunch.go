// Package srtlaunch is sweepflow's own launcher for srt-slurm recipes. Given a
// recipe and a Slurm allocation it produces the processes, in launch order,
// that srt-slurm's orchestrator (do_sweep.py, tag v1.0.68) would srun, and
// the files it writes into the log directory first: the nats/etcd infra,
// the SGLang, TensorRT-LLM (trtllm.go) or vLLM (vllm.go) workers, nginx and
// the dynamo frontends or SGLang routers, and the recipe's benchmark (a
// custom command, or srt-slurm's own sa-bench / mooncake-router runners, see
// bench.go). It launches nothing itself; a feature it does not render is
// refused by name.
package srtlaunch

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
)

// Ports srt-slurm assigns (srtctl/ports.py).
const (
	dynSystemPortBase  = 7500  // DYN_SYSTEM_PORT, one per worker process
	sglangHTTPPortBase = 6100  // leader --port, per node
	sglangHTTPStride   = 32    // next leader on the same node
	bootstrapPortBase  = 7200  // prefill --disaggregation-bootstrap-port, per leader node
	ncclPortBase       = 17500 // --nccl-port = base + (sys port - 7500)
	distInitPort       = 8300  // --dist-init-addr port on the endpoint leader
	kvEventsPortBase   = 5200  // --kv-events-config endpoint, global
	frontendPublicPort = 8000  // single frontend, or nginx
	frontendInternal   = 8180  // frontends behind nginx
	etcdPort           = 2379
	natsPort           = 4222
)

// Allocation is the nodes a deployment runs on, in Slurm order.
type Allocation struct {
	Nodes []string
	// Addrs[i] is Nodes[i]'s address; empty means use the node name.
	Addrs []string
}

// Paths are the host paths and image a render refers to.
type Paths struct {
	LogDir          string // host log directory, mounted at /logs
	ModelDir        string // host checkpoint directory, mounted at /model
	ModelName       string // the checkpoint directory's base name (default served model name)
	Image           string // engine container image
	SrtRoot         string // srt-slurm checkout (configs, runtime and benchmark scripts)
	InfmaxWorkspace string // InferenceX checkout, mounted at /infmax-workspace; "" to omit
}

// Options choose what to render.
type Options struct {
	// SyntheticAL > 0 renders a throughput (perf) run: InferenceX's golden-AL
	// rewrite of the recipe. 0 renders the recipe as it is (eval).
	SyntheticAL float64
	Paths       Paths
	JobID       string // srun --jobid; "" omits it (as outside a job)
}

// PlaceholderPaths are the reference renders' placeholders.
func PlaceholderPaths(modelName string) Paths {
	return Paths{
		LogDir: "{LOG_DIR}", ModelDir: "{MODEL_DIR:" + modelName + "}", ModelName: modelName,
		Image: "{CONTAINER_IMAGE}", SrtRoot: "{SRT_ROOT}", InfmaxWorkspace: "{INFMAX_WORKSPACE}",
	}
}

// PlaceholderAllocation is the n nodes the reference renders use for
// recipe r: node N = <platform>-NN at 10.0.0.N, the platform being the
// recipe's resources.gpu_type (gb200 when it names none).
func PlaceholderAllocation(r *config.Recipe, n int) Allocation {
	platform := strings.ToLower(r.Resources.GPUType)
	if platform == "" {
		platform = "gb200"
	}
	a := Allocation{}
	for i := 1; i <= n; i++ {
		a.Nodes = append(a.Nodes, fmt.Sprintf("%s-%02d", platform, i))
		a.Addrs = append(a.Addrs, fmt.Sprintf("10.0.0.%d", i))
	}
	return a
}

// Role names a process's part in the deployment.
type Role string

// Roles, in launch order.
const (
	RoleInfra     Role = "infra"
	RoleMooncake  Role = "mooncake-master" // backend.mooncake_kv_store's master, on the infra node
	RolePrefill   Role = "prefill"
	RoleDecode    Role = "decode"
	RoleAgg       Role = "agg"
	RoleNginx     Role = "nginx"
	RoleFrontend  Role = "frontend"
	RoleTelemetry Role = "telemetry" // the DCGM exporter on every worker node (telemetry dcgm-power)
	RoleBenchmark Role = "benchmark"
)

// Process is one srun. The JSON field names and order are those of the
// srt-slurm reference renders.
type Process struct {
	Argv            []string    `json:"argv"`
	Command         []string    `json:"command"`
	Env             *config.Map `json:"env_to_set"`
	BashPreamble    *string     `json:"bash_preamble"`
	Nodelist        []string    `json:"nodelist"`
	Output          string      `json:"output"`
	ContainerImage  string      `json:"container_image"`
	ContainerMounts *config.Map `json:"container_mounts"`
	SrunOptions     *config.Map `json:"srun_options"`
	SrunExportEnv   *config.Map `json:"srun_export_env"`
	MPI             *string     `json:"mpi"`

	Role  Role `json:"-"`
	Index int  `json:"-"` // worker or frontend index
	// wrap: the command runs inside `bash -c "exports && preamble && cmd"`.
	wrap bool
	// MPI launches (TensorRT-LLM): one task per GPU over all the worker's
	// nodes, --oversubscribe and --cpu-bind.
	ntasks        int
	oversubscribe bool
	cpuBind       string
	// unset: variables cleared after the exports (vLLM's VLLM_PORT on
	// multi-node workers).
	unset []string
}

// EnvKeys returns env_to_set's names in order.
func (p *Process) EnvKeys() []string { return append([]string(nil), keysOf(p.Env)...) }

// EnvValue returns one env_to_set value.
func (p *Process) EnvValue(k string) (string, bool) { return p.Env.Str(k), p.Env.Has(k) }

// Tasks is how srun starts the process: ntasks (one per GPU for an MPI
// launch, else 1), --oversubscribe, and the --cpu-bind value ("": none).
func (p *Process) Tasks() (ntasks int, oversubscribe bool, cpuBind string) {
	return max(p.ntasks, 1), p.oversubscribe, p.cpuBind
}

// CommandLine is the command as a shell would read it.
func (p *Process) CommandLine() string { return shJoin(p.Command) }

// Payload is the `bash -c` script with the given preamble in place of ours
// (the reference test swaps in srt-slurm's, whose text is not ours to copy).
func (p *Process) Payload(preamble *string) string {
	if !p.wrap {
		return shJoin(p.Command)
	}
	var parts []string
	for _, k := range p.Env.Keys {
		parts = append(parts, "export "+k+"="+shQuote(p.Env.Str(k)))
	}
	for _, k := range p.unset {
		parts = append(parts, "unset -- "+shQuote(k))
	}
	if preamble != nil {
		parts = append(parts, *preamble)
	}
	parts = append(parts, shJoin(p.Command))
	return strings.Join(parts, " && ")
}

// node placement as srt-slurm's Nodes.from_slurm carves it.
type nodes struct {
	head, bench, infra string
	worker             []string
	addr               map[string]string
}

type endpoint struct {
	mode  string
	index int
	nodes []string
	gpus  []int
}

type workerProc struct {
	ep                             *endpoint
	node                           string
	rank                           int
	gpus                           []int
	sysPort, httpPort, kvEventPort int
	bootstrapPort                  int // 0: none
	// vLLM: NIXL side-channel port, data-parallel RPC port and the first
	// DP rank this process runs (0 when not data-parallel).
	nixlPort, dpRPCPort, dpStartRank int
}

// Render turns a parsed recipe and an allocation into the process set and
// the files to write into the log directory first.
func Render(r *config.Recipe, alloc Allocation, opt Options) (*Rendered, error) {
	s, err := parseSpec(r)
	if err != nil {
		return nil, err
	}
	if opt.SyntheticAL != 0 {
		if opt.SyntheticAL < 0 || math.IsNaN(opt.SyntheticAL) || math.IsInf(opt.SyntheticAL, 0) {
			return nil, fmt.Errorf("synthetic acceptance length must be a positive number, got %v", opt.SyntheticAL)
		}
		if err := s.injectSyntheticAcceptance(opt.SyntheticAL); err != nil {
			return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
		}
	}
	if opt.Paths.LogDir == "" || opt.Paths.Image == "" || opt.Paths.SrtRoot == "" {
		return nil, fmt.Errorf("render needs a log directory, a container image and the srt-slurm root")
	}
	hf := strings.HasPrefix(s.Model.Path, "hf:")
	if !hf && opt.Paths.ModelDir == "" {
		return nil, fmt.Errorf("recipe %s: model %q needs a model directory", r.Display, s.Model.Path)
	}
	if len(alloc.Addrs) != 0 && len(alloc.Addrs) != len(alloc.Nodes) {
		return nil, fmt.Errorf("allocation has %d nodes but %d addresses", len(alloc.Nodes), len(alloc.Addrs))
	}
	if len(alloc.Nodes) < s.nodesNeeded {
		return nil, fmt.Errorf("recipe %s needs %d nodes, the allocation has %d", s.Name, s.nodesNeeded, len(alloc.Nodes))
	}
	// srt-slurm's sbatch asks for exactly the recipe's nodes; extra ones in a
	// larger allocation stay idle rather than gaining frontends.
	ns, err := carve(s, alloc, s.nodesNeeded)
	if err != nil {
		return nil, err
	}
	eps, err := allocateEndpoints(s, ns.worker)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %v", s.Name, err)
	}
	procs := toProcesses(eps)
	if s.Engine.Type == "vllm" {
		if procs, err = vllmToProcesses(s, eps); err != nil {
			return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
		}
	}

	modelName := opt.Paths.ModelName
	modelArg := "/model"
	tokenizer := "/model" // what srt-slurm's benchmark runners pass as the tokenizer
	if hf {
		modelName = path.Base(strings.TrimPrefix(s.Model.Path, "hf:"))
		modelArg = strings.TrimPrefix(s.Model.Path, "hf:")
		tokenizer = modelArg
	}
	mounts := runtimeMounts(s, opt.Paths, hf)
	env := s.wheelEnv()
	for _, k := range keysOf(s.Environment) {
		env.Set(k, pyStr(s.Environment.Vals[k]))
	}
	image := opt.Paths.Image
	preamble := ourPreamble(s)
	var out []*Process
	add := func(p *Process) { out = append(out, p) }
	files := map[string]string{}

	// Infra: nats and etcd via srt-slurm's setup_head.py; a direct vLLM
	// frontend has no dynamo request plane and skips it.
	if s.frontendType != "vllm" {
		infraCmd := []string{"python3", "/tmp/setup_head.py", "--name", s.Name, "--log-dir", opt.Paths.LogDir}
		if mb := s.Services.NATSMaxPayloadMB; mb != 0 {
			infraCmd = append(infraCmd, "--nats-max-payload-mb", strconv.Itoa(mb))
		}
		infraMounts := cloneMap(mounts)
		infraMounts.Set(opt.Paths.SrtRoot+"/src/srtctl/cli/setup_head.py", "/tmp/setup_head.py")
		infraMounts.Set("/tmp", "/host-tmp") // etcd WAL on local disk
		add(&Process{Role: RoleInfra, Command: infraCmd, Env: config.NewMap(), Nodelist: []string{ns.infra},
			Output: opt.Paths.LogDir + "/infra.out", ContainerImage: image, ContainerMounts: infraMounts,
			SrunOptions: config.NewMap(), SrunExportEnv: config.NewMap(), wrap: true})
	}
	// The Mooncake master on the infra node (do_sweep.start_mooncake_master):
	// the job's mounts, neither the recipe's srun options nor an environment;
	// vLLM workers read the store config srt-slurm writes first.
	if mc := s.Services.Mooncake; mc != nil {
		img := image
		if mc.Container != "" {
			img = mc.Container
		}
		if s.Engine.Type == "vllm" {
			files[mooncakeFile] = s.mooncakeStoreConfig(ns.addr[ns.infra])
		}
		add(&Process{Role: RoleMooncake, Command: mooncakeMasterCommand(mc), Env: config.NewMap(), Nodelist: []string{ns.infra},
			Output: opt.Paths.LogDir + "/mooncake_master.out", ContainerImage: img, ContainerMounts: cloneMap(mounts),
			SrunOptions: config.NewMap(), SrunExportEnv: config.NewMap(), wrap: true})
	}

	served := modelName
	for _, m := range []string{"prefill", "agg", "decode"} {
		if s.Engine.Type == "trtllm" {
			break // TRTLLMProtocol.get_served_model_name keeps the default
		}
		cfg := s.modeConfig[m]
		for _, k := range []string{"served-model-name", "served_model_name"} {
			if v := cfg.Vals[k]; v != nil && pyStr(v) != "" {
				served = pyStr(v)
				break
			}
		}
		if served != modelName {
			break
		}
	}
	exportEnv := config.NewMap()
	if s.installsDynamo() {
		exportEnv.Set("ENROOT_REMAP_ROOT", "yes") // the install needs root in the container
	}

	if s.Engine.Type == "trtllm" {
		for _, m := range []string{"prefill", "decode", "agg"} {
			for _, ep := range eps {
				if ep.mode == m {
					files[trtllmConfigFile(m)] = pyYAMLDump(s.modeConfig[m])
					break
				}
			}
		}
	}
	for i, wp := range procs {
		mode := wp.ep.mode
		if s.Engine.Type == "trtllm" {
			if wp.rank != 0 {
				continue // the leader's srun spans the worker's nodes
			}
			add(trtllmWorker(s, wp, procs[i:], ns, opt, modelArg, modelName, env, mounts, preamble, exportEnv))
			continue
		}
		var cmd []string
		if s.Engine.Type == "vllm" {
			if cmd, err = vllmCommand(s, wp, procs, ns, modelArg, served, opt.Paths.LogDir); err != nil {
				return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
			}
		} else {
			cmd = workerCommand(s, wp, ns, modelArg, served, opt.Paths.LogDir)
		}
		e := config.NewMap()
		e.Set("HEAD_NODE_IP", ns.addr[ns.head])
		e.Set("ETCD_ENDPOINTS", fmt.Sprintf("http://%s:%d", ns.infra, etcdPort))
		e.Set("NATS_SERVER", fmt.Sprintf("nats://%s:%d", ns.infra, natsPort))
		e.Set("DYN_SYSTEM_PORT", strconv.Itoa(wp.sysPort))
		e.Set("DYN_REQUEST_PLANE", s.Dynamo.RequestPlane)
		e.Set("DYN_SKIP_SGLANG_LOG_FORMATTING", "1")
		if s.Dynamo.EventPlane != "" {
			e.Set("DYN_EVENT_PLANE", s.Dynamo.EventPlane)
		}
		e.Set("DYN_LOG", "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn")
		vars := map[string]string{"node": wp.node, "node_id": strconv.Itoa(indexOf(ns.worker, wp.node))}
		if me := s.modeEnv[mode]; me != nil {
			for _, k := range me.Keys {
				e.Set(k, pyFormatMap(pyStr(me.Vals[k]), vars))
			}
		}
		for _, k := range env.Keys {
			e.Set(k, pyFormatMap(env.Str(k), vars))
		}
		// vLLM passes --device-ids instead unless set_cuda_visible_devices.
		if len(wp.gpus) < s.gpusPerNode && (s.Engine.Type != "vllm" || s.Engine.SetCUDAVisibleDevices) {
			e.Set("CUDA_VISIBLE_DEVICES", joinInts(wp.gpus))
		}
		var unset []string
		if s.Engine.Type == "vllm" {
			vllmProcessEnv(e, wp, ns)
			if len(wp.ep.nodes) > 1 {
				unset = []string{"VLLM_PORT"} // concurrent ranks would race on one base port
			}
		}
		s.mooncakeWorkerEnv(e, ns.addr[ns.infra], ns.addr[wp.node])
		add(&Process{Role: Role(mode), Index: wp.ep.index, Command: cmd, Env: e, BashPreamble: preamble,
			Nodelist: []string{wp.node}, Output: fmt.Sprintf("%s/%s_%s_w%d.out", opt.Paths.LogDir, wp.node, mode, wp.ep.index),
			ContainerImage: image, ContainerMounts: cloneMap(mounts), SrunOptions: strMap(s.SrunOptions),
			SrunExportEnv: cloneMap(exportEnv), wrap: true, unset: unset})
	}

	// Frontends: nginx on the head in front of frontends on the other worker
	// nodes, or one frontend on the head; a direct vLLM frontend is the agg
	// worker itself.
	orchestrator, err := placedNode(s.Frontend.Placement, procs, ns.head)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: frontend: %v", r.Display, err)
	}
	feNodes, fePort := []string{orchestrator}, frontendPublicPort
	multi := len(ns.worker) > 1 && s.Frontend.EnableMultipleFrontends
	if s.frontendType == "vllm" {
		if multi {
			return nil, fmt.Errorf("recipe %s: frontend.type: vllm binds vllm serve directly to the public port; set frontend.enable_multiple_frontends: false", r.Display)
		}
		feNodes, multi = nil, false
	}
	if multi {
		var others []string
		for _, n := range ns.worker {
			if n != ns.head {
				others = append(others, n)
			}
		}
		feNodes, fePort = others[:min(s.Frontend.NumAdditionalFrontends+1, len(others))], frontendInternal
		var hosts []string
		for _, n := range feNodes {
			hosts = append(hosts, ns.addr[n])
		}
		conf, err := nginxConf(s, hosts, fePort, frontendPublicPort)
		if err != nil {
			return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
		}
		files["nginx.conf"] = conf
		inner := "nginx -c /logs/nginx.conf -g 'daemon off;'"
		if s.Frontend.NginxRaiseUlimit {
			inner = "ulimit -n 1048576 && " + inner
		}
		nginxOpts := config.NewMap()
		nginxOpts.Set("container-remap-root", "")
		add(&Process{Role: RoleNginx, Command: []string{"bash", "-c", inner}, Env: config.NewMap(), Nodelist: []string{ns.head},
			Output: fmt.Sprintf("%s/%s_nginx.out", opt.Paths.LogDir, ns.head), ContainerImage: s.Frontend.NginxContainer,
			ContainerMounts: cloneMap(mounts), SrunOptions: nginxOpts, SrunExportEnv: config.NewMap()})
	}
	pmix := "pmix"
	if s.frontendType == "sglang" {
		for i, n := range feNodes {
			add(&Process{Role: RoleFrontend, Index: i, Command: sglangRouterCommand(s, procs, ns, fePort), Env: strMap(s.Frontend.Env),
				Nodelist: []string{n}, Output: fmt.Sprintf("%s/%s_router_%d.out", opt.Paths.LogDir, n, i),
				ContainerImage: image, ContainerMounts: cloneMap(mounts), SrunOptions: config.NewMap(), SrunExportEnv: config.NewMap(), wrap: true})
		}
		feNodes = nil
	}
	for i, n := range feNodes {
		cmd := append([]string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", fePort)}, frontendArgs(s)...)
		e := config.NewMap()
		e.Set("ETCD_ENDPOINTS", fmt.Sprintf("http://%s:%d", ns.infra, etcdPort))
		e.Set("NATS_SERVER", fmt.Sprintf("nats://%s:%d", ns.infra, natsPort))
		e.Set("DYN_REQUEST_PLANE", s.Dynamo.RequestPlane)
		e.Set("DYN_SKIP_SGLANG_LOG_FORMATTING", "1")
		if s.Dynamo.EventPlane != "" {
			e.Set("DYN_EVENT_PLANE", s.Dynamo.EventPlane)
		}
		for _, k := range env.Keys {
			e.Set(k, env.Vals[k])
		}
		for _, k := range keysOf(s.Frontend.Env) {
			e.Set(k, pyStr(s.Frontend.Env.Vals[k]))
		}
		feExport := config.NewMap()
		if s.Dynamo.Install {
			feExport.Set("ENROOT_REMAP_ROOT", "yes")
		}
		add(&Process{Role: RoleFrontend, Index: i, Command: cmd, Env: e, BashPreamble: frontendPreamble(s),
			Nodelist: []string{n}, Output: fmt.Sprintf("%s/%s_frontend_%d.out", opt.Paths.LogDir, n, i),
			ContainerImage: image, ContainerMounts: cloneMap(mounts), SrunOptions: config.NewMap(),
			SrunExportEnv: feExport, MPI: &pmix, wrap: true})
	}

	// DCGM power telemetry (telemetry_stage.start_power_telemetry): one
	// exporter srun over every worker node, no bash wrapper (the exporter
	// image is distroless); the samples are collected off the head node.
	var power *PowerTelemetry
	if t := s.Telemetry; t != nil {
		power = powerTelemetry(t, s, procs, ns, opt)
		add(&Process{Role: RoleTelemetry, Command: strings.Fields(t.ExporterCommand), Env: config.NewMap(), Nodelist: power.Nodes,
			Output: opt.Paths.LogDir + "/telemetry_dcgm_exporter.out", ContainerImage: t.ExporterImage, ContainerMounts: cloneMap(mounts),
			SrunOptions: strMap(s.SrunOptions), SrunExportEnv: config.NewMap(), ntasks: len(power.Nodes)})
	}

	public := publicNode(s, procs, orchestrator)
	benchNode := ns.bench
	if s.Benchmark.Placement == config.NodeLastDecode {
		if benchNode, err = placedNode(config.NodeLastDecode, procs, ns.head); err != nil {
			return nil, fmt.Errorf("recipe %s: benchmark: %v", r.Display, err)
		}
	}
	if b := s.Benchmark; b.Type == "custom" {
		e := config.NewMap()
		leaders := logicalEndpoints(s, procs, ns)
		for _, m := range []string{"prefill", "decode", "agg"} {
			var ips, eps []string
			for _, l := range leaders {
				if l.mode == m {
					ips = append(ips, l.host)
					eps = append(eps, fmt.Sprintf("%s:%d", l.host, l.port))
				}
			}
			if len(ips) > 0 {
				up := strings.ToUpper(m)
				e.Set("SRT_"+up+"_IPS", strings.Join(ips, ","))
				e.Set("SRT_"+up+"_ENDPOINTS", strings.Join(eps, ","))
			}
		}
		e.Set("SRTCTL_FRONTEND_TYPE", s.frontendType)
		e.Set("SRT_FRONTEND_HOST", ns.addr[public])
		e.Set("SRT_FRONTEND_PORT", strconv.Itoa(frontendPublicPort))
		for _, k := range env.Keys {
			e.Set(k, env.Vals[k])
		}
		measurementWindowEnv(e, s)
		if b.AIPerfServerMetrics {
			var urls []string
			for _, l := range leaders {
				urls = append(urls, fmt.Sprintf("http://%s:%d/metrics", l.host, l.port))
			}
			urls = append(urls, kvbmMetricsURLs(s, procs, ns)...)
			if len(urls) > 0 {
				e.Set("AIPERF_SERVER_METRICS_URLS", strings.Join(dedupe(urls), ","))
			}
		}
		for _, k := range keysOf(b.Env) {
			e.Set(k, pyStr(b.Env.Vals[k]))
		}
		bimg := image
		if b.ContainerImage != "" {
			bimg = b.ContainerImage
		}
		add(&Process{Role: RoleBenchmark, Command: []string{"bash", "-lc", b.Command}, Env: e,
			Nodelist: []string{benchNode}, Output: opt.Paths.LogDir + "/benchmark.out", ContainerImage: bimg,
			ContainerMounts: cloneMap(mounts), SrunOptions: strMap(s.SrunOptions), SrunExportEnv: config.NewMap(), wrap: true})
	} else if runner, ok := benchRunners[b.Type]; ok {
		// srt-slurm's own runners ignore benchmark.env and container_image
		// (BenchmarkRunner.get_environment / get_container_image defaults).
		cmd := runner.command(s, benchCtx{frontendPort: frontendPublicPort, tokenizer: tokenizer, served: served})
		e := builtinBenchEnv(s, runner, procs, ns, env, public)
		add(&Process{Role: RoleBenchmark, Command: cmd, Env: e,
			Nodelist: []string{benchNode}, Output: opt.Paths.LogDir + "/benchmark.out", ContainerImage: image,
			ContainerMounts: cloneMap(mounts), SrunOptions: strMap(s.SrunOptions), SrunExportEnv: config.NewMap(), wrap: true})
	}
	for _, p := range out {
		p.Argv = srunArgv(p, opt.JobID)
	}
	return &Rendered{Processes: out, Files: files, Frontend: s.frontendType, ServedModel: served, PublicNode: public, Power: power}, nil
}

// placedNode is srt-slurm's topology.placed_node: the first or last node
// holding a decode worker's leader (by worker index) for first_decode and
// last_decode, else the head.
func placedNode(placement string, procs []*workerProc, head string) (string, error) {
	if placement != config.NodeFirstDecode && placement != config.NodeLastDecode {
		return head, nil
	}
	var decode []string
	for _, wp := range procs {
		if wp.ep.mode == "decode" && wp.rank == 0 && indexOf(decode, wp.node) < 0 {
			decode = append(decode, wp.node)
		}
	}
	if len(decode) == 0 {
		return "", fmt.Errorf("placement %s but the recipe has no decode workers", placement)
	}
	if placement == config.NodeFirstDecode {
		return decode[0], nil
	}
	return decode[len(decode)-1], nil
}

// publicNode is _public_api_node: the one aggregate leader for a direct
// vLLM frontend, else the frontend's (orchestrator's) node.
func publicNode(s *spec, procs []*workerProc, orchestrator string) string {
	if s.frontendType == "vllm" {
		var leaders []string
		for _, wp := range procs {
			if wp.ep.mode == "agg" && wp.rank == 0 {
				leaders = append(leaders, wp.node)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
	}
	return orchestrator
}

// leaderEndpoint is one logical worker as a custom benchmark sees it.
type leaderEndpoint struct {
	mode, host string
	port       int
}

// logicalEndpoints is _logical_worker_endpoints: every worker leader with
// the port its metrics answer on (dynamo: the system port; direct vLLM: the
// public port; SGLang's router: the worker's HTTP port), in process order.
func logicalEndpoints(s *spec, procs []*workerProc, ns *nodes) []leaderEndpoint {
	var out []leaderEndpoint
	for _, wp := range procs {
		if wp.rank != 0 {
			continue
		}
		port := wp.httpPort
		switch s.frontendType {
		case "dynamo":
			port = wp.sysPort
		case "vllm":
			port = frontendPublicPort
		}
		if port <= 0 {
			continue
		}
		out = append(out, leaderEndpoint{mode: wp.ep.mode, host: ns.addr[wp.node], port: port})
	}
	return out
}

// kvbmMetricsURLs are KVBM's metrics endpoints on prefill and agg leaders
// when the prefill (else aggregated) environment sets DYN_KVBM_METRICS_PORT.
func kvbmMetricsURLs(s *spec, procs []*workerProc, ns *nodes) []string {
	port := ""
	for _, m := range []string{"prefill", "agg"} {
		if me := s.modeEnv[m]; me != nil && port == "" {
			if v, ok := me.Get("DYN_KVBM_METRICS_PORT"); ok && v != nil {
				port = pyStr(v)
			}
		}
	}
	if port == "" {
		return nil
	}
	var urls []string
	for _, wp := range procs {
		if (wp.ep.mode == "prefill" || wp.ep.mode == "agg") && wp.rank == 0 {
			urls = append(urls, fmt.Sprintf("http://%s:%s/metrics", ns.addr[wp.node], port))
		}
	}
	return urls
}

// measurementWindowEnv points the benchmark at the power artifact's
// windows directory (benchmark_stage._get_measurement_window_env).
func measurementWindowEnv(e *config.Map, s *spec) {
	if s.Telemetry != nil {
		e.Set("SRT_MEASUREMENT_WINDOW_DIR", "/logs/"+s.Telemetry.StorageSubdir+"/windows")
	}
}

// carve splits the allocation into head, benchmark, infra and worker nodes
// (srt-slurm Nodes.from_slurm; dedicated roles share one node by default,
// a dedicated client node comes from the tail).
func carve(s *spec, alloc Allocation, n int) (*nodes, error) {
	list := alloc.Nodes[:n]
	ns := &nodes{addr: map[string]string{}}
	for i, name := range list {
		ns.addr[name] = name
		if len(alloc.Addrs) > 0 && alloc.Addrs[i] != "" {
			ns.addr[name] = alloc.Addrs[i]
		}
	}
	var roles []string
	for _, r := range []struct {
		name string
		on   bool
	}{{"infra", s.Services.InfraDedicated()}, {"frontend", s.Frontend.Placement == config.NodeDedicated}, {"client", s.Benchmark.Placement == config.NodeDedicated}} {
		if r.on {
			roles = append(roles, r.name)
		}
	}
	if len(roles) == 0 {
		ns.head, ns.bench, ns.infra, ns.worker = list[0], list[0], list[0], list
		return ns, nil
	}
	reserved := map[string]string{}
	hasClient := indexOf(roles, "client") >= 0
	if s.Benchmark.ColocateWithFrontend {
		if len(list) < 2 {
			return nil, fmt.Errorf("dedicated node for %s needs at least 2 nodes", strings.Join(roles, "+"))
		}
		shared := list[0]
		ns.worker = list[1:]
		if hasClient {
			shared, ns.worker = list[len(list)-1], list[:len(list)-1]
		}
		for _, r := range roles {
			reserved[r] = shared
		}
	} else {
		if len(list) <= len(roles) {
			return nil, fmt.Errorf("dedicated nodes for %s need at least %d nodes", strings.Join(roles, "+"), len(roles)+1)
		}
		front := 0
		for _, r := range roles {
			if r != "client" {
				reserved[r] = list[front]
				front++
			}
		}
		ns.worker = list[front:]
		if hasClient {
			reserved["client"] = list[len(list)-1]
			ns.worker = list[front : len(list)-1]
		}
	}
	ns.head = ns.worker[0]
	if h, ok := reserved["frontend"]; ok {
		ns.head = h
	}
	ns.bench, ns.infra = ns.head, ns.head
	if b, ok := reserved["client"]; ok {
		ns.bench = b
	}
	if i, ok := reserved["infra"]; ok {
		ns.infra = i
	}
	return ns, nil
}

// allocateEndpoints places workers prefill -> decode -> agg (srt-slurm
// topology.allocate_endpoints): a worker of a node or more takes whole
// nodes; smaller ones pack onto a node by GPU index.
func allocateEndpoints(s *spec, avail []string) ([]*endpoint, error) {
	var eps []*endpoint
	nodeIdx, gpuOff := 0, 0
	gpn := s.gpusPerNode
	place := func(mode string, count, per int) error {
		if count > 0 && per <= 0 {
			return fmt.Errorf("%s workers need a positive GPU count, got %d", mode, per)
		}
		perNodes := (per + gpn - 1) / gpn
		for i := 0; i < count; i++ {
			if per >= gpn {
				if nodeIdx+perNodes > len(avail) {
					return fmt.Errorf("not enough nodes for %s worker %d: needs nodes %d-%d of %d", mode, i, nodeIdx+1, nodeIdx+perNodes, len(avail))
				}
				eps = append(eps, &endpoint{mode: mode, index: i, nodes: avail[nodeIdx : nodeIdx+perNodes], gpus: seq(0, gpn)})
				nodeIdx += perNodes
				continue
			}
			if gpuOff+per > gpn {
				nodeIdx, gpuOff = nodeIdx+1, 0
			}
			if nodeIdx >= len(avail) {
				return fmt.Errorf("not enough nodes for %s worker %d", mode, i)
			}
			eps = append(eps, &endpoint{mode: mode, index: i, nodes: avail[nodeIdx : nodeIdx+1], gpus: seq(gpuOff, gpuOff+per)})
			gpuOff += per
			if gpuOff >= gpn || s.Resources.SpreadWorkers {
				nodeIdx, gpuOff = nodeIdx+1, 0
			}
		}
		return nil
	}
	if err := place("prefill", s.prefillWorkers, s.gpusPerPrefill); err != nil {
		return nil, err
	}
	if s.decodeWorkers > 0 && gpuOff > 0 && nodeIdx+1 < len(avail) {
		nodeIdx, gpuOff = nodeIdx+1, 0 // prefill and decode do not share a node
	}
	if err := place("decode", s.decodeWorkers, s.gpusPerDecode); err != nil {
		return nil, err
	}
	if err := place("agg", s.aggWorkers, s.gpusPerAgg); err != nil {
		return nil, err
	}
	return eps, nil
}

// toProcesses makes one process per endpoint node, with srt-slurm's ports.
func toProcesses(eps []*endpoint) []*workerProc {
	httpNext := map[string]int{}
	bootNext := map[string]int{}
	var out []*workerProc
	sys, kv := dynSystemPortBase, kvEventsPortBase
	for _, ep := range eps {
		boot := 0
		if ep.mode == "prefill" {
			if _, ok := bootNext[ep.nodes[0]]; !ok {
				bootNext[ep.nodes[0]] = bootstrapPortBase
			}
			boot = bootNext[ep.nodes[0]]
			bootNext[ep.nodes[0]]++
		}
		for rank, n := range ep.nodes {
			http := 0
			if rank == 0 {
				if _, ok := httpNext[n]; !ok {
					httpNext[n] = sglangHTTPPortBase
				}
				http = httpNext[n]
				httpNext[n] += sglangHTTPStride
			}
			out = append(out, &workerProc{ep: ep, node: n, rank: rank, gpus: ep.gpus, sysPort: sys, httpPort: http, kvEventPort: kv, bootstrapPort: boot})
			sys++
			kv++
		}
	}
	return out
}

// workerCommand is dynamo.sglang's argv: a fixed prefix, then the mode's
// sglang_config sorted by key (srt-slurm _config_to_cli_args).
func workerCommand(s *spec, wp *workerProc, ns *nodes, modelArg, served, logDir string) []string {
	mode := wp.ep.mode
	module := "dynamo.sglang"
	if s.frontendType == "sglang" {
		module = "sglang.launch_server" // the SGLang router talks to SGLang's own server
	}
	cmd := []string{"python3", "-m", module, "--model-path", modelArg, "--served-model-name", served,
		"--host", "0.0.0.0", "--port", strconv.Itoa(wp.httpPort), "--nccl-port", strconv.Itoa(ncclPortBase + wp.sysPort - dynSystemPortBase)}
	if mode != "agg" {
		cmd = append(cmd, "--disaggregation-mode", mode)
		if mode == "prefill" && wp.bootstrapPort != 0 {
			cmd = append(cmd, "--disaggregation-bootstrap-port", strconv.Itoa(wp.bootstrapPort))
		}
	}
	if len(wp.ep.nodes) > 1 {
		cmd = append(cmd, "--dist-init-addr", fmt.Sprintf("%s:%d", ns.addr[wp.ep.nodes[0]], distInitPort),
			"--nnodes", strconv.Itoa(len(wp.ep.nodes)), "--node-rank", strconv.Itoa(wp.rank))
	}
	if s.frontendType != "sglang" {
		cmd = append(cmd, "--dump-config-to", fmt.Sprintf("%s/%s_config.json", logDir, wp.node))
	}
	if kv := kvEventsFor(s.role(mode)); kv != nil {
		kv.Set("endpoint", fmt.Sprintf("tcp://*:%d", wp.kvEventPort))
		cmd = append(cmd, "--kv-events-config", pyJSON(kv))
	}
	if s.frontendType != "sglang" {
		cmd = append(cmd, "--request-plane", s.Dynamo.RequestPlane)
	}
	cfg := s.modeConfig[mode]
	// Only these are taken out; a flag the prefix also sets (e.g.
	// disaggregation-mode) is passed again, as srt-slurm does.
	skip := map[string]bool{"model-path": true, "model_path": true, "served-model-name": true, "served_model_name": true,
		"nccl-port": true, "nccl_port": true, "grpc-port": true, "grpc_port": true}
	keys := make([]string, 0, len(cfg.Keys))
	for _, k := range cfg.Keys {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sortStrings(keys)
	for _, k := range keys {
		flag := "--" + strings.ReplaceAll(k, "_", "-")
		switch v := cfg.Vals[k].(type) {
		case bool:
			if v {
				cmd = append(cmd, flag)
			}
		case []any:
			cmd = append(cmd, flag)
			for _, e := range v {
				cmd = append(cmd, pyStr(e))
			}
		case nil:
		default:
			cmd = append(cmd, flag, pyStr(v))
		}
	}
	return cmd
}

// kvEventsFor is SGLang's --kv-events-config for a role (nil: none): zmq
// on topic kv-events, the role's settings (config.Role.KVEvents) as strings.
func kvEventsFor(ro *config.Role) *config.Map {
	if ro == nil || ro.KVEvents == nil {
		return nil
	}
	o := config.NewMap()
	o.Set("publisher", "zmq")
	o.Set("topic", "kv-events")
	if own, ok := ro.KVEvents.(*config.Map); ok {
		for _, k := range own.Keys {
			o.Set(k, pyStr(own.Vals[k]))
		}
	}
	return o
}

// runtimeMounts are the mounts every container gets (srt-slurm
// RuntimeContext.from_config), in its order.
func runtimeMounts(s *spec, p Paths, hf bool) *config.Map {
	m := config.NewMap()
	m.Set(p.LogDir, "/logs")
	if !hf {
		m.Set(p.ModelDir, "/model")
	}
	m.Set(p.SrtRoot+"/configs", "/configs")
	m.Set(p.SrtRoot+"/src/srtctl/runtime_scripts", "/srtctl-runtime")
	m.Set(p.SrtRoot+"/src/srtctl/benchmarks/scripts", "/srtctl-benchmarks")
	for _, em := range s.ExtraMounts {
		host, ctr, _ := strings.Cut(em, ":")
		m.Set(host, ctr)
	}
	if p.InfmaxWorkspace != "" {
		m.Set(p.InfmaxWorkspace, "/infmax-workspace")
	}
	return m
}

// srunArgv assembles the srun command line the way srt-slurm's
// start_srun_process orders it.
func srunArgv(p *Process, jobID string) []string {
	a := []string{"srun"}
	if jobID != "" {
		a = append(a, "--jobid", jobID)
	}
	a = append(a, "--overlap")
	if p.MPI != nil {
		a = append(a, "--mpi", *p.MPI)
	}
	if p.oversubscribe {
		a = append(a, "--oversubscribe")
	}
	if p.cpuBind != "" {
		a = append(a, "--cpu-bind="+p.cpuBind)
	}
	a = append(a, "--nodes", strconv.Itoa(len(p.Nodelist)), "--ntasks", strconv.Itoa(max(p.ntasks, 1)), "--nodelist", strings.Join(p.Nodelist, ","), "--output", p.Output)
	if p.ContainerImage != "" {
		a = append(a, "--container-image", p.ContainerImage, "--no-container-entrypoint", "--no-container-mount-home")
		if p.ContainerMounts.Len() > 0 {
			var ms []string
			for _, k := range p.ContainerMounts.Keys {
				ms = append(ms, k+":"+p.ContainerMounts.Str(k))
			}
			a = append(a, "--container-mounts", strings.Join(ms, ","))
		}
	}
	for _, k := range p.SrunOptions.Keys {
		if v := p.SrunOptions.Str(k); v != "" {
			a = append(a, "--"+k+"="+v)
		} else {
			a = append(a, "--"+k)
		}
	}
	if p.SrunExportEnv.Len() > 0 {
		kv := []string{"ALL"}
		for _, k := range p.SrunExportEnv.Keys {
			kv = append(kv, k+"="+p.SrunExportEnv.Str(k))
		}
		a = append(a, "--export="+strings.Join(kv, ","))
	}
	if p.wrap {
		return append(a, "bash", "-c", p.Payload(p.BashPreamble))
	}
	return append(a, p.Command...)
}

func seq(a, b int) []int {
	out := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// sglangRouterCommand is srt-slurm's SGLang router (frontends/sglang.py):
// the worker leaders' URLs (prefill with its bootstrap port), then the
// frontend args in YAML order.
func sglangRouterCommand(s *spec, procs []*workerProc, ns *nodes, port int) []string {
	scheme := func(mode string) string {
		if s.Engine.Type == "sglang" && config.Truthy(s.modeConfig[mode].Vals["grpc-mode"]) {
			return "grpc://"
		}
		return "http://"
	}
	cmd := []string{"python", "-m", "sglang_router.launch_router"}
	if s.prefillWorkers > 0 || s.decodeWorkers > 0 {
		cmd = append(cmd, "--pd-disaggregation")
		for _, wp := range procs {
			if wp.rank == 0 && wp.ep.mode == "prefill" {
				cmd = append(cmd, "--prefill", fmt.Sprintf("%s%s:%d", scheme("prefill"), ns.addr[wp.node], wp.httpPort))
				if wp.bootstrapPort != 0 {
					cmd = append(cmd, strconv.Itoa(wp.bootstrapPort))
				}
			}
		}
		for _, wp := range procs {
			if wp.rank == 0 && wp.ep.mode == "decode" {
				cmd = append(cmd, "--decode", fmt.Sprintf("%s%s:%d", scheme("decode"), ns.addr[wp.node], wp.httpPort))
			}
		}
	} else {
		cmd = append(cmd, "--worker-urls")
		for _, wp := range procs {
			if wp.rank == 0 && wp.ep.mode == "agg" {
				cmd = append(cmd, fmt.Sprintf("%s%s:%d", scheme("agg"), ns.addr[wp.node], wp.httpPort))
			}
		}
	}
	cmd = append(cmd, "--host", "0.0.0.0", "--port", strconv.Itoa(port))
	return append(cmd, frontendArgs(s)...)
}

// frontendArgs is frontend.args in YAML order: true -> --flag, false and
// null dropped, anything else -> --flag str(v).
func frontendArgs(s *spec) []string {
	var out []string
	for _, k := range keysOf(s.Frontend.Args) {
		switch v := s.Frontend.Args.Vals[k]; v {
		case true:
			out = append(out, "--"+k)
		case false, nil:
		default:
			out = append(out, "--"+k, pyStr(v))
		}
	}
	return out
}
