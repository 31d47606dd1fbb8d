package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// EmulatedFleet writes the cluster profile under which the emulated
// partition emu stands in for target's rack (`starter cluster emulate`): the
// partition, roots, launcher and simulator entry points are emu's; the GPU
// type, runner labels, model aliases, container names and bring-up time are
// target's, so every key target launches plans and renders the same. Each
// model alias points at emu's filesystems, at the directory name target
// gives it (an engine serves a checkpoint under that name), where
// FleetCheckpoints says a simulated checkpoint goes. Perf runs sweepflow's
// load generator: the emulation has a simulator role for InferenceX's
// agentic benchmark only, not for srt-slurm's sa-bench and the other
// benchmark types of the recipes, so every key measures the same way.
//
// inferencex and srtSlurm, when given, are the user's checkouts the
// profile composes its recipes root from (its inferencex and srt-slurm
// keys), so the worker launches from the root the plan was made from.
func EmulatedFleet(target, emu *Cluster, inferencex, srtSlurm string) ([]byte, error) {
	if emu.Emulation == nil {
		return nil, fmt.Errorf("%s: not an emulated partition (no emulation: entrypoints)", emu.Path)
	}
	if target.Backend != BackendSlurm {
		return nil, fmt.Errorf("%s: backend %s: only a Slurm rack has an emulated stand-in", target.Path, target.Backend)
	}
	if target.GPUsPerNode != emu.GPUsPerNode {
		return nil, fmt.Errorf("%s: %d GPUs per node, but the emulated nodes of %s have %d", target.Path, target.GPUsPerNode, emu.Path, emu.GPUsPerNode)
	}
	type model struct {
		Path   string `yaml:"path"`
		Source string `yaml:"source"`
	}
	type entrypoint struct {
		Match string `yaml:"match"`
		Role  string `yaml:"role"`
	}
	out := struct {
		Name               string            `yaml:"name"`
		Backend            string            `yaml:"backend"`
		Nodes              int               `yaml:"nodes"`
		GPUsPerNode        int               `yaml:"gpus-per-node"`
		GPUType            string            `yaml:"gpu-type"`
		Partition          string            `yaml:"partition"`
		SharedRoot         string            `yaml:"shared-root"`
		NodeLocalRoot      string            `yaml:"node-local-root"`
		Launcher           string            `yaml:"launcher"`
		RecipesRoot        string            `yaml:"recipes-root,omitempty"`
		InferenceX         string            `yaml:"inferencex,omitempty"`
		SrtSlurm           string            `yaml:"srt-slurm,omitempty"`
		SrtRoot            string            `yaml:"srt-root,omitempty"`
		InfmaxWorkspace    string            `yaml:"infmax-workspace,omitempty"`
		Runtime            string            `yaml:"runtime"`
		RowImageContainers []string          `yaml:"row-image-containers,omitempty,flow"`
		Containers         map[string]string `yaml:"containers,omitempty"`
		PerfClient         string            `yaml:"perf-client"`
		Emulation          struct {
			Entrypoints []entrypoint `yaml:"entrypoints"`
		} `yaml:"emulation"`
		TaskQueue        string           `yaml:"task-queue"`
		DefaultTimeLimit string           `yaml:"default-time-limit,omitempty"`
		BringUpTime      string           `yaml:"bring-up-time,omitempty"`
		Runners          []string         `yaml:"runners,omitempty,flow"`
		Models           map[string]model `yaml:"models,omitempty"`
	}{
		Name: emu.Name + "-" + target.Name, Backend: BackendSlurm, Nodes: emu.Nodes, GPUsPerNode: emu.GPUsPerNode,
		GPUType: target.GPUType, Partition: emu.Partition, SharedRoot: emu.SharedRoot, NodeLocalRoot: emu.NodeLocalRoot,
		Launcher: emu.Launcher, RecipesRoot: emu.RecipesRoot, SrtRoot: emu.SrtRoot, InfmaxWorkspace: emu.InfmaxWorkspace,
		Runtime: RuntimeNone, RowImageContainers: target.RowImageContainers, Containers: map[string]string{},
		PerfClient: PerfClientLoadgen, TaskQueue: emu.TaskQueue, Runners: target.Runners, Models: map[string]model{},
	}
	if inferencex != "" || srtSlurm != "" {
		out.RecipesRoot, out.InferenceX, out.SrtSlurm = "", inferencex, srtSlurm
	}
	if emu.DefaultTimeLimit > 0 {
		out.DefaultTimeLimit = emu.DefaultTimeLimit.String()
	}
	if target.BringUpTime > 0 {
		// The rack's bring-up time: node-minute estimates and the forecast
		// are the rack's; the emulated servers start in seconds.
		out.BringUpTime = target.BringUpTime.String()
	}
	for _, e := range emu.Emulation.Entrypoints {
		out.Emulation.Entrypoints = append(out.Emulation.Entrypoints, entrypoint{e.Match, e.Role})
	}
	// No container runs on the emulation: a name maps to the emulation's
	// image label where it has one, else to itself (the rack's squash
	// files do not exist here).
	for name := range target.Containers {
		out.Containers[name] = name
	}
	for name, image := range emu.Containers {
		out.Containers[name] = image
	}
	for alias, m := range target.Models {
		out.Models[alias] = model{Path: filepath.Join(emu.NodeLocalRoot, "models", filepath.Base(m.Path)),
			Source: filepath.Join(emu.SharedRoot, "models", filepath.Base(m.Path))}
	}
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# Written by `starter cluster emulate`: the emulated partition of %s standing in\n"+
		"# for %s (its GPU type, runners, model aliases and containers). Every\n"+
		"# figure a sweep on it measures is simulated.\n", emu.Path, target.Path)
	data := append([]byte(head), body.Bytes()...)
	if _, err := ParseCluster("the emulated fleet profile", filepath.Join(filepath.Dir(emu.Path), "emulated.yaml"), data); err != nil {
		return nil, err
	}
	return data, nil
}

// FleetCheckpoints lists the distinct shared-filesystem directories of c's
// model aliases, sorted: where a simulated checkpoint must exist for
// staging to copy it onto the nodes.
func FleetCheckpoints(c *Cluster) []string {
	var dirs []string
	for _, m := range c.Models {
		if m.Source != "" && !slices.Contains(dirs, m.Source) {
			dirs = append(dirs, m.Source)
		}
	}
	slices.SortFunc(dirs, strings.Compare)
	return dirs
}
