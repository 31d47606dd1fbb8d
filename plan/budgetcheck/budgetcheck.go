// Package budgetcheck checks each deployment's health_check budget against
// the bring-up times the ledger holds for it (issue 27, item 4): a budget
// below the observed p90 plus a margin kills healthy servers that are
// merely slow (srt-slurm #180: 9 of 14 jobs died about 90 s after the
// engine logged ready).
package budgetcheck

import (
	"context"
	"fmt"
	"time"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/forecast"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/results"
)

// Margin is the head room a budget needs above the observed p90: the larger
// of Fraction of the p90 and Min. The defaults (25 %, 2 minutes) leave a
// quarter for the run-to-run spread of model loading and graph capture.
type Margin struct {
	Fraction float64
	Min      time.Duration
}

// DefaultMargin is the margin `starter check` uses.
var DefaultMargin = Margin{Fraction: 0.25, Min: 2 * time.Minute}

// Of is the margin for a p90.
func (m Margin) Of(p90 time.Duration) time.Duration {
	return max(time.Duration(float64(p90)*m.Fraction), m.Min).Round(time.Second)
}

// Warning is a deployment whose budget is below what its bring-ups need.
type Warning struct {
	Pos        strictyaml.Pos `json:"pos"` // the recipe's health_check line
	Recipe     string         `json:"recipe"`
	Deployment string         `json:"deployment"`
	ConfigKey  string         `json:"config_key"`
	Budget     time.Duration  `json:"budget_ns"`
	P90        time.Duration  `json:"p90_ns"`
	Margin     time.Duration  `json:"margin_ns"`
	Runs       int            `json:"runs"` // completed bring-ups observed
}

// Want is the smallest budget that fits: the p90 plus the margin.
func (w Warning) Want() time.Duration { return w.P90 + w.Margin }

func (w Warning) String() string {
	return fmt.Sprintf("health-budget %s: health_check budget %s is below the observed bring-up p90 %s + margin %s over %d run(s) of deployment %.12s (%s); want >= %s",
		w.Pos, w.Budget, w.P90, w.Margin, w.Runs, w.Deployment, w.ConfigKey, w.Want())
}

// Check reads, for every deployment of the plan that has a recipe, the
// ledger's completed bring-ups of that deployment (every sweep) and warns
// when the recipe's budget is below their p90 plus the margin. A
// deployment without bring-ups in the ledger is not judged.
func Check(ctx context.Context, store *results.Store, p *plan.Plan, m Margin) ([]Warning, error) {
	var out []Warning
	seen := map[string]bool{}
	for _, pt := range p.Points {
		if pt.Recipe == nil || pt.DeploymentHash == "" || seen[pt.DeploymentHash] {
			continue
		}
		seen[pt.DeploymentHash] = true
		runs, err := store.DeploymentStageRuns(ctx, pt.DeploymentHash)
		if err != nil {
			return nil, err
		}
		ups := forecast.BringUps(runs)
		if len(ups) == 0 {
			continue
		}
		p90 := loadgen.PercentileOf(ups, 90, loadgen.NearestRank).Round(time.Second)
		w := Warning{Pos: pt.Recipe.HealthCheck.Pos, Recipe: pt.RecipePath, Deployment: pt.DeploymentHash, ConfigKey: pt.ConfigKey,
			Budget: pt.Recipe.HealthCheck.Timeout(), P90: p90, Margin: m.Of(p90), Runs: len(ups)}
		if w.Budget < w.Want() {
			out = append(out, w)
		}
	}
	return out, nil
}
