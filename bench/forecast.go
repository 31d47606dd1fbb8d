package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/errtext"
	"github.com/sweepflow/sweepflow/internal/rowrecipe"
)

// ForecastMaster is `starter bench forecast`: the forecast of every GB200
// and GB300 key of InferenceX's master config on two cluster profiles, as
// `starter forecast --config-files ... --cluster ... --cluster ...` makes
// it, timed. InferenceX's checkout holds few of the recipes its keys name,
// so most keys do not plan and the forecast says so per key; --sized runs
// it a second time with a recipe written from every row (internal/rowrecipe),
// so every key that plans goes through the sweep workflow.
type ForecastMaster struct {
	InferenceX string
	Clusters   []string
	Keys       []string
	Sized      bool
	Runs       int
}

// Validate checks the flags.
func (f *ForecastMaster) Validate() error {
	if f.InferenceX == "" {
		return fmt.Errorf("give --inferencex DIR (an InferenceX data directory) or set SWEEPFLOW_INFERENCEX")
	}
	if f.Runs < 1 {
		return fmt.Errorf("--runs must be at least 1")
	}
	if len(f.Clusters) == 0 {
		return fmt.Errorf("give at least one --cluster")
	}
	return nil
}

// ForecastMasterRun is one timed forecast.
type ForecastMasterRun struct {
	Mode    string  `json:"mode"` // as-shipped | sized
	Seconds float64 `json:"seconds"`
	// Keys is how many keys matched; the rest count the keys by outcome.
	Keys     int              `json:"keys"`
	Report   *forecast.Report `json:"report"`
	Skipped  []string         `json:"rows_without_sized_recipe,omitempty"`
	RecipeAt string           `json:"recipes_root"`
}

// Run times the forecasts and prints them.
func (f *ForecastMaster) Run(ctx context.Context, out io.Writer) ([]ForecastMasterRun, error) {
	master := filepath.Join(f.InferenceX, "nvidia-master.yaml")
	runners := filepath.Join(f.InferenceX, "runners.yaml")
	sw := &config.Sweep{Name: "nvidia-master", ConfigFiles: []string{master}, RunnerConfig: runners, ConfigKeys: f.Keys, Evals: true}
	req := control.ForecastRequest{Sweep: sw, Clusters: f.Clusters, RecipesRoot: f.InferenceX, Assumptions: forecast.DefaultAssumptions()}
	m, err := ixconfig.LoadMaster(master)
	if err != nil {
		return nil, err
	}
	keys, err := matrix.ResolveKeys(m, f.Keys)
	if err != nil {
		return nil, err
	}
	var runs []ForecastMasterRun
	timed := func(mode string, req control.ForecastRequest, skipped []string) error {
		for range f.Runs {
			start := time.Now()
			rep, err := control.Forecast(ctx, req)
			if err != nil {
				return err
			}
			r := ForecastMasterRun{Mode: mode, Seconds: time.Since(start).Seconds(), Keys: len(keys), Report: rep, Skipped: skipped, RecipeAt: req.RecipesRoot}
			runs = append(runs, r)
			writeForecastMasterRun(out, r)
		}
		return nil
	}
	fmt.Fprintf(out, "forecast of %s: %d keys matching %s, profiles %s\n", master, len(keys), strings.Join(f.Keys, " "), strings.Join(f.Clusters, ", "))
	if err := timed("as-shipped", req, nil); err != nil {
		return runs, err
	}
	if !f.Sized {
		return runs, nil
	}
	root, err := os.MkdirTemp("", "sweepflow-bench-forecast-")
	if err != nil {
		return runs, err
	}
	defer os.RemoveAll(root)
	skipped, err := sizedRecipes(root, m, runners, keys, f.Clusters)
	if err != nil {
		return runs, err
	}
	req.RecipesRoot, req.StandInRecipes = root, true
	return runs, timed("sized", req, skipped)
}

// sizedRecipes writes a recipe from every row of the keys, sized for the
// first profile that serves the key's runner.
func sizedRecipes(root string, m *ixconfig.Master, runnersFile string, keys, clusterFiles []string) ([]string, error) {
	runners, err := ixconfig.LoadRunners(runnersFile)
	if err != nil {
		return nil, err
	}
	var clusters []*config.Cluster
	for _, p := range clusterFiles {
		c, err := config.LoadCluster(p)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	var skipped []string
	for _, key := range keys {
		for _, c := range clusters {
			if !c.ServesRunner(m.Entry(key).Runner) {
				continue
			}
			rows, err := matrix.Generate(m, runners, matrix.Options{Keys: []string{key}})
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %s", key, errtext.FirstLine(err)))
				break
			}
			s, err := rowrecipe.Write(root, rows, c, true)
			if err != nil {
				return nil, err
			}
			skipped = append(skipped, s...)
			break
		}
	}
	return skipped, nil
}

func writeForecastMasterRun(out io.Writer, r ForecastMasterRun) {
	rep := r.Report
	fmt.Fprintf(out, "\n%s (recipes under %s): %.2f s\n", r.Mode, r.RecipeAt, r.Seconds)
	byKind := map[string]int{forecast.FindingNotServed: len(rep.NotServed)}
	forecastKeys := map[string]bool{}
	var nodeHours, gpuHours float64
	for _, c := range rep.Clusters {
		for _, f := range c.NotForecast {
			byKind[f.Kind]++
		}
		for _, s := range c.CriticalPath {
			forecastKeys[s.ConfigKey] = true
		}
		fmt.Fprintf(out, "  %-12s %5d points %4d deployments %9.1f node-hours %9.1f GPU-hours  makespan %s  lower bound %s  ratio %.3f\n",
			c.Name, c.Points, c.Deployments, c.NodeHours, c.GPUHours, hoursMinutes(c.MakespanHours), hoursMinutes(c.LowerBoundHours), c.Ratio)
		nodeHours += c.NodeHours
		gpuHours += c.GPUHours
	}
	fmt.Fprintf(out, "  %-12s %5s %17s %9.1f node-hours %9.1f GPU-hours\n", "total", "", "", nodeHours, gpuHours)
	for _, c := range rep.Clusters {
		if cf := c.Canary; cf != nil {
			fmt.Fprintf(out, "  %-12s with canaries: %d, %+.1f node-hours (%+d bring-ups), makespan %s (%+.2f h)\n",
				c.Name, len(cf.Groups), cf.ExtraNodeHours, cf.ExtraBringUps, hoursMinutes(cf.MakespanHours), cf.DelayHours)
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var left []string
	for _, k := range kinds {
		if byKind[k] > 0 {
			left = append(left, fmt.Sprintf("%d %s", byKind[k], k))
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(out, "  left out, costing nothing (reasons per key: starter forecast): %s\n", strings.Join(left, ", "))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(out, "  rows without a sized recipe: %d (e.g. %s)\n", len(r.Skipped), r.Skipped[0])
	}
}

func hoursMinutes(h float64) string {
	m := int(h*60 + 0.5)
	return fmt.Sprintf("%d:%02d", m/60, m%60)
}
