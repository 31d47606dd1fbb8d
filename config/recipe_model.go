package config

import "github.com/sweepflow/sweepflow/config/strictyaml"

// The typed recipe: what an srt-slurm recipe launches, whichever way it is
// spelled (schema 1, the layout srt-slurm v1.0.68 reads, or schema 2, the
// layout of srt-slurm 2.x: engine, roles, services, placement,
// dynamo.source). Both spellings decode into these types and srt-slurm's
// defaults are applied once, in applyRecipeDefaults, so two files that
// launch the same thing resolve to equal values (Recipe.Canonical).

// Role names, in the order srt-slurm places workers.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleAgg     = "agg"
)

// RoleNames are the worker roles in srt-slurm's placement order.
var RoleNames = []string{RolePrefill, RoleDecode, RoleAgg}

// Role is one worker role: its topology, environment and engine arguments
// (schema 2: roles.<role>; schema 1: resources.<role>_*, backend.<mode>_environment,
// backend.<engine>_config.<mode>, backend.kv_events_config.<mode>).
type Role struct {
	Name string // prefill, decode or agg
	Pos  strictyaml.Pos
	// Nodes the role's workers take. Zero with Colocate: decode workers on
	// the prefill nodes' spare GPUs (roles.decode.nodes: colocate,
	// resources.decode_nodes: 0).
	Nodes    int
	Colocate bool
	Workers  int
	// GPUs per worker as written; 0 means derived from Nodes and Workers.
	GPUs int
	// Env is the role's environment block; nil when the recipe has none
	// (InferenceX's injectors write only into blocks that exist).
	Env *Map
	// Args are the engine's CLI settings for the role, never nil.
	Args *Map
	// ExtraArgs is roles.<role>.extra_args (schema 2 only).
	ExtraArgs []any
	// KVEvents is the role's --kv-events-config: nil (off), true (srt-slurm's
	// defaults) or a *Map of settings.
	KVEvents any

	nodesSet, workersSet bool // written, even as 0 (decoding only)
}

// NumWorkers is the role's worker count; an agg role that does not say
// has one worker (srt-slurm's default).
func (r *Role) NumWorkers() int {
	if r.Name == RoleAgg && r.Workers == 0 {
		return 1
	}
	return r.Workers
}

// Mode is the role's name in srt-slurm's backend keys: aggregated for agg.
func (r *Role) Mode() string {
	if r.Name == RoleAgg {
		return "aggregated"
	}
	return r.Name
}

// Roles are a recipe's worker roles; a nil role is not in the recipe.
type Roles struct {
	Prefill, Decode, Agg *Role
}

// All returns the roles present, in placement order.
func (rs Roles) All() []*Role {
	var out []*Role
	for _, r := range []*Role{rs.Prefill, rs.Decode, rs.Agg} {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

// Get returns the named role (nil when absent).
func (rs Roles) Get(name string) *Role {
	switch name {
	case RolePrefill:
		return rs.Prefill
	case RoleDecode:
		return rs.Decode
	case RoleAgg:
		return rs.Agg
	}
	return nil
}

func (rs *Roles) slot(name string) **Role {
	switch name {
	case RolePrefill:
		return &rs.Prefill
	case RoleDecode:
		return &rs.Decode
	case RoleAgg:
		return &rs.Agg
	}
	return nil
}

// Engine is the inference engine and its engine-wide settings (schema 2:
// engine, a string or a mapping; schema 1: backend).
type Engine struct {
	Pos  strictyaml.Pos
	Type string // sglang (srt-slurm's default), trtllm, vllm or mocker
	// vLLM: Connector is backend.connector ("nixl" when not written, nil
	// when written null).
	Connector                               any
	SetCUDAVisibleDevices                   bool
	DPLaunchMode                            string // per_node
	AllowPrefillDecodeColocation            bool
	AllowPrefillDecodeColocationAcrossNodes bool
	// TRT-LLM.
	PublishEventsAndMetrics bool
	SequentialNodeStart     int
	NUMAMemoryBind          *bool // nil: by resources.gpu_type
	// GPUType is SGLang's backend.gpu_type.
	GPUType string
	// Other holds settings of engines sweepflow does not launch (mocker's
	// speedup_ratio, engine_type, mocker_config), kept so they resolve.
	Other *Map
}

// ConfigKey is the engine's per-mode config key in schema 1 (sglang_config, ...).
func (e Engine) ConfigKey() string { return e.Type + "_config" }

// Services are the processes srt-slurm starts next to the workers: the
// discovery plane (etcd and NATS, srt-slurm's setup_head.py) and the
// Mooncake master (schema 2: services; schema 1: infra and
// backend.mooncake_kv_store).
type Services struct {
	Pos strictyaml.Pos
	// InfraNode is where etcd and NATS run: "infra" (the head node) or
	// "dedicated" (a node of their own).
	InfraNode string
	// NATSMaxPayloadMB is NATS's max_payload in MB; 0 is NATS's default.
	NATSMaxPayloadMB int
	// Mooncake is the Mooncake master of a Mooncake KV store; nil without one.
	Mooncake *MooncakeMaster
}

// InfraDedicated reports whether etcd and NATS take a node of their own.
func (s Services) InfraDedicated() bool { return s.InfraNode == NodeDedicated }

// MooncakeMaster is srt-slurm's mooncake_master process.
type MooncakeMaster struct {
	Pos         strictyaml.Pos
	Container   string // "" for the job's container
	Args        []any  // master_extra_args
	StoreConfig *Map   // options.store_config (vLLM)
	// Env is schema 1's backend.mooncake_kv_store.env, which srt-slurm
	// v1.0.68 injects into every worker right after MOONCAKE_LOCAL_HOSTNAME
	// (so it may override it). Schema 2 has no such block: its migration
	// moves the variables into every role's env, and the resolved recipe
	// (Canonical) counts them there for both spellings.
	Env *Map
}

// Placements (schema 2 placement.node, schema 1 dedicated_node and *_placement).
const (
	NodeHead        = "head"
	NodeInfra       = "infra"
	NodeDedicated   = "dedicated"
	NodeFirstDecode = "first_decode"
	NodeLastDecode  = "last_decode"
	NodeColocate    = "colocate"
)

// Frontend types. Schema 1's "sglang" is the SGLang router; schema 2 calls
// that "sglang-router" and uses "sglang" for a single SGLang server that
// binds the public port itself.
const (
	FrontendDynamo       = "dynamo"
	FrontendSGLangRouter = "sglang-router"
	FrontendSGLang       = "sglang"
)

// Frontend is the router that fronts the workers.
type Frontend struct {
	Pos                        strictyaml.Pos
	Type                       string // dynamo, sglang-router, sglang, vllm, trtllm_serve, ...
	Placement                  string // head, first_decode or dedicated
	EnableMultipleFrontends    bool
	NumAdditionalFrontends     int
	NginxContainer             string
	NginxRaiseUlimit           bool
	NginxSessionAffinity       bool
	NginxSessionAffinityHeader string
	NginxKeepaliveTimeout      string
	Args                       *Map // in file order; nil when not given
	Env                        *Map
	// Other holds trtllm_serve's settings (ctx_router, gen_router,
	// server_config_extra), kept so they resolve.
	Other *Map
}

// Benchmark is the load srt-slurm runs against the frontend.
type Benchmark struct {
	Pos                  strictyaml.Pos
	Type                 string // manual, custom, sa-bench, mooncake-router, ...
	Placement            string // head, last_decode or dedicated
	ColocateWithFrontend bool
	Command              string // custom
	ContainerImage       string // custom
	Env                  *Map   // custom
	// AIPerfServerMetrics: a custom benchmark gets every worker leader's
	// metrics URL in AIPERF_SERVER_METRICS_URLS (default true).
	AIPerfServerMetrics bool
	AIPerfPackage       string
	AIPerfArgs          *Map
	// The settings of srt-slurm's own runners, nil for other types.
	SABench        *SABench
	MooncakeRouter *MooncakeRouterBench

	// fields are the runner's settings as written (isl, osl, ...), only
	// those the type reads: srt-slurm 2.x rejects the rest and its
	// migration drops them, since they never had an effect. They are what
	// the resolved recipe hashes; the typed settings above are read from them.
	fields *Map
}

// SABench is what SA-Bench's runner reads (benchmark type sa-bench). The
// values it prints with Python's str() keep the type they were written
// with (nil: not written); the rest are as the runner converts them.
type SABench struct {
	ISL, OSL any
	// Concurrencies is a list or an "AxB" string, as written;
	// ConcurrencyList is its values.
	Concurrencies        any
	ConcurrencyList      []int
	ReqRate              any
	RandomRangeRatio     float64 // 0.8
	NumPromptsMult       any     // nil: 10
	NumWarmupMult        any     // nil: 2
	CustomTokenizer      any
	UseChatTemplate      bool // true
	DatasetName          any  // nil: random
	DatasetPath          any
	ReuseHTTPConnections bool
	// SlowDownSleep and SlowDownWait (seconds) let SA-Bench pause the SGLang
	// router's decode workers when both are positive; 0 when not written.
	SlowDownSleep, SlowDownWait float64
	// TokenizerMode is SA-Bench's --tokenizer-mode (srt-slurm 4261dba6), ""
	// when not written.
	TokenizerMode string
}

// MooncakeRouterBench is what the mooncake-router runner reads.
type MooncakeRouterBench struct {
	Workload        string // mooncake, conversation (default), synthetic, toolagent
	TTFTThresholdMs int    // 2000
	ITLThresholdMs  int    // 25
}

// Telemetry is DCGM power telemetry (srt-slurm's telemetry section with
// provider dcgm-power, enabled): a DCGM exporter on every worker node,
// polled by a collector on the head node that writes samples.csv and
// manifest.json under the log directory's StorageSubdir.
type Telemetry struct {
	Pos             strictyaml.Pos
	ExporterImage   string
	ExporterPort    int
	ExporterCommand string  // with {port} filled in
	Interval        float64 // default_frequency: seconds between samples
	StorageSubdir   string  // power
	Required        bool
	StartupTimeout  float64 // seconds (30)
	RequestTimeout  float64 // seconds (2)
	JoinTimeout     float64 // seconds
}

// Section is a recipe section srt-slurm accepts that sweepflow launches
// nothing from: kept as written (it is part of the resolved recipe), with
// whether it switches on something a launch would have to start.
type Section struct {
	Pos    strictyaml.Pos
	Values *Map
	On     bool // enabled: true (profiling, observability), any mount (container_mounts)
}

// Dynamo is how Dynamo is installed and wired.
type Dynamo struct {
	Pos     strictyaml.Pos
	Install bool
	Source  DynamoSource
	// RequestPlane is nats, tcp or http; EventPlane "" follows the image.
	RequestPlane string
	EventPlane   string
}

// Dynamo install sources (schema 2 dynamo.source; schema 1 version, wheel,
// hash and top_of_tree).
const (
	SourcePyPI      = "pypi"
	SourceWheel     = "wheel"
	SourceRev       = "rev"
	SourceTopOfTree = "top_of_tree"
)

// DynamoSource is where Dynamo comes from: a PyPI version (srt-slurm's
// default 0.8.0), a staged wheel version, a git commit built from source
// (with Cargo patches), or the repository's head.
type DynamoSource struct {
	Kind    string
	Value   string
	Patches []any
}
