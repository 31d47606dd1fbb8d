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
	r.Benchmark = Benchmark{Type: "manual", Placement: NodeHead, ColocateWithFrontend: true, AIPerfServerMetrics: true}
	r.Dynamo = Dynamo{Install: true, RequestPlane: "tcp"}
	r.HealthCheck = HealthCheck{MaxAttempts: defaultMaxAttempts, IntervalSeconds: defaultIntervalSeconds}
	r.EnableConfigDump = true
}

// resolve completes the typed recipe after decoding: defaults that depend
// on what was written.
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
	}
	if mc := r.Services.Mooncake; mc != nil && d.mooncakeEnv.Len() > 0 {
		mc.Env = d.mooncakeEnv
	}
}

// roleEnv is a role's environment as the resolved recipe counts it: schema
// 1's Mooncake worker environment is part of it, as srt-slurm's migration
// writes it (Mooncake's values win, as they did at launch).
func (r *Recipe) roleEnv(ro *Role) *Map {
	mc := r.Services.Mooncake
	if mc == nil || mc.Env.Len() == 0 {
		return ro.Env
	}
	env := ro.Env.Clone()
	if env == nil {
		env = NewMap()
	}
	for _, k := range mc.Env.Keys {
		env.Set(k, mc.Env.Vals[k])
	}
	return env
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
	add("identity", value{r.Identity})
	add("resources", []any{res.GPUType, res.GPUsPerNode, res.SpreadWorkers, res.HetJobs, res.PackMultinodeWorkers, res.Disaggregated})
	for _, ro := range r.Roles.All() {
		p := "roles." + ro.Name + "."
		add(p+"topology", []any{ro.Nodes, ro.Colocate, ro.Workers, ro.GPUs})
		add(p+"env", value{r.roleEnv(ro)})
		add(p+"args", value{ro.Args})
		add(p+"extra_args", list(ro.ExtraArgs))
		add(p+"kv_events", value{ro.KVEvents})
	}
	add("engine", []any{e.Type, value{e.Connector}, e.SetCUDAVisibleDevices, e.DPLaunchMode, e.AllowPrefillDecodeColocation,
		e.AllowPrefillDecodeColocationAcrossNodes, e.PublishEventsAndMetrics, e.SequentialNodeStart, e.NUMAMemoryBind, e.GPUType, value{e.Other}})
	add("services.etcd_nats", []any{r.Services.InfraNode, r.Services.NATSMaxPayloadMB})
	if mc := r.Services.Mooncake; mc != nil {
		add("services.mooncake-master", []any{mc.Container, list(mc.Args), value{mc.StoreConfig}})
	}
	add("frontend", []any{f.Type, f.Placement, f.EnableMultipleFrontends, f.NumAdditionalFrontends, f.NginxContainer, f.NginxRaiseUlimit,
		f.NginxSessionAffinity, f.NginxSessionAffinityHeader, f.NginxKeepaliveTimeout, value{f.Other}})
	add("frontend.args", value{f.Args})
	add("frontend.env", value{f.Env})
	add("benchmark", []any{bm.Type, bm.Placement, bm.ColocateWithFrontend, bm.Command, bm.ContainerImage, bm.AIPerfPackage})
	add("benchmark.env", value{bm.Env})
	add("benchmark.aiperf_args", value{bm.AIPerfArgs})
	add("benchmark.fields", value{bm.fields})
	add("dynamo", []any{dy.Install, dy.Source.Kind, dy.Source.Value, list(dy.Source.Patches), dy.RequestPlane, dy.EventPlane})
	add("health_check", []int{r.HealthCheck.MaxAttempts, r.HealthCheck.IntervalSeconds})
	add("slurm", []string{r.Slurm.TimeLimit, r.Slurm.Account, r.Slurm.Partition})
	add("environment", value{r.Environment})
	add("srun_options", value{r.SrunOptions})
	add("sbatch_directives", value{r.SbatchDirectives})
	add("extra_mount", r.ExtraMounts)
	add("setup_script", r.SetupScript)
	add("enable_config_dump", r.EnableConfigDump)
	// Sections hashed as written (the telemetry one whether or not it is
	// enabled), in the order recipes have always been hashed.
	for _, o := range []struct {
		name string
		m    *Map
	}{{"container_mounts", r.ContainerMounts.Values}, {"profiling", r.Profiling.Values}, {"observability", r.Observability.Values},
		{"telemetry", r.telemetry}, {"output", r.Output.Values}, {"reporting", r.Reporting.Values}} {
		add(o.name, value{o.m})
	}
	return parts
}

// list and value encode recipe values with their Python types kept (a *Map
// as its pairs, with 1 and 1.0 apart).
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
