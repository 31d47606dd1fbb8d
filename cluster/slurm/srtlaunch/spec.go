package srtlaunch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
)

// spec is a typed recipe as this launcher renders it: the recipe itself,
// what its footprint derives (workers and GPUs per role, nodes), and
// copies of the per-role settings a render rewrites (synthetic acceptance).
// The recipe is read only through config's types; config decodes either
// schema and applies srt-slurm's defaults.
type spec struct {
	*config.Recipe

	// frontendType is the frontend as srt-slurm v1.0.68 names it (and
	// exports it as SRTCTL_FRONTEND_TYPE): dynamo, sglang (the SGLang
	// router) or vllm.
	frontendType string

	gpusPerNode                               int
	nodesNeeded                               int
	prefillWorkers, decodeWorkers, aggWorkers int
	gpusPerPrefill, gpusPerDecode, gpusPerAgg int

	// modeEnv and modeConfig are the roles' environments (nil when a role
	// has no block) and engine args, by srt-slurm's mode (prefill, decode,
	// agg), copied so a render may rewrite them.
	modeEnv    map[string]*config.Map
	modeConfig map[string]*config.Map
}

// modeBlocks maps srt-slurm's worker modes to the typed roles.
var modeBlocks = []struct{ mode, role string }{
	{"prefill", config.RolePrefill},
	{"decode", config.RoleDecode},
	{"agg", config.RoleAgg},
}

// notSupported is the one-line refusal of what srt-slurm launches and this
// launcher does not render yet; alternatives name what it does render.
func notSupported(r *config.Recipe, what string, alternatives ...string) error {
	msg := fmt.Sprintf("recipe %s: %s is not supported by the engine launcher yet", r.Display, what)
	if len(alternatives) > 0 {
		msg += " (" + strings.Join(alternatives, ", ") + ")"
	}
	return errors.New(msg)
}

// parseSpec checks that the launcher renders everything the recipe asks
// for and derives what the render needs.
func parseSpec(r *config.Recipe) (*spec, error) {
	for _, sec := range []struct {
		name string
		s    config.Section
	}{{"container_mounts", r.ContainerMounts}, {"profiling.enabled", r.Profiling}, {"observability.enabled", r.Observability}} {
		if sec.s.On {
			return nil, notSupported(r, sec.name)
		}
	}
	res := r.Resources
	switch {
	case res.HetJobs != nil && *res.HetJobs:
		return nil, notSupported(r, "resources.het_jobs")
	case res.PackMultinodeWorkers:
		return nil, notSupported(r, "resources.pack_multinode_workers")
	}
	for _, ro := range r.Roles.All() {
		if len(ro.ExtraArgs) > 0 {
			return nil, notSupported(r, "roles."+ro.Name+".extra_args")
		}
	}
	if r.Name == "" {
		return nil, fmt.Errorf("recipe %s: name is missing", r.Display)
	}
	if r.Model.Path == "" {
		return nil, fmt.Errorf("recipe %s: model.path is missing", r.Display)
	}
	fp, err := r.Footprint(0)
	if err != nil {
		return nil, err
	}
	s := &spec{Recipe: r, gpusPerNode: res.GPUsPerNode, nodesNeeded: fp.Nodes,
		modeEnv: map[string]*config.Map{}, modeConfig: map[string]*config.Map{}}
	if res.Disaggregated {
		s.prefillWorkers, s.decodeWorkers = r.Roles.Prefill.Workers, r.Roles.Decode.Workers
		s.gpusPerPrefill, s.gpusPerDecode = fp.GPUsPerPrefill, fp.GPUsPerDecode
	} else {
		s.aggWorkers = r.Roles.Agg.NumWorkers()
		s.gpusPerAgg = fp.GPUsPerPrefill
	}
	for _, b := range modeBlocks {
		s.modeConfig[b.mode] = config.NewMap()
		if ro := r.Roles.Get(b.role); ro != nil {
			s.modeEnv[b.mode] = ro.Env.Clone()
			s.modeConfig[b.mode] = ro.Args.Clone()
		}
	}

	switch r.Frontend.Type {
	case config.FrontendDynamo, "vllm":
		s.frontendType = r.Frontend.Type
	case config.FrontendSGLangRouter:
		s.frontendType = "sglang" // srt-slurm v1.0.68's name for its router
	default:
		return nil, notSupported(r, fmt.Sprintf("frontend.type %q", r.Frontend.Type), config.FrontendDynamo, config.FrontendSGLangRouter, "vllm")
	}
	if r.Benchmark.Type == "custom" && r.Benchmark.Command == "" {
		return nil, fmt.Errorf("recipe %s: benchmark.command is required for benchmark.type custom", r.Display)
	}
	if runner, ok := benchRunners[r.Benchmark.Type]; ok {
		if err := runner.validate(r.Benchmark); err != nil {
			return nil, fmt.Errorf("recipe %s: %v", r.Display, err)
		}
	} else if r.Benchmark.Type != "custom" && r.Benchmark.Type != "manual" {
		return nil, notSupported(r, fmt.Sprintf("benchmark.type %q", r.Benchmark.Type), benchTypes()...)
	}
	switch r.Engine.Type {
	case "sglang":
	case "trtllm":
		// srt-slurm starts same-node workers in batches from a thread pool when
		// this is set, so its launch order is not fixed; we do not render that.
		if r.Engine.SequentialNodeStart != 0 {
			return nil, notSupported(r, "backend.sequential_node_start")
		}
	case "vllm":
		if err := s.checkVLLM(); err != nil {
			return nil, err
		}
	default:
		return nil, notSupported(r, fmt.Sprintf("engine %q", r.Engine.Type), "sglang", "trtllm", "vllm")
	}
	if s.frontendType == "vllm" && r.Engine.Type != "vllm" {
		return nil, fmt.Errorf("recipe %s: frontend.type: vllm requires the vllm engine (backend.type: vllm), got %s", r.Display, r.Engine.Type)
	}
	if r.Dynamo.Source.Kind == config.SourceRev && len(r.Dynamo.Source.Patches) > 0 {
		return nil, notSupported(r, "dynamo cargo patches")
	}
	return s, nil
}

// role is the typed role of a mode (nil when the recipe has none).
func (s *spec) role(mode string) *config.Role {
	for _, b := range modeBlocks {
		if b.mode == mode {
			return s.Roles.Get(b.role)
		}
	}
	return nil
}

// installsDynamo: workers and frontends install dynamo in their preamble.
func (s *spec) installsDynamo() bool { return s.frontendType == "dynamo" && s.Dynamo.Install }

// wheelEnv is what srt-slurm derives from dynamo.wheel for its setup scripts.
func (s *spec) wheelEnv() *config.Map {
	env := config.NewMap()
	if src := s.Dynamo.Source; src.Kind == config.SourceWheel {
		env.Set("DYNAMO_WHEEL_NAME", "ai_dynamo-"+src.Value+"-py3-none-any.whl")
		env.Set("DYNAMO_VERSION", src.Value)
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
	switch s.Engine.Type {
	case "vllm":
		return s.injectVLLMSynthetic(al)
	case "trtllm":
		for _, b := range modeBlocks {
			if cfg := s.modeConfig[b.mode]; cfg.Has("speculative_config") || cfg.Has("speculative-config") {
				return fmt.Errorf("InferenceX has no synthetic-acceptance injector for trtllm (%s.speculative_config): a throughput run cannot pin its acceptance length", cfg.Path)
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
				return fmt.Errorf("recipe already sets %s in %s; synthetic acceptance is injected by the launcher", k, env.Path)
			}
		}
		out := config.NewMap()
		out.Path = env.Path
		out.Set(syntheticKeys[0], al)
		out.Set(syntheticKeys[1], "match-expected")
		out.Set(syntheticKeys[2], "real-draft-token")
		for _, k := range env.Keys {
			out.Set(k, env.Vals[k])
		}
		s.modeEnv[b.mode] = out
	}
	return nil
}
