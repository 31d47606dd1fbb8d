package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/goldenal"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/workflows"
)

// launcherVersion is part of every point fingerprint: a new launcher means
// results are not silently reused across it.
const launcherVersion = "sweepflow-launcher/1"

// sweepRequest is what `sweep start`, `rerun` and schedules turn into a
// SweepInput.
type sweepRequest struct {
	SweepFile   string
	ClusterFile string
	ID          string
	ReuseFrom   []string
	Force       []string
	Faults      []string // point:stage:times
	Tuning      workflows.Tuning
	Nightly     bool
}

// buildSweep plans the sweep file and converts every point into the
// workflow's input. Any invalid input fails here, before a GPU is touched.
func buildSweep(req sweepRequest) (*workflows.SweepInput, *plan.Plan, error) {
	sw, err := config.LoadSweep(req.SweepFile)
	if err != nil {
		return nil, nil, err
	}
	clusterPath := sw.ClusterPath
	if req.ClusterFile != "" {
		clusterPath = req.ClusterFile
	}
	cl, err := config.LoadCluster(clusterPath)
	if err != nil {
		return nil, nil, err
	}
	p, err := plan.Build(plan.Options{Sweep: sw, Cluster: cl, LauncherVersion: launcherVersion})
	if err != nil {
		return nil, nil, err
	}
	var golden goldenal.Table
	goldenFile, thinking := goldenALOf(sw)
	if goldenFile != "" {
		if golden, err = goldenal.Load(goldenFile); err != nil {
			return nil, nil, err
		}
	}
	faults, err := parseFaults(req.Faults, p)
	if err != nil {
		return nil, nil, err
	}
	in := &workflows.SweepInput{
		Name: sw.Name, Cluster: cl.Name, TaskQueue: temporalx.ClusterQueue(cl.Name), NodeBudget: cl.Nodes,
		Tuning: req.Tuning, ReuseFrom: req.ReuseFrom, Force: req.Force, Nightly: req.Nightly,
		SweepFile: absPath(req.SweepFile), ClusterFile: absPath(req.ClusterFile),
	}
	for _, pt := range p.Points {
		spec := activities.PointSpec{
			PointID: pt.ExpName, ConfigKey: pt.ConfigKey, Topology: pt.Topology, Conc: pt.Conc,
			Nodes: pt.Nodes, GPUs: pt.GPUs, PrefillGPUs: pt.PrefillGPUs, DecodeGPUs: pt.DecodeGPUs,
			Fingerprint: pt.Fingerprint, Eval: pt.Eval && sw.Evals, Model: pt.Model, ModelPrefix: pt.ModelPrefix,
			Image: pt.Image, RecipePath: pt.RecipePath, Row: pt.Row, ISL: pt.ISL, OSL: pt.OSL,
			DurationSec: pt.DurationSec, Deployment: pt.Topology, Faults: faults[pt.ExpName],
			BaselineKey: baselineKey(p.Rows[pt.RowIndex], pt.Recipe, p.LauncherVersion, pt.Conc),
		}
		if pt.Recipe != nil {
			if m, ok := cl.Models[pt.Recipe.Model.Path]; ok {
				spec.CheckpointSource, spec.CheckpointPath = m.Source, m.Path
			}
		}
		rowAL, rowHasAL := rowSyntheticAL(pt.Row)
		if rowHasAL {
			spec.SyntheticAL = rowAL
		}
		if golden != nil && pt.SpecDecoding != "" && pt.SpecDecoding != "none" && pt.DraftTokens > 0 {
			al, err := golden.Lookup(pt.Model, thinking, pt.DraftTokens)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: point %s: %w", config.DisplayPath(goldenFile), pt.ExpName, err)
			}
			// A row that pins a different AL than the golden table is stale.
			if rowHasAL && math.Abs(rowAL-al) > 1e-9 {
				return nil, nil, fmt.Errorf("%s: point %s: SYNTHETIC_ACCEPTANCE_LENGTH=%g in the config but the golden AL for %d draft tokens is %g",
					config.DisplayPath(pt.Source.File), pt.ExpName, rowAL, pt.DraftTokens, al)
			}
			spec.SyntheticAL = al
		}
		in.Points = append(in.Points, spec)
	}
	in.SweepID = req.ID
	if in.SweepID == "" {
		in.SweepID = defaultSweepID(sw.Name, in)
	}
	return in, p, nil
}

// defaultSweepID is deterministic: the same plan gives the same ID, so a
// repeated `sweep start` attaches to the running sweep instead of
// duplicating it.
func defaultSweepID(name string, in *workflows.SweepInput) string {
	h := sha256.New()
	fps := make([]string, 0, len(in.Points))
	for _, p := range in.Points {
		fps = append(fps, p.PointID+"="+p.Fingerprint)
	}
	sort.Strings(fps)
	fmt.Fprintln(h, strings.Join(fps, ","), strings.Join(in.ReuseFrom, ","), strings.Join(in.Force, ","))
	for _, p := range in.Points {
		for _, f := range p.Faults {
			fmt.Fprintln(h, p.PointID, f.Stage, f.Times)
		}
	}
	return name + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// parseFaults reads --inject-fault POINT:STAGE[:TIMES] against the plan's
// exp-names (activities.ParseFaults).
func parseFaults(specs []string, p *plan.Plan) (map[string][]activities.Fault, error) {
	names := make([]string, len(p.Points))
	for i, pt := range p.Points {
		names[i] = pt.ExpName
	}
	return activities.ParseFaults(specs, names)
}

// goldenALOf returns the sweep's golden AL file and thinking mode.
func goldenALOf(sw *config.Sweep) (string, bool) { return sw.GoldenAL, sw.Thinking }

// rowSyntheticAL reads SYNTHETIC_ACCEPTANCE_LENGTH from the row's
// additional-settings when SYNTHETIC_ACCEPTANCE=true, as InferenceX's
// launchers export it.
func rowSyntheticAL(row json.RawMessage) (float64, bool) {
	var r struct {
		Prefill struct {
			Settings []string `json:"additional-settings"`
		} `json:"prefill"`
	}
	if json.Unmarshal(row, &r) != nil {
		return 0, false
	}
	on, al := false, 0.0
	for _, s := range r.Prefill.Settings {
		k, v, _ := strings.Cut(s, "=")
		switch k {
		case "SYNTHETIC_ACCEPTANCE":
			on = v == "true"
		case "SYNTHETIC_ACCEPTANCE_LENGTH":
			al, _ = strconv.ParseFloat(v, 64)
		}
	}
	return al, on && al > 0
}
