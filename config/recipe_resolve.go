package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// srt-slurm's defaults (v1.0.68's, which the recipes sweepflow launches were
// written against), in the one place they live.
const (
	defaultDynamoVersion    = "0.8.0"
	defaultNginxContainer   = "nginx:1.27.4"
	defaultAffinityHeader   = "X-Dynamo-Session-ID"
	defaultKeepaliveTimeout = "600s"
	defaultMaxAttempts      = 180
	defaultIntervalSeconds  = 10
)

// setRecipeDefaults gives r srt-slurm's defaults before the document is
// decoded over them.
func setRecipeDefaults(r *Recipe) {
	r.Engine = Engine{Connector: "nixl", DPLaunchMode: "per_node"}
	r.Services = Services{InfraNode: NodeInfra}
	r.Frontend = Frontend{Type: FrontendDynamo, Placement: NodeHead, EnableMultipleFrontends: true, NumAdditionalFrontends: 9,
		NginxContainer: defaultNginxContainer, NginxSessionAffinityHeader: defaultAffinityHeader, NginxKeepaliveTimeout: defaultKeepaliveTimeout}
	r.Benchmark = Benchmark{Type: "manual", Placement: NodeHead, ColocateWithFrontend: true}
	r.Dynamo = Dynamo{Install: true, RequestPlane: "tcp"}
	r.HealthCheck = HealthCheck{MaxAttempts: defaultMaxAttempts, IntervalSeconds: defaultIntervalSeconds}
	r.EnableConfigDump = true
}

// resolve completes the typed recipe after decoding: defaults that depend
// on what was written, the Mooncake environment folded into the roles (as
// srt-slurm injected it and as its migration writes it), and the phase-A
// schema-1 views.
func (d *recipeDecoder) resolve(r *Recipe) {
	if r.Engine.Type != "vllm" {
		r.Engine.Connector, r.Engine.DPLaunchMode = nil, ""
	}
	if r.Dynamo.Source.Kind == "" {
		r.Dynamo.Source = DynamoSource{Kind: SourcePyPI, Value: defaultDynamoVersion}
	}
	for _, ro := range r.Roles.All() {
		if ro.Args == nil {
			ro.Args = NewMap()
		}
		if d.mooncakeEnv.Len() > 0 {
			if ro.Env == nil {
				ro.Env = NewMap()
			}
			for _, k := range d.mooncakeEnv.Keys {
				ro.Env.Set(k, d.mooncakeEnv.Vals[k]) // Mooncake's values win, as at launch
			}
		}
	}

	res := &r.Resources
	if p := r.Roles.Prefill; p != nil {
		res.PrefillNodes, res.PrefillWorkers, res.GPUsPerPrefill = p.Nodes, p.Workers, p.GPUs
	}
	if dc := r.Roles.Decode; dc != nil {
		res.DecodeNodes, res.DecodeWorkers, res.GPUsPerDecode = dc.Nodes, dc.Workers, dc.GPUs
	}
	if a := r.Roles.Agg; a != nil {
		res.AggNodes, res.AggWorkers, res.GPUsPerAgg = a.Nodes, a.Workers, a.GPUs
	}
	r.Infra = Infra{EtcdNATSDedicatedNode: r.Services.InfraDedicated(), NATSMaxPayloadMB: r.Services.NATSMaxPayloadMB}
	// The draft length of the role that decodes, else of prefill.
	for _, ro := range []*Role{r.Roles.Decode, r.Roles.Agg, r.Roles.Prefill} {
		if ro == nil || r.Backend.DraftTokens != 0 {
			continue
		}
		if v, ok := ro.Args.Get("speculative-num-draft-tokens"); ok {
			if n, ok := v.(int64); ok {
				r.Backend.DraftTokens = int(n)
			}
		}
	}
}

// Canonical is the resolved recipe as bytes: equal for two files that
// launch the same thing whichever schema spells them, different when
// anything that launches differs. Positions, file names, the spelling and
// the --set overrides themselves (their effect is in) are left out.
func (r *Recipe) Canonical() []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, p := range r.canonicalParts() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`["` + p.name + `",`)
		b.Write(p.json)
		b.WriteByte(']')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// ResolvedDigest is the sha256 (hex) of Canonical: what a point's identity
// and its launch check say the recipe resolved to when it was planned.
func (r *Recipe) ResolvedDigest() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

// RecipeDiff names the first part in which two resolved recipes differ,
// with both values; "" when they resolve alike.
func RecipeDiff(a, b *Recipe) string {
	pa, pb := a.canonicalParts(), b.canonicalParts()
	short := func(j []byte) string {
		if len(j) > 160 {
			return string(j[:160]) + "..."
		}
		return string(j)
	}
	for i := 0; i < max(len(pa), len(pb)); i++ {
		switch {
		case i >= len(pa):
			return fmt.Sprintf("%s: only in the second", pb[i].name)
		case i >= len(pb):
			return fmt.Sprintf("%s: only in the first", pa[i].name)
		case pa[i].name != pb[i].name:
			return fmt.Sprintf("%s in the first, %s in the second", pa[i].name, pb[i].name)
		case !bytes.Equal(pa[i].json, pb[i].json):
			return fmt.Sprintf("%s: %s vs %s", pa[i].name, short(pa[i].json), short(pb[i].json))
		}
	}
	return ""
}

type canonicalPart struct {
	name string
	json []byte
}

// canonicalParts is the part of a Recipe that launches, named by where a
// recipe writes it, with recipe values encoded with their Python types.
func (r *Recipe) canonicalParts() []canonicalPart {
	var parts []canonicalPart
	add := func(name string, v any) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			// Every value in a typed recipe encodes; a failure is a bug.
			panic("config: canonical recipe: " + err.Error())
		}
		parts = append(parts, canonicalPart{name, bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
	}
	res, e, f, bm, dy := r.Resources, r.Engine, r.Frontend, r.Benchmark, r.Dynamo
	add("name", r.Name)
	add("model", []string{r.Model.Path, r.Model.Container, r.Model.Precision})
	add("identity", r.Identity)
	add("resources", []any{res.GPUType, res.GPUsPerNode, res.SpreadWorkers, res.HetJobs, res.PackMultinodeWorkers, res.Disaggregated})
	for _, ro := range r.Roles.All() {
		p := "roles." + ro.Name + "."
		add(p+"topology", []any{ro.Nodes, ro.Colocate, ro.Workers, ro.GPUs})
		add(p+"env", ro.Env)
		add(p+"args", ro.Args)
		add(p+"extra_args", list(ro.ExtraArgs))
		add(p+"kv_events", value{ro.KVEvents})
	}
	add("engine", []any{e.Type, value{e.Connector}, e.SetCUDAVisibleDevices, e.DPLaunchMode, e.AllowPrefillDecodeColocation,
		e.AllowPrefillDecodeColocationAcrossNodes, e.PublishEventsAndMetrics, e.SequentialNodeStart, e.NUMAMemoryBind, e.GPUType, e.Other})
	add("services.etcd_nats", []any{r.Services.InfraNode, r.Services.NATSMaxPayloadMB})
	if mc := r.Services.Mooncake; mc != nil {
		add("services.mooncake-master", []any{mc.Container, list(mc.Args), mc.StoreConfig})
	}
	add("frontend", []any{f.Type, f.Placement, f.EnableMultipleFrontends, f.NumAdditionalFrontends, f.NginxContainer, f.NginxRaiseUlimit,
		f.NginxSessionAffinity, f.NginxSessionAffinityHeader, f.NginxKeepaliveTimeout, f.Other})
	add("frontend.args", f.Args)
	add("frontend.env", f.Env)
	add("benchmark", []any{bm.Type, bm.Placement, bm.ColocateWithFrontend, bm.Command, bm.ContainerImage, bm.AIPerfPackage})
	add("benchmark.env", bm.Env)
	add("benchmark.aiperf_args", bm.AIPerfArgs)
	add("benchmark.fields", bm.Fields)
	add("dynamo", []any{dy.Install, dy.Source.Kind, dy.Source.Value, list(dy.Source.Patches), dy.RequestPlane, dy.EventPlane})
	add("health_check", []int{r.HealthCheck.MaxAttempts, r.HealthCheck.IntervalSeconds})
	add("slurm", []string{r.Slurm.TimeLimit, r.Slurm.Account, r.Slurm.Partition})
	add("environment", r.Environment)
	add("srun_options", r.SrunOptions)
	add("sbatch_directives", r.SbatchDirectives)
	add("extra_mount", r.ExtraMounts)
	add("setup_script", r.SetupScript)
	add("enable_config_dump", r.EnableConfigDump)
	for _, o := range []struct {
		name string
		m    *Map
	}{{"container_mounts", r.ContainerMounts}, {"profiling", r.Profiling}, {"observability", r.Observability},
		{"telemetry", r.Telemetry}, {"output", r.Output}, {"reporting", r.Reporting}} {
		add(o.name, o.m)
	}
	return parts
}

// list and value encode recipe values with their Python types kept.
type (
	list  []any
	value struct{ v any }
)

func (l list) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	err := writeCanonical(&b, []any(l))
	return b.Bytes(), err
}

func (v value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	err := writeCanonical(&b, v.v)
	return b.Bytes(), err
}
