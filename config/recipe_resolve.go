package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(canonicalRecipe{r}); err != nil {
		// Every value in a typed recipe encodes; a failure is a bug.
		panic("config: canonical recipe: " + err.Error())
	}
	return b.Bytes()
}

// ResolvedDigest is the sha256 (hex) of Canonical: what a point's identity
// and its launch check say the recipe resolved to when it was planned.
func (r *Recipe) ResolvedDigest() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

// canonicalRecipe is the part of a Recipe that launches.
type canonicalRecipe struct{ r *Recipe }

func (c canonicalRecipe) MarshalJSON() ([]byte, error) {
	r := c.r
	type role struct {
		Name      string
		Nodes     int
		Colocate  bool
		Workers   int
		GPUs      int
		Env       *Map
		Args      *Map
		ExtraArgs list
		KVEvents  value
	}
	roles := []role{}
	for _, ro := range r.Roles.All() {
		roles = append(roles, role{ro.Name, ro.Nodes, ro.Colocate, ro.Workers, ro.GPUs, ro.Env, ro.Args, ro.ExtraArgs, value{ro.KVEvents}})
	}
	e := r.Engine
	var mooncake any
	if mc := r.Services.Mooncake; mc != nil {
		mooncake = struct {
			Container   string
			Args        list
			StoreConfig *Map
		}{mc.Container, mc.Args, mc.StoreConfig}
	}
	f, b, dy, res := r.Frontend, r.Benchmark, r.Dynamo, r.Resources
	return json.Marshal(struct {
		Name      string
		Model     RecipeModel
		Identity  *Map
		Resources any
		Roles     []role
		Engine    any
		Services  any
		Frontend  any
		Benchmark any
		Dynamo    any
		Health    [2]int
		Slurm     Slurm
		Env       *Map
		Srun      *Map
		Sbatch    *Map
		Mounts    []string
		Setup     string
		ConfigDmp bool
		Other     []*Map
	}{
		Name: r.Name, Model: r.Model, Identity: r.Identity,
		Resources: []any{res.GPUType, res.GPUsPerNode, res.SpreadWorkers, res.HetJobs, res.PackMultinodeWorkers, res.Disaggregated},
		Roles:     roles,
		Engine: []any{e.Type, value{e.Connector}, e.SetCUDAVisibleDevices, e.DPLaunchMode, e.AllowPrefillDecodeColocation,
			e.AllowPrefillDecodeColocationAcrossNodes, e.PublishEventsAndMetrics, e.SequentialNodeStart, e.NUMAMemoryBind, e.GPUType, e.Other},
		Services: []any{r.Services.InfraNode, r.Services.NATSMaxPayloadMB, mooncake},
		Frontend: []any{f.Type, f.Placement, f.EnableMultipleFrontends, f.NumAdditionalFrontends, f.NginxContainer, f.NginxRaiseUlimit,
			f.NginxSessionAffinity, f.NginxSessionAffinityHeader, f.NginxKeepaliveTimeout, f.Args, f.Env, f.Other},
		Benchmark: []any{b.Type, b.Placement, b.ColocateWithFrontend, b.Command, b.ContainerImage, b.Env, b.AIPerfPackage, b.AIPerfArgs, b.Fields},
		Dynamo:    []any{dy.Install, dy.Source.Kind, dy.Source.Value, list(dy.Source.Patches), dy.RequestPlane, dy.EventPlane},
		Health:    [2]int{r.HealthCheck.MaxAttempts, r.HealthCheck.IntervalSeconds},
		Slurm:     r.Slurm, Env: r.Environment, Srun: r.SrunOptions, Sbatch: r.SbatchDirectives,
		Mounts: r.ExtraMounts, Setup: r.SetupScript, ConfigDmp: r.EnableConfigDump,
		Other: []*Map{r.ContainerMounts, r.Profiling, r.Observability, r.Telemetry, r.Output, r.Reporting},
	})
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
