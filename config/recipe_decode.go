package config

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// The one decoder of srt-slurm recipes. A schema-1 document is read as
// srt-slurm v1.0.68 reads it; a schema-2 document also takes srt-slurm
// 2.x's spellings (engine, roles, services, placement, dynamo.source), which
// fold into the same typed fields. Defaults are applied afterwards, in
// applyRecipeDefaults, whatever the spelling.

// Recipe schema versions.
const (
	SchemaV1 = 1
	SchemaV2 = 2
)

// unknownField is the refusal of a key the recipe's schema does not have.
func unknownField(schema int) string {
	if schema >= SchemaV2 {
		return "unknown field, or one of srt-slurm 2.x's that sweepflow does not launch yet"
	}
	return "unknown field (srt-slurm rejects it)"
}

// notLaunched is the one-line refusal of a field srt-slurm 2.x accepts and
// sweepflow cannot launch yet.
const notLaunched = "srt-slurm 2.x's %s is not launched by sweepflow yet"

var (
	recipeTopV1 = []string{"schema", "name", "model", "identity", "resources", "slurm", "backend", "frontend", "dynamo",
		"benchmark", "profiling", "output", "health_check", "infra", "observability", "telemetry", "environment",
		"container_mounts", "extra_mount", "srun_options", "sbatch_directives", "enable_config_dump", "setup_script", "reporting"}
	recipeTopV2Only = []string{"engine", "roles", "services"}

	recipeModelFields = []string{"path", "container", "precision"}
	resourcesFields   = []string{"gpu_type", "gpus_per_node", "spread_workers", "het_jobs", "pack_multinode_workers",
		"prefill_nodes", "prefill_workers", "decode_nodes", "decode_workers", "agg_nodes", "agg_workers",
		"gpus_per_prefill", "gpus_per_decode", "gpus_per_agg"}
	roleFields       = []string{"nodes", "workers", "gpus", "env", "args", "extra_args", "kv_events", "engine", "sidecar", "critical"}
	infraFields      = []string{"etcd_nats_dedicated_node", "nats_max_payload_mb", "placement"}
	frontendFields   = []string{"type", "placement", "enable_multiple_frontends", "num_additional_frontends", "nginx_container", "nginx_raise_ulimit", "nginx_session_affinity", "nginx_session_affinity_header", "nginx_keepalive_timeout", "args", "env", "ctx_router", "gen_router", "server_config_extra", "orchestrator_placement", "dedicated_node", "worker_selection"}
	dynamoFields     = []string{"install", "source", "version", "hash", "top_of_tree", "wheel", "cargo_patches", "request_plane", "event_plane", "sidecar"}
	healthFields     = []string{"max_attempts", "interval_seconds"}
	slurmFields      = []string{"account", "partition", "time_limit"}
	engineWideFields = map[string][]string{
		"sglang": {"gpu_type", "kv_events_config", "mooncake_kv_store"},
		"trtllm": {"publish_events_and_metrics", "sequential_node_start", "numa_memory_bind"},
		"vllm": {"connector", "set_cuda_visible_devices", "dp_launch_mode", "allow_prefill_decode_colocation",
			"allow_prefill_decode_colocation_across_nodes", "kv_events_config", "mooncake_kv_store"},
	}
	// Benchmark fields every type may set, and the ones each runner
	// sweepflow launches reads (srt-slurm's runners read the same).
	benchmarkShared = []string{"type", "placement", "client_placement", "client_dedicated_node", "colocate_with_frontend",
		"sweep", "aiperf_package", "aiperf_args", "aiperf_server_metrics", "concurrencies", "stream_output"}
	benchmarkReads = map[string][]string{
		"manual": {},
		"custom": {"command", "container_image", "env"},
		"sa-bench": {"isl", "osl", "req_rate", "random_range_ratio", "num_prompts_mult", "num_warmup_mult", "custom_tokenizer",
			"use_chat_template", "dataset_name", "dataset_path", "reuse_http_connections", "slow_down_sleep_time",
			"slow_down_wait_time", "tokenizer_mode"},
		"mooncake-router": {"mooncake_workload", "ttft_threshold_ms", "itl_threshold_ms"},
	}
	// benchmarkFields are srt-slurm's BenchmarkConfig fields (v1.0.68 and
	// the two InferenceX recipes use from later versions).
	benchmarkFields = []string{"type", "isl", "osl", "concurrencies", "req_rate", "client_placement", "client_dedicated_node",
		"colocate_with_frontend", "sweep", "num_examples", "max_tokens", "repeat", "num_threads", "max_context_length",
		"categories", "num_shots", "temperature", "top_p", "top_k", "num_requests", "concurrency", "prefix_ratios",
		"mooncake_workload", "ttft_threshold_ms", "itl_threshold_ms", "random_range_ratio", "num_prompts_mult",
		"num_warmup_mult", "dataset_name", "dataset_path", "trace_file", "custom_tokenizer", "use_chat_template",
		"reuse_http_connections", "command", "container_image", "env", "aiperf_package", "aiperf_args",
		"export_node_metrics", "slow_down_sleep_time", "slow_down_wait_time", "tokenizer_mode", "aiperf_server_metrics",
		"stream_output", "placement"}
)

// recipeDecoder is the decoder of one recipe document, with what the
// schema-1 backend section says about roles and services until the roles
// are known.
type recipeDecoder struct {
	*decoder
	engineSources []*strictyaml.Mapping // engine (schema 2) and backend mappings
	kv            any                   // backend.kv_events_config
	kvPos         strictyaml.Pos
	mooncakeEnv   *Map // backend.mooncake_kv_store.env
}

// recipeSchema reads the schema: key of a recipe file's top-level mapping
// (1 when absent). An unknown version is a one-line error.
func (d *decoder) recipeSchema(root *yaml.Node) (int, error) {
	root = strictyaml.Deref(root)
	n := mapGet(root, "schema")
	if n == nil || strictyaml.IsNull(n) {
		return SchemaV1, nil
	}
	kn := root
	for i := 0; i+1 < len(root.Content); i += 2 {
		if strictyaml.Deref(root.Content[i]).Value == "schema" {
			kn = root.Content[i]
		}
	}
	v, err := strictyaml.ScalarValue(n)
	if i, ok := v.(int64); err == nil && ok && (i == SchemaV1 || i == SchemaV2) {
		return int(i), nil
	}
	return 0, &strictyaml.Error{Pos: d.Pos(kn), Field: "schema",
		Msg: fmt.Sprintf("unknown recipe schema %q: sweepflow reads srt-slurm recipe schemas 1 and 2", n.Value)}
}

// decodeRecipe reads the recipe mapping doc (a variant already picked) into r.
func (d *recipeDecoder) decodeRecipe(r *Recipe, doc *yaml.Node) {
	setRecipeDefaults(r)
	m := d.Mapping(doc, "", nil)
	if m == nil {
		return
	}
	if r.Schema >= SchemaV2 && m.Has("backend") && (m.Has("engine") || m.Has("roles")) {
		d.Errorf(m.KeyNodes["backend"], "backend", "schema 2 writes the engine as engine: and roles:; give backend or engine/roles, not both")
	}
	if m.Has("schema") {
		if v, _ := strictyaml.ScalarValue(m.Values["schema"]); v != int64(r.Schema) {
			d.Errorf(m.Values["schema"], "schema", "the variant says schema %v but the file says schema %d", v, r.Schema)
		}
	}
	r.Name = m.ReqStr("name")
	d.model(r, m)
	r.Identity = d.anyMap(m.Get("identity"), "identity")
	d.engine(r, m)
	d.roles(r, m)
	d.services(r, m)
	d.frontend(r, m)
	d.benchmark(r, m)
	d.dynamo(r, m)
	d.healthCheck(r, m)
	d.slurm(r, m)
	r.Environment = d.envMap(m.Get("environment"), "environment")
	r.SrunOptions = d.envMap(m.Get("srun_options"), "srun_options")
	r.SbatchDirectives = d.envMap(m.Get("sbatch_directives"), "sbatch_directives")
	if n := m.Get("extra_mount"); n != nil {
		if items, ok := d.Seq(n, "extra_mount"); ok {
			for i, it := range items {
				if s, ok := d.Str(it, strictyaml.Index("extra_mount", i)); ok {
					if !strings.Contains(s, ":") {
						d.Errorf(it, strictyaml.Index("extra_mount", i), "%q is not host:container", s)
					}
					r.ExtraMounts = append(r.ExtraMounts, s)
				}
			}
		}
	}
	r.SetupScript, _ = m.OptStr("setup_script")
	optBool(m, "enable_config_dump", &r.EnableConfigDump)
	enabled := func(v *Map) bool { on, _ := v.Get("enabled"); return Truthy(on) }
	r.ContainerMounts = d.section(m, "container_mounts", func(v *Map) bool { return v.Len() > 0 })
	r.Profiling = d.section(m, "profiling", enabled)
	r.Observability = d.section(m, "observability", enabled)
	r.Output = d.section(m, "output", func(*Map) bool { return false })
	r.Reporting = d.section(m, "reporting", func(*Map) bool { return false })
	d.telemetry(r, m)
	d.resolve(r)
	d.checkRecipe(r, m)
	for _, k := range m.Keys {
		switch {
		case slices.Contains(recipeTopV1, k):
		case slices.Contains(recipeTopV2Only, k):
			if r.Schema < SchemaV2 {
				d.Errorf(m.KeyNodes[k], k, "is a schema-2 field: add `schema: 2` at the top of the recipe")
			}
		case k == "base" || strings.HasPrefix(k, "override_") || strings.HasPrefix(k, "zip_override_"):
			d.Errorf(m.KeyNodes[k], k, "variant sections belong at the top level of an override file, next to base")
		default:
			d.Errorf(m.KeyNodes[k], k, "%s", unknownField(r.Schema))
		}
	}
}

func (d *recipeDecoder) model(r *Recipe, m *strictyaml.Mapping) {
	if !m.Has("model") {
		m.Missing("model")
		return
	}
	if mm := d.Mapping(m.Values["model"], "model", recipeModelFields); mm != nil {
		r.Model.Path = mm.ReqStr("path")
		r.Model.Container = mm.ReqStr("container")
		r.Model.Precision, _ = mm.OptStr("precision")
	}
}

// placement reads a schema-2 placement block ({node: X}) and checks X.
func (d *recipeDecoder) placement(n *yaml.Node, field string, allowed ...string) (string, strictyaml.Pos) {
	pm := d.Mapping(n, field, []string{"node"})
	if pm == nil {
		return "", strictyaml.Pos{}
	}
	if !pm.Has("node") {
		pm.Missing("node")
		return "", d.Pos(pm.Node)
	}
	node, ok := d.Str(pm.Values["node"], pm.Field("node"))
	if ok && !slices.Contains(allowed, node) {
		d.Errorf(pm.Values["node"], pm.Field("node"), "must be one of %s, got %q", strings.Join(allowed, ", "), node)
	}
	return node, d.Pos(pm.Values["node"])
}

// engine reads the engine type and its engine-wide settings from schema 2's
// engine (a string or a mapping) and schema 1's backend.
func (d *recipeDecoder) engine(r *Recipe, m *strictyaml.Mapping) {
	e := &r.Engine
	var sources []*strictyaml.Mapping // engine mapping, backend mapping
	if n := m.Get("engine"); n != nil {
		e.Pos = d.Pos(n)
		switch dn := strictyaml.Deref(n); dn.Kind {
		case yaml.ScalarNode:
			e.Type, _ = d.Str(dn, "engine")
		case yaml.MappingNode:
			if em := d.Mapping(dn, "engine", nil); em != nil {
				sources = append(sources, em)
			}
		default:
			d.Errorf(dn, "engine", "expected the engine type or a mapping with type, got %s", strictyaml.KindName(dn))
		}
	}
	if n := m.Get("backend"); n != nil {
		if bm := d.Mapping(n, "backend", nil); bm != nil {
			if e.Pos.File == "" {
				e.Pos = d.Pos(bm.Node)
			}
			sources = append(sources, bm)
		}
	} else if m.Has("backend") && r.Schema < SchemaV2 {
		m.Missing("backend")
	}
	for _, s := range sources {
		if t, ok := s.OptStr("type"); ok {
			if e.Type != "" && e.Type != t {
				d.Errorf(s.Values["type"], s.Field("type"), "%q conflicts with the engine type %q given earlier", t, e.Type)
			}
			e.Type = t
		}
	}
	if e.Type == "" {
		// srt-slurm's backend section defaults to SGLang; most of its
		// GB200 recipes do not write the type.
		e.Type = "sglang"
	}
	d.engineSources = sources
	switch e.Type {
	case "sglang", "trtllm", "vllm", "mocker":
	default:
		d.Errs.Add(e.Pos, "engine", "unknown engine type %q (srt-slurm knows sglang, trtllm, vllm, mocker)", e.Type)
		return
	}
	wide := engineWideFields[e.Type]
	seen := map[string]string{}
	for _, s := range sources {
		for _, k := range s.Keys {
			if k == "type" || d.isModeKey(e.Type, k) {
				continue
			}
			if prev, dup := seen[k]; dup {
				d.Errorf(s.KeyNodes[k], s.Field(k), "also set in %s; set it in one place", prev)
				continue
			}
			seen[k] = s.Path
			if e.Type == "mocker" {
				if e.Other == nil {
					e.Other = NewMap()
				}
				v, _ := d.pyValue(s.Values[k], s.Field(k), 0)
				e.Other.Set(k, v)
				continue
			}
			if !slices.Contains(wide, k) {
				d.Errorf(s.KeyNodes[k], s.Field(k), "%s for engine %s", unknownField(r.Schema), e.Type)
				continue
			}
			d.engineWide(r, s, k)
		}
	}
}

// isModeKey reports whether k is a schema-1 per-mode key of backend.
func (d *recipeDecoder) isModeKey(engineType, k string) bool {
	if k == engineType+"_config" {
		return true
	}
	for _, mode := range []string{"prefill", "decode", "aggregated"} {
		if k == mode+"_environment" {
			return true
		}
	}
	return false
}

func (d *recipeDecoder) engineWide(r *Recipe, s *strictyaml.Mapping, k string) {
	e := &r.Engine
	v := s.Values[k]
	f := s.Field(k)
	switch k {
	case "gpu_type":
		e.GPUType, _ = s.OptStr(k)
	case "connector":
		e.Connector, _ = d.pyValue(v, f, 0)
	case "set_cuda_visible_devices":
		e.SetCUDAVisibleDevices, _ = s.OptBool(k)
	case "dp_launch_mode":
		optStr(s, k, &e.DPLaunchMode)
	case "allow_prefill_decode_colocation":
		e.AllowPrefillDecodeColocation, _ = s.OptBool(k)
	case "allow_prefill_decode_colocation_across_nodes":
		e.AllowPrefillDecodeColocationAcrossNodes, _ = s.OptBool(k)
	case "publish_events_and_metrics":
		e.PublishEventsAndMetrics, _ = s.OptBool(k)
	case "sequential_node_start":
		n, _ := s.OptInt(k)
		e.SequentialNodeStart = int(n)
	case "numa_memory_bind":
		if b, ok := s.OptBool(k); ok {
			e.NUMAMemoryBind = &b
		}
	case "kv_events_config":
		kv, _ := d.pyValue(v, f, 0)
		d.kv, d.kvPos = kv, d.Pos(v)
	case "mooncake_kv_store":
		d.legacyMooncake(r, v, f)
	}
}

// legacyMooncake reads schema 1's backend.mooncake_kv_store: the master and
// the environment srt-slurm injected into every worker.
func (d *recipeDecoder) legacyMooncake(r *Recipe, n *yaml.Node, field string) {
	if strictyaml.IsNull(n) {
		return
	}
	allowed := []string{"container", "env", "master_extra_args"}
	if r.Engine.Type == "vllm" {
		allowed = append(allowed, "store_config")
	}
	mm := d.Mapping(n, field, allowed)
	if mm == nil {
		return
	}
	r.Services.Mooncake = d.mooncakeMaster(mm, "master_extra_args", mm)
	d.mooncakeEnv = d.envMap(mm.Get("env"), mm.Field("env"))
}

// mooncakeMaster reads the master's container and arguments (argsKey) from
// m and its store_config from opts (nil: none).
func (d *recipeDecoder) mooncakeMaster(m *strictyaml.Mapping, argsKey string, opts *strictyaml.Mapping) *MooncakeMaster {
	mc := &MooncakeMaster{Pos: d.Pos(m.Node), Args: d.list(m, argsKey)}
	mc.Container, _ = m.OptStr("container")
	if opts != nil {
		mc.StoreConfig = d.anyMap(opts.Get("store_config"), opts.Field("store_config"))
	}
	return mc
}

// roles builds the worker roles from schema 1's resources and backend keys
// and schema 2's roles block; mixing the two spellings is an error.
func (d *recipeDecoder) roles(r *Recipe, m *strictyaml.Mapping) {
	var res *strictyaml.Mapping
	if !m.Has("resources") {
		m.Missing("resources")
	} else if res = d.Mapping(m.Values["resources"], "resources", resourcesFields); res != nil {
		r.Resources.Pos = d.Pos(res.Node)
		r.Resources.GPUType, _ = res.OptStr("gpu_type")
		r.Resources.GPUsPerNode = d.count(res, "gpus_per_node")
		r.Resources.SpreadWorkers, _ = res.OptBool("spread_workers")
		if v, ok := res.OptBool("het_jobs"); ok {
			r.Resources.HetJobs = &v
		}
		r.Resources.PackMultinodeWorkers, _ = res.OptBool("pack_multinode_workers")
	}
	legacy := d.legacyRoles(r, res)
	var rolesNode *strictyaml.Mapping
	if n := m.Get("roles"); n != nil && r.Schema >= SchemaV2 {
		rolesNode = d.Mapping(n, "roles", RoleNames)
	}
	if rolesNode != nil {
		if len(legacy) > 0 {
			d.Errs.Add(legacy[0].pos, legacy[0].field, "roles: cannot be combined with the fields it expands into; use roles or the schema-1 fields, not both")
			return
		}
		for _, name := range rolesNode.Keys {
			d.v2Role(r, name, rolesNode.Values[name], rolesNode.Field(name))
		}
	}
	d.checkTopology(r, res, rolesNode)
}

type legacyField struct {
	pos   strictyaml.Pos
	field string
}

// legacyRoles reads schema 1's per-role fields and returns where they were.
func (d *recipeDecoder) legacyRoles(r *Recipe, res *strictyaml.Mapping) []legacyField {
	var found []legacyField
	role := func(name string) *Role {
		slot := r.Roles.slot(name)
		if *slot == nil {
			*slot = &Role{Name: name}
		}
		return *slot
	}
	note := func(ro *Role, pos strictyaml.Pos, field string) {
		if ro.Pos.File == "" {
			ro.Pos = pos
		}
		found = append(found, legacyField{pos, field})
	}
	if res != nil {
		for _, name := range RoleNames {
			for _, k := range []string{name + "_nodes", name + "_workers", "gpus_per_" + name} {
				if !res.Has(k) {
					continue
				}
				ro := role(name)
				note(ro, d.Pos(res.KeyNodes[k]), res.Field(k))
				v := d.count(res, k)
				switch k {
				case name + "_nodes":
					ro.Nodes = v
					ro.nodesSet = true
					if name == RoleDecode && v == 0 && res.Get(k) != nil {
						ro.Colocate = true
					}
				case name + "_workers":
					ro.Workers = v
					ro.workersSet = true
				default:
					ro.GPUs = v
				}
			}
		}
	}
	for _, s := range d.engineSources {
		if s.Path != "backend" {
			continue
		}
		for _, name := range RoleNames {
			mode := (&Role{Name: name}).Mode()
			if n := s.Get(mode + "_environment"); n != nil || s.Has(mode+"_environment") {
				ro := role(name)
				note(ro, d.Pos(s.KeyNodes[mode+"_environment"]), s.Field(mode+"_environment"))
				ro.Env = d.envMap(n, s.Field(mode+"_environment"))
				if ro.Env == nil {
					ro.Env = NewMap()
				}
			}
		}
		key := r.Engine.ConfigKey()
		if n := s.Get(key); n != nil {
			cm := d.Mapping(n, s.Field(key), []string{"prefill", "decode", "aggregated"})
			if cm == nil {
				continue
			}
			for _, name := range RoleNames {
				mode := (&Role{Name: name}).Mode()
				if !cm.Has(mode) {
					continue
				}
				ro := role(name)
				note(ro, d.Pos(cm.KeyNodes[mode]), cm.Field(mode))
				ro.Args = d.anyMap(cm.Get(mode), cm.Field(mode))
			}
		}
	}
	// backend.kv_events_config: true enables prefill and decode with
	// srt-slurm's defaults; a mapping enables the modes it names.
	switch kv := d.kv.(type) {
	case bool:
		if kv {
			for _, ro := range []*Role{r.Roles.Prefill, r.Roles.Decode} {
				if ro != nil {
					ro.KVEvents = true
				}
			}
		}
	case *Map:
		for _, k := range kv.Keys {
			name := k
			if k == "aggregated" {
				name = RoleAgg
			}
			if k == RoleAgg || !slices.Contains(RoleNames, name) {
				d.Errs.Add(kv.Pos[k], "backend.kv_events_config."+k, "expected prefill, decode or aggregated")
				continue
			}
			if ro := r.Roles.Get(name); ro != nil {
				ro.KVEvents = kvEventsValue(kv.Vals[k])
			}
		}
	case nil:
	default:
		d.Errs.Add(d.kvPos, "backend.kv_events_config", "expected true, false or a mapping per mode")
	}
	return found
}

// kvEventsValue is srt-slurm's reading of a mode's kv_events setting: true
// or a mapping enables it, anything else does not.
func kvEventsValue(v any) any {
	switch x := v.(type) {
	case bool:
		if x {
			return true
		}
	case *Map:
		return x
	}
	return nil
}

// v2Role reads roles.<name>.
func (d *recipeDecoder) v2Role(r *Recipe, name string, n *yaml.Node, field string) {
	rm := d.Mapping(n, field, roleFields)
	if rm == nil {
		return
	}
	ro := &Role{Name: name, Pos: d.Pos(rm.Node)}
	*r.Roles.slot(name) = ro
	if rm.Has("nodes") {
		ro.nodesSet = true
		v := rm.Values["nodes"]
		s, _ := strictyaml.ScalarValue(v)
		switch x := s.(type) {
		case string:
			if strings.EqualFold(strings.TrimSpace(x), NodeColocate) {
				if name != RoleDecode {
					d.Errorf(v, rm.Field("nodes"), "only the decode role can colocate (on the prefill nodes)")
				}
				ro.Colocate = true
			} else {
				d.Errorf(v, rm.Field("nodes"), "must be a positive integer or colocate, got %q", x)
			}
		case int64:
			switch {
			case x == 0 && name == RoleDecode:
				d.Errorf(v, rm.Field("nodes"), "0 is not accepted; write nodes: colocate to share the prefill nodes")
			case x < 1:
				d.Errorf(v, rm.Field("nodes"), "must be at least 1, got %d", x)
			case x > 1<<20:
				d.Errorf(v, rm.Field("nodes"), "unreasonably large: %d", x)
			default:
				ro.Nodes = int(x)
			}
		default:
			d.Errorf(v, rm.Field("nodes"), "must be a positive integer or colocate, got %s", strictyaml.KindName(v))
		}
	}
	ro.Workers, ro.workersSet = d.count(rm, "workers"), rm.Has("workers")
	ro.GPUs = d.count(rm, "gpus")
	if rm.Has("env") {
		ro.Env = d.envMap(rm.Get("env"), rm.Field("env"))
		if ro.Env == nil {
			ro.Env = NewMap()
		}
	}
	ro.Args = d.anyMap(rm.Get("args"), rm.Field("args"))
	ro.ExtraArgs = d.list(rm, "extra_args")
	if n := rm.Get("kv_events"); n != nil {
		v, _ := d.pyValue(n, rm.Field("kv_events"), 0)
		switch v.(type) {
		case bool, *Map:
			ro.KVEvents = kvEventsValue(v)
		default:
			d.Errorf(n, rm.Field("kv_events"), "expected true, false or a mapping")
		}
	}
	if n := rm.Get("engine"); n != nil {
		if t, ok := d.Str(n, rm.Field("engine")); ok && t != r.Engine.Type {
			d.Errorf(n, rm.Field("engine"), "%q conflicts with the engine type %q; every role uses one engine", t, r.Engine.Type)
		}
	}
	for _, k := range []string{"sidecar", "critical"} {
		if rm.Has(k) {
			d.Errorf(rm.KeyNodes[k], rm.Field(k), notLaunched, "roles.*."+k)
		}
	}
}

// list reads a list value of m (nil when absent or null).
func (d *recipeDecoder) list(m *strictyaml.Mapping, k string) []any {
	n := m.Get(k)
	if n == nil {
		return nil
	}
	v, _ := d.pyValue(n, m.Field(k), 0)
	l, ok := v.([]any)
	if !ok {
		d.Errorf(n, m.Field(k), "expected a list, got %s", strictyaml.KindName(n))
	}
	return l
}

// count reads a non-negative integer field (0 when absent).
func (d *recipeDecoder) count(m *strictyaml.Mapping, k string) int {
	v, ok := m.OptInt(k)
	switch {
	case ok && v < 0:
		d.Errorf(m.Values[k], m.Field(k), "must be >= 0, got %d", v)
		return 0
	case v > 1<<20:
		d.Errorf(m.Values[k], m.Field(k), "unreasonably large: %d", v)
		return 0
	}
	return int(v)
}

// checkTopology decides aggregated or disaggregated as srt-slurm does and
// checks the role counts a launch needs, naming the field as written.
func (d *recipeDecoder) checkTopology(r *Recipe, res, roles *strictyaml.Mapping) {
	written := func(ro *Role) bool { return ro != nil && (ro.nodesSet || ro.workersSet) }
	where, pos := "resources", r.Resources.Pos
	field := func(role, k string) string { return "resources." + role + "_" + k }
	if roles != nil {
		where, pos = "roles", d.Pos(roles.Node)
		field = func(role, k string) string { return "roles." + role + "." + k }
	}
	if pos.File == "" {
		pos = strictyaml.Pos{File: d.File, Line: 1}
	}
	disagg, agg := written(r.Roles.Prefill) || written(r.Roles.Decode), written(r.Roles.Agg)
	switch {
	case disagg && agg:
		d.Errs.Add(pos, where, "give either prefill/decode (disaggregated) or agg (aggregated) workers, not both")
	case !disagg && !agg:
		if res != nil || roles != nil {
			d.Errs.Add(pos, where, "give prefill and decode workers (disaggregated) or agg workers (aggregated)")
		}
	case disagg:
		r.Resources.Disaggregated = true
		p, dc := r.Roles.Prefill, r.Roles.Decode
		if p == nil || !p.nodesSet {
			d.Errs.Add(pos, field(RolePrefill, "nodes"), "required field is missing")
		}
		if p == nil || !p.workersSet {
			d.Errs.Add(pos, field(RolePrefill, "workers"), "required field is missing")
		}
		if dc == nil || !dc.workersSet {
			d.Errs.Add(pos, field(RoleDecode, "workers"), "required field is missing")
		}
		if roles != nil && dc != nil && dc.Colocate && (p == nil || p.GPUs == 0 || dc.GPUs == 0) {
			d.Errs.Add(pos, "roles.decode.nodes", "colocate needs gpus: on both prefill and decode")
		}
	default:
		if !r.Roles.Agg.nodesSet {
			d.Errs.Add(pos, field(RoleAgg, "nodes"), "required field is missing")
		}
	}
}

// services reads schema 2's services list and schema 1's infra section.
func (d *recipeDecoder) services(r *Recipe, m *strictyaml.Mapping) {
	s := &r.Services
	var etcdNode, natsNode string
	var etcdPos, natsPos strictyaml.Pos
	if n := m.Get("services"); n != nil && r.Schema >= SchemaV2 {
		s.Pos = d.Pos(n)
		items, _ := d.Seq(n, "services")
		names := map[string]bool{}
		for i, it := range items {
			f := strictyaml.Index("services", i)
			sm := d.Mapping(it, f, nil)
			if sm == nil {
				continue
			}
			name := sm.ReqStr("name")
			if names[name] {
				d.Errorf(sm.Values["name"], sm.Field("name"), "duplicate service name %q", name)
			}
			names[name] = true
			typ := "generic"
			if t, ok := sm.OptStr("type"); ok {
				typ = t
			}
			allowed := map[string][]string{
				"etcd":            {"name", "type", "placement", "enabled"},
				"nats":            {"name", "type", "placement", "options", "enabled"},
				"mooncake-master": {"name", "type", "placement", "options", "container", "args", "enabled"},
			}[typ]
			if allowed == nil {
				d.Errorf(sm.Node, sm.Field("type"), notLaunched, "service type "+typ)
				continue
			}
			for _, k := range sm.Keys {
				if !slices.Contains(allowed, k) {
					d.Errorf(sm.KeyNodes[k], sm.Field(k), notLaunched, "services[]."+k+" for "+typ)
				}
			}
			if v, ok := sm.OptBool("enabled"); ok && !v {
				d.Errorf(sm.Values["enabled"], sm.Field("enabled"), notLaunched, "disabling "+typ+" (sweepflow starts it as srt-slurm v1.0.68 does)")
			}
			node, npos := NodeInfra, d.Pos(sm.Node)
			if pn := sm.Get("placement"); pn != nil {
				node, npos = d.placement(pn, sm.Field("placement"), NodeInfra, NodeHead, NodeDedicated)
				if node == NodeHead {
					node = NodeInfra // srt-slurm's head and infra node are one node
				}
			}
			switch typ {
			case "etcd":
				etcdNode, etcdPos = node, npos
			case "nats":
				natsNode, natsPos = node, npos
				if on := sm.Get("options"); on != nil {
					if om := d.Mapping(on, sm.Field("options"), []string{"max_payload_mb"}); om != nil {
						s.NATSMaxPayloadMB = d.count(om, "max_payload_mb")
					}
				}
			case "mooncake-master":
				if t := r.Engine.Type; t != "sglang" && t != "vllm" {
					d.Errorf(sm.Node, f, notLaunched, "mooncake-master with engine "+t)
				}
				if node == NodeDedicated {
					d.Errs.Add(npos, sm.Field("placement.node"), notLaunched, "a dedicated mooncake-master node")
				}
				if s.Mooncake != nil {
					d.Errorf(sm.Node, f, "a second mooncake master (backend.mooncake_kv_store gives one already)")
				}
				var opts *strictyaml.Mapping
				if on := sm.Get("options"); on != nil {
					if opts = d.Mapping(on, sm.Field("options"), []string{"store_config"}); opts != nil && opts.Has("store_config") && r.Engine.Type != "vllm" {
						// srt-slurm v1.0.68 configures the store for vLLM only.
						d.Errorf(opts.KeyNodes["store_config"], opts.Field("store_config"), notLaunched, "store_config for engine "+r.Engine.Type)
					}
				}
				s.Mooncake = d.mooncakeMaster(sm, "args", opts)
			}
		}
	}
	if n := m.Get("infra"); n != nil {
		if im := d.Mapping(n, "infra", infraFields); im != nil {
			if etcdNode != "" || natsNode != "" {
				d.Errorf(im.Node, "infra", "give etcd and NATS in services or in infra, not both")
			}
			if s.Pos.File == "" {
				s.Pos = d.Pos(im.Node)
			}
			node := NodeInfra
			if v, ok := im.OptBool("etcd_nats_dedicated_node"); ok && v {
				node = NodeDedicated
			}
			if pn := im.Get("placement"); pn != nil {
				if im.Has("etcd_nats_dedicated_node") {
					d.Errorf(pn, "infra.placement", "cannot be combined with infra.etcd_nats_dedicated_node")
				}
				p, _ := d.placement(pn, "infra.placement", NodeHead, NodeDedicated)
				if p == NodeDedicated {
					node = NodeDedicated
				}
			}
			etcdNode, natsNode = node, node
			s.NATSMaxPayloadMB = d.count(im, "nats_max_payload_mb")
		}
	}
	if etcdNode != "" && natsNode != "" && etcdNode != natsNode {
		pos := etcdPos
		if natsPos.Line > pos.Line {
			pos = natsPos
		}
		d.Errs.Add(pos, "services", "etcd on %s and NATS on %s: sweepflow starts both on one node (srt-slurm's setup_head.py)", etcdNode, natsNode)
	}
	if etcdNode != "" {
		s.InfraNode = etcdNode
	} else if natsNode != "" {
		s.InfraNode = natsNode
	}
}

// frontend reads the frontend section, folding schema 1's dedicated_node and
// orchestrator_placement and schema 2's placement into Placement.
func (d *recipeDecoder) frontend(r *Recipe, m *strictyaml.Mapping) {
	f := &r.Frontend
	n := m.Get("frontend")
	if n == nil {
		return
	}
	fm := d.Mapping(n, "frontend", frontendFields)
	if fm == nil {
		return
	}
	f.Pos = d.Pos(fm.Node)
	if t, ok := fm.OptStr("type"); ok {
		f.Type = t
		if t == FrontendSGLang && r.Schema < SchemaV2 {
			f.Type = FrontendSGLangRouter // schema 1's sglang is the SGLang router
		}
	}
	if v, ok := fm.OptBool("enable_multiple_frontends"); ok {
		f.EnableMultipleFrontends = v
	}
	if fm.Get("num_additional_frontends") != nil {
		f.NumAdditionalFrontends = d.count(fm, "num_additional_frontends")
	}
	optStr(fm, "nginx_container", &f.NginxContainer)
	optBool(fm, "nginx_raise_ulimit", &f.NginxRaiseUlimit)
	optBool(fm, "nginx_session_affinity", &f.NginxSessionAffinity)
	optStr(fm, "nginx_session_affinity_header", &f.NginxSessionAffinityHeader)
	optStr(fm, "nginx_keepalive_timeout", &f.NginxKeepaliveTimeout)
	f.Args = d.anyMap(fm.Get("args"), "frontend.args")
	f.Env = d.envMap(fm.Get("env"), "frontend.env")
	for _, k := range []string{"ctx_router", "gen_router", "server_config_extra"} {
		if v := fm.Get(k); v != nil {
			if f.Other == nil {
				f.Other = NewMap()
			}
			pv, _ := d.pyValue(v, fm.Field(k), 0)
			f.Other.Set(k, pv)
		}
	}
	if fm.Has("worker_selection") {
		d.Errorf(fm.KeyNodes["worker_selection"], "frontend.worker_selection", notLaunched, "frontend.worker_selection")
	}
	if p := d.legacyPlacement(fm, "orchestrator_placement", "dedicated_node", NodeHead, NodeFirstDecode); p != "" {
		f.Placement = p
	}
}

// legacyPlacement folds a block's placement string and dedicated flag
// (schema 1) or its placement.node (schema 2) into one placement.
func (d *recipeDecoder) legacyPlacement(bm *strictyaml.Mapping, placeKey, dedicatedKey string, allowed ...string) string {
	if pn := bm.Get("placement"); pn != nil {
		for _, k := range []string{placeKey, dedicatedKey} {
			if bm.Has(k) {
				d.Errorf(bm.KeyNodes[k], bm.Field(k), "cannot be combined with %s", bm.Field("placement"))
			}
		}
		node, _ := d.placement(pn, bm.Field("placement"), append(allowed, NodeDedicated)...)
		return node
	}
	place, ok := bm.OptStr(placeKey)
	if ok && !slices.Contains(allowed, place) {
		d.Errorf(bm.Values[placeKey], bm.Field(placeKey), "must be one of %s, got %q", strings.Join(allowed, ", "), place)
	}
	if dedicated, _ := bm.OptBool(dedicatedKey); dedicated {
		if ok && place != NodeHead {
			d.Errorf(bm.Values[placeKey], bm.Field(placeKey), "%s requires %s: head (got %q); otherwise the reserved node is never used", bm.Field(dedicatedKey), bm.Field(placeKey), place)
		}
		return NodeDedicated
	}
	return place
}

// benchmark reads the benchmark section; fields the type never reads are
// dropped from a schema-1 recipe (srt-slurm v1.0.68 ignored them) and
// refused in a schema-2 one (srt-slurm 2.x rejects them).
func (d *recipeDecoder) benchmark(r *Recipe, m *strictyaml.Mapping) {
	b := &r.Benchmark
	n := m.Get("benchmark")
	if n == nil {
		return
	}
	bm := d.Mapping(n, "benchmark", benchmarkFields)
	if bm == nil {
		return
	}
	b.Pos = d.Pos(bm.Node)
	optStr(bm, "type", &b.Type)
	typ := b.Type
	reads, known := benchmarkReads[typ]
	for _, k := range bm.Keys {
		if !known || slices.Contains(benchmarkShared, k) || slices.Contains(reads, k) {
			continue
		}
		if r.Schema >= SchemaV2 {
			d.Errorf(bm.KeyNodes[k], bm.Field(k), "is not read by benchmark type %s (srt-slurm 2.x rejects it)", typ)
		}
	}
	read := func(k string) bool {
		return bm.Has(k) && (!known || slices.Contains(reads, k) || slices.Contains(benchmarkShared, k))
	}
	if read("command") {
		b.Command, _ = bm.OptStr("command")
	}
	if read("container_image") {
		b.ContainerImage, _ = bm.OptStr("container_image")
	}
	if read("env") {
		b.Env = d.envMap(bm.Get("env"), "benchmark.env")
	}
	b.AIPerfPackage, _ = bm.OptStr("aiperf_package")
	b.AIPerfArgs = d.anyMap(bm.Get("aiperf_args"), "benchmark.aiperf_args")
	optBool(bm, "colocate_with_frontend", &b.ColocateWithFrontend)
	if p := d.legacyPlacement(bm, "client_placement", "client_dedicated_node", NodeHead, NodeLastDecode); p != "" {
		b.Placement = p
	}
	for _, k := range bm.Keys {
		switch k {
		case "type", "command", "container_image", "env", "aiperf_package", "aiperf_args", "colocate_with_frontend",
			"placement", "client_placement", "client_dedicated_node":
			continue
		}
		if !read(k) {
			continue
		}
		if b.fields == nil {
			b.fields = NewMap()
		}
		v, _ := d.pyValue(bm.Values[k], bm.Field(k), 0)
		b.fields.Set(k, v)
		if b.fields.Pos == nil {
			b.fields.Pos = map[string]strictyaml.Pos{}
		}
		b.fields.Pos[k] = d.Pos(bm.KeyNodes[k])
		if vn := bm.Values[k]; vn.Kind == yaml.ScalarNode && vn.Style == yaml.SingleQuotedStyle {
			if b.fields.SingleQuoted == nil {
				b.fields.SingleQuoted = map[string]bool{}
			}
			b.fields.SingleQuoted[k] = true
		}
	}
	d.benchSettings(b, bm)
}

// benchSettings reads the settings of srt-slurm's own runners as they read
// them, refusing values they refuse. What a run needs and a recipe may
// leave to the launcher (SA-Bench's isl, osl, concurrencies) is checked
// when it is launched.
func (d *recipeDecoder) benchSettings(b *Benchmark, bm *strictyaml.Mapping) {
	val := func(k string) any { v, _ := b.fields.Get(k); return v }
	number := func(k string, dst *float64) {
		switch x := val(k).(type) {
		case nil:
		case float64:
			*dst = x
		case int64:
			*dst = float64(x)
		case string:
			// marshmallow's Float takes a numeric string.
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				d.Errorf(bm.Values[k], bm.Field(k), "expected a number, got %q", x)
			}
			*dst = f
		default:
			d.Errorf(bm.Values[k], bm.Field(k), "expected a number, got %s", strictyaml.KindName(bm.Values[k]))
		}
	}
	if n := bm.Get("aiperf_server_metrics"); n != nil {
		b.AIPerfServerMetrics, _ = bm.OptBool("aiperf_server_metrics")
		if b.Type != "custom" {
			// The custom-benchmark opt-out of cquil11/srt-slurm-nv de59739b;
			// srt-slurm's own runners get their URLs from the runner.
			d.Errorf(n, "benchmark.aiperf_server_metrics", "applies to benchmark.type custom; %q gets its metrics URLs from its runner", b.Type)
		}
	}
	if bm.Get("tokenizer_mode") != nil && b.Type != "sa-bench" {
		d.Errorf(bm.Values["tokenizer_mode"], "benchmark.tokenizer_mode", "is an SA-Bench option; benchmark.type %q does not take it", b.Type)
	}
	switch b.Type {
	case "sa-bench":
		sa := &SABench{ISL: val("isl"), OSL: val("osl"), Concurrencies: val("concurrencies"), ReqRate: val("req_rate"),
			RandomRangeRatio: 0.8, NumPromptsMult: val("num_prompts_mult"), NumWarmupMult: val("num_warmup_mult"),
			CustomTokenizer: val("custom_tokenizer"), UseChatTemplate: true, DatasetName: val("dataset_name"), DatasetPath: val("dataset_path")}
		sa.ConcurrencyList, _ = concurrencyList(sa.Concurrencies)
		number("random_range_ratio", &sa.RandomRangeRatio)
		number("slow_down_sleep_time", &sa.SlowDownSleep)
		number("slow_down_wait_time", &sa.SlowDownWait)
		optBool(bm, "use_chat_template", &sa.UseChatTemplate)
		optBool(bm, "reuse_http_connections", &sa.ReuseHTTPConnections)
		optStr(bm, "tokenizer_mode", &sa.TokenizerMode)
		b.SABench = sa
	case "mooncake-router":
		mr := &MooncakeRouterBench{Workload: "conversation", TTFTThresholdMs: 2000, ITLThresholdMs: 25}
		if w, ok := bm.OptStr("mooncake_workload"); ok && w != "" {
			mr.Workload = w
		}
		switch mr.Workload {
		case "mooncake", "conversation", "synthetic", "toolagent":
		default:
			d.Errorf(bm.Values["mooncake_workload"], "benchmark.mooncake_workload", "must be one of mooncake, conversation, synthetic, toolagent, got %q", mr.Workload)
		}
		for k, dst := range map[string]*int{"ttft_threshold_ms": &mr.TTFTThresholdMs, "itl_threshold_ms": &mr.ITLThresholdMs} {
			if v, ok := bm.OptInt(k); ok {
				if v < 0 {
					d.Errorf(bm.Values[k], bm.Field(k), "must be positive, got %d", v)
				} else if v > 0 { // the runner's `or` keeps the default for 0
					*dst = int(v)
				}
			}
		}
		b.MooncakeRouter = mr
	}
}

// Truthy is Python's bool(v) for the values a recipe can hold (what
// srt-slurm's `x or default` and `if x:` test).
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *Map:
		return x.Len() > 0
	}
	return true
}

// concurrencyList is BenchmarkConfig.get_concurrency_list: "4x8", a list, or
// one value.
func concurrencyList(v any) ([]int, error) {
	var parts []any
	switch x := v.(type) {
	case nil:
		return nil, nil
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
		switch y := p.(type) {
		case int64:
			out = append(out, int(y))
		case string:
			n, err := strconv.ParseInt(strings.TrimSpace(y), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", y)
			}
			out = append(out, int(n))
		default:
			return nil, fmt.Errorf("%v is not an integer", y)
		}
	}
	return out, nil
}

// dynamo reads how Dynamo is installed: schema 2's dynamo.source or schema
// 1's version / wheel / hash / top_of_tree, which fold into the same Source.
func (d *recipeDecoder) dynamo(r *Recipe, m *strictyaml.Mapping) {
	dy := &r.Dynamo
	n := m.Get("dynamo")
	if n == nil {
		return
	}
	dm := d.Mapping(n, "dynamo", dynamoFields)
	if dm == nil {
		return
	}
	dy.Pos = d.Pos(dm.Node)
	optBool(dm, "install", &dy.Install)
	optStr(dm, "request_plane", &dy.RequestPlane)
	optStr(dm, "event_plane", &dy.EventPlane)
	if dm.Has("sidecar") {
		d.Errorf(dm.KeyNodes["sidecar"], "dynamo.sidecar", notLaunched, "dynamo.sidecar")
	}
	var legacy []string
	hash, hasHash := dm.OptStr("hash")
	wheel, hasWheel := dm.OptStr("wheel")
	version, hasVersion := dm.OptStr("version")
	tot, _ := dm.OptBool("top_of_tree")
	patches := d.list(dm, "cargo_patches")
	if hasHash {
		legacy = append(legacy, "hash")
	}
	if tot {
		legacy = append(legacy, "top_of_tree")
	}
	if hasWheel {
		legacy = append(legacy, "wheel")
	}
	if sn := dm.Get("source"); sn != nil {
		if r.Schema < SchemaV2 {
			d.Errorf(sn, "dynamo.source", "is a schema-2 field: add `schema: 2` at the top of the recipe")
		}
		for _, k := range append(legacy, "version", "cargo_patches") {
			if dm.Has(k) {
				d.Errorf(dm.KeyNodes[k], "dynamo."+k, "cannot be combined with dynamo.source")
			}
		}
		sm := d.Mapping(sn, "dynamo.source", []string{SourcePyPI, SourceWheel, SourceRev, "patches"})
		if sm == nil {
			return
		}
		var kinds []string
		for _, k := range []string{SourcePyPI, SourceWheel, SourceRev} {
			if v, ok := sm.OptStr(k); ok {
				kinds = append(kinds, k)
				dy.Source = DynamoSource{Kind: k, Value: v}
			}
		}
		if len(kinds) != 1 {
			d.Errorf(sm.Node, "dynamo.source", "give exactly one of pypi, wheel and rev, got %d", len(kinds))
		}
		if pn := sm.Get("patches"); pn != nil {
			if dy.Source.Kind != SourceRev {
				d.Errorf(pn, "dynamo.source.patches", "needs a source build: give dynamo.source.rev")
			}
			dy.Source.Patches = d.list(sm, "patches")
		}
	} else {
		switch {
		case len(legacy) > 1:
			d.Errorf(dm.Node, "dynamo", "give only one of hash, top_of_tree and wheel")
		case hasHash:
			dy.Source = DynamoSource{Kind: SourceRev, Value: hash, Patches: patches}
		case tot:
			dy.Source = DynamoSource{Kind: SourceTopOfTree}
		case hasWheel:
			dy.Source = DynamoSource{Kind: SourceWheel, Value: wheel}
		case hasVersion:
			dy.Source = DynamoSource{Kind: SourcePyPI, Value: version}
		}
		if patches != nil && !hasHash {
			d.Errorf(dm.Values["cargo_patches"], "dynamo.cargo_patches", "requires a source build: set dynamo.hash to a commit")
		}
	}
	if dy.Source.Kind == SourceWheel {
		w := dy.Source.Value
		if strings.TrimSpace(w) == "" || strings.HasSuffix(path.Base(w), ".whl") || strings.Contains(w, "/") {
			d.Errs.Add(dy.Pos, "dynamo.wheel", "must be a package version like 1.2.0.dev20260426, not a file name")
		}
	}
}

func (d *recipeDecoder) healthCheck(r *Recipe, m *strictyaml.Mapping) {
	r.HealthCheck.Pos = strictyaml.Pos{File: d.File, Line: 1}
	n := m.Get("health_check")
	if n == nil {
		return
	}
	r.HealthCheck.Pos = d.Pos(m.KeyNodes["health_check"])
	hm := d.Mapping(n, "health_check", healthFields)
	if hm == nil {
		return
	}
	for _, k := range healthFields {
		v, ok := hm.OptInt(k)
		if !ok {
			continue
		}
		if v <= 0 {
			d.Errorf(hm.Values[k], hm.Field(k), "must be > 0, got %d", v)
		}
		if k == "max_attempts" {
			r.HealthCheck.MaxAttempts = int(v)
		} else {
			r.HealthCheck.IntervalSeconds = int(v)
		}
	}
}

func (d *recipeDecoder) slurm(r *Recipe, m *strictyaml.Mapping) {
	n := m.Get("slurm")
	if n == nil {
		return
	}
	sm := d.Mapping(n, "slurm", slurmFields)
	if sm == nil {
		return
	}
	if tl := sm.Get("time_limit"); tl != nil {
		if v, ok := d.Scalar(tl, sm.Field("time_limit")); ok {
			r.Slurm.TimeLimit = fmt.Sprint(v)
			if _, err := ParseSlurmTime(r.Slurm.TimeLimit); err != nil {
				d.Errorf(tl, sm.Field("time_limit"), "%v", err)
			}
		}
	}
	r.Slurm.Account, _ = sm.OptStr("account")
	r.Slurm.Partition, _ = sm.OptStr("partition")
}

// section reads a section sweepflow launches nothing from; on says whether
// its values switch something on.
func (d *recipeDecoder) section(m *strictyaml.Mapping, k string, on func(*Map) bool) Section {
	s := Section{Values: d.anyMap(m.Get(k), k)}
	if s.Values != nil {
		s.Pos, s.On = d.Pos(m.KeyNodes[k]), on(s.Values)
	}
	return s
}

// Limits srt-slurm's _validate_dcgm_power checks the telemetry block against.
const (
	powerMaxSampleGap      = 3.0 // seconds; a longer collector period fails every window
	powerCycleTimeoutGrace = 1.0 // seconds added to each collect cycle's deadline
	// dcgmExporterCommand is srt-slurm's DCGM_EXPORTER_COMMAND_TEMPLATE: 100 ms
	// NVML sampling, the exporter listening on the recipe's port.
	dcgmExporterCommand = "dcgm-exporter --collect-interval=100 --address :{port}"
)

var (
	telemetryFields = []string{"enabled", "provider", "dcgm_exporter", "default_frequency", "storage_subdir", "required",
		"startup_timeout_seconds", "request_timeout_seconds", "collector_join_timeout_seconds"}
	dcgmExporterFields = []string{"container_image", "port", "command"}
)

// telemetry reads the telemetry section (srt-slurm v1.0.68 TelemetryConfig,
// provider as the power lineage InferenceX pins names it). Only an enabled
// dcgm-power block launches anything; it is checked as srt-slurm's
// _validate_dcgm_power checks it (the parts that need the benchmark and
// services in checkRecipe), so a run that could never publish is refused
// before nodes are requested.
func (d *recipeDecoder) telemetry(r *Recipe, m *strictyaml.Mapping) {
	n := m.Get("telemetry")
	r.telemetry = d.anyMap(n, "telemetry")
	if n == nil {
		return
	}
	tm := d.Mapping(n, "telemetry", telemetryFields)
	if tm == nil {
		return
	}
	if on, _ := tm.OptBool("enabled"); !on {
		return
	}
	t := &Telemetry{Pos: d.Pos(m.KeyNodes["telemetry"]), Interval: 1, StorageSubdir: "power", StartupTimeout: 30, RequestTimeout: 2}
	if p, ok := tm.OptStr("provider"); ok && p != "dcgm-power" {
		d.Errorf(tm.Values["provider"], "telemetry.provider", "%q is not launched by sweepflow yet (dcgm-power)", p)
	}
	if !tm.Has("dcgm_exporter") {
		d.Errs.Add(t.Pos, "telemetry.dcgm_exporter", "is required when telemetry is enabled")
	} else if ex := d.Mapping(tm.Values["dcgm_exporter"], "telemetry.dcgm_exporter", dcgmExporterFields); ex != nil {
		t.ExporterImage, _ = ex.OptStr("container_image")
		if t.ExporterImage == "" {
			d.Errs.Add(d.Pos(ex.Node), "telemetry.dcgm_exporter.container_image", "must be non-empty")
		}
		port, _ := ex.OptInt("port")
		if port < 1 || port > 65535 {
			d.Errs.Add(d.Pos(ex.Node), "telemetry.dcgm_exporter.port", "must be in 1..65535")
		}
		t.ExporterPort = int(port)
		// resolve_exporter_command: the recipe's command (with {port}) or the template.
		cmd := dcgmExporterCommand
		if c, _ := ex.OptStr("command"); c != "" {
			cmd = c
		}
		t.ExporterCommand = strings.ReplaceAll(cmd, "{port}", strconv.Itoa(t.ExporterPort))
	}
	optNum := func(k string) (float64, bool) {
		if n := tm.Get(k); n != nil {
			v, _, ok := d.Number(n, tm.Field(k))
			return v, ok
		}
		return 0, false
	}
	seconds := func(k string, dst *float64) {
		v, ok := optNum(k)
		if !ok {
			return
		}
		if math.IsInf(v, 0) || math.IsNaN(v) || v <= 0 {
			d.Errorf(tm.Values[k], tm.Field(k), "must be finite and positive")
		}
		*dst = v
	}
	seconds("default_frequency", &t.Interval)
	seconds("startup_timeout_seconds", &t.StartupTimeout)
	seconds("request_timeout_seconds", &t.RequestTimeout)
	if t.Interval > powerMaxSampleGap {
		d.Errorf(tm.Values["default_frequency"], "telemetry.default_frequency", "%s exceeds the %gs max sample gap srt-slurm's power validator accepts",
			strconv.FormatFloat(t.Interval, 'g', -1, 64), powerMaxSampleGap)
	}
	// v1.0.68 defaults the join budget to two full collect cycles plus 2 s
	// and requires more than two cycles; the power lineage InferenceX pins
	// (edwingao28/srt-slurm, where provider comes from) only requires more
	// than one request timeout, which its recipes' 10 s with 2 s requests
	// meet. That lineage's check is the one followed.
	t.JoinTimeout = 2*(2*t.RequestTimeout+powerCycleTimeoutGrace) + 2
	if v, ok := optNum("collector_join_timeout_seconds"); ok {
		if math.IsInf(v, 0) || math.IsNaN(v) || v <= t.RequestTimeout {
			d.Errorf(tm.Values["collector_join_timeout_seconds"], "telemetry.collector_join_timeout_seconds", "must be finite and greater than telemetry.request_timeout_seconds")
		}
		t.JoinTimeout = v
	}
	optStr(tm, "storage_subdir", &t.StorageSubdir)
	if !safeSubpath(t.StorageSubdir) {
		d.Errorf(tm.Values["storage_subdir"], "telemetry.storage_subdir", "must be a safe relative path below the run log directory")
	}
	optBool(tm, "required", &t.Required)
	r.Telemetry = t
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

// checkRecipe applies srt-slurm's cross-field checks that need defaults.
func (d *recipeDecoder) checkRecipe(r *Recipe, m *strictyaml.Mapping) {
	e := r.Engine
	switch e.Type {
	case "vllm":
		if e.DPLaunchMode != "per_node" && e.DPLaunchMode != "per_gpu" {
			d.Errs.Add(e.Pos, "engine.dp_launch_mode", "must be per_node or per_gpu, got %q", e.DPLaunchMode)
		}
	}
	switch r.Dynamo.RequestPlane {
	case "nats", "tcp", "http":
	default:
		d.Errs.Add(r.Dynamo.Pos, "dynamo.request_plane", "must be nats, tcp or http, got %q", r.Dynamo.RequestPlane)
	}
	switch r.Dynamo.EventPlane {
	case "", "nats", "zmq":
	default:
		d.Errs.Add(r.Dynamo.Pos, "dynamo.event_plane", "must be nats or zmq, got %q", r.Dynamo.EventPlane)
	}
	if t := r.Telemetry; t != nil {
		// Power samples are matched to SA-Bench's measurement windows, on
		// the host that runs the head.
		switch sa := r.Benchmark.SABench; {
		case sa == nil:
			d.Errs.Add(t.Pos, "telemetry", "requires benchmark.type: sa-bench (power samples are matched to SA-Bench's measurement windows)")
		case r.Services.InfraDedicated():
			d.Errs.Add(t.Pos, "telemetry", "requires etcd and NATS on the head node, not a dedicated one (a dedicated infra node moves the head off the host that collects the samples)")
		default:
			list, err := concurrencyList(sa.Concurrencies)
			seen := map[int]bool{}
			for _, c := range list {
				if c <= 0 || seen[c] {
					list = nil
					break
				}
				seen[c] = true
			}
			if err != nil || len(list) == 0 {
				d.Errs.Add(r.Benchmark.fields.Pos["concurrencies"], "benchmark.concurrencies", "telemetry requires a non-empty list of unique positive concurrencies")
			}
		}
	}
}

// optStr and optBool overwrite *dst (a default) when key is written.
func optStr(m *strictyaml.Mapping, key string, dst *string) {
	if v, ok := m.OptStr(key); ok {
		*dst = v
	}
}

func optBool(m *strictyaml.Mapping, key string, dst *bool) {
	if v, ok := m.OptBool(key); ok {
		*dst = v
	}
}
