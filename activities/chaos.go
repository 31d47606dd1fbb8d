package activities

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// ChaosHangBudget is the health budget of a bring-up a chaos run makes hang:
// its workers never register, and the point should not wait the recipe's
// hours to learn it.
const ChaosHangBudget = 15 * time.Second

// chaosBringUp carries out a chaos fault due for this bring-up attempt on
// a simulated cluster: the emulated partition's engine worker roles die
// with a real engine's last words (SWEEPFLOW_SIM_CRASH, for this bring-up's
// roles only) or hang until the cut health budget runs out. Real engines
// get none (a chaos run is refused on them before it starts).
func (a *Activities) chaosBringUp(ctx context.Context, p point.Spec, spec *cluster.ServeSpec) error {
	c, err := a.chaosFault(p, point.StageBringUp)
	if err != nil || c == "" || !a.Simulated {
		return err
	}
	switch kind, ok := strings.CutPrefix(c, point.ChaosCrash+":"); {
	case ok:
		spec.Env[simenv.EnvCrash] = kind
	case c == point.ChaosHang:
		spec.Env[simenv.EnvCrash] = "hang"
		spec.HealthBudget = ChaosHangBudget
	}
	a.log(ctx).Warn("chaos: this bring-up attempt carries a fault", zap.String("point", p.PointID), zap.String("fault", c))
	return nil
}

// chaosCut is when a chaos stream cut due for this perf attempt cuts the
// streams (half its window in; 0: none due).
func (a *Activities) chaosCut(ctx context.Context, p point.Spec) (time.Duration, error) {
	c, err := a.chaosFault(p, point.StagePerf)
	if err != nil || c != point.ChaosStreamCut || !a.Simulated {
		return 0, err
	}
	cut := a.perfDuration(p) / 2
	if cut <= 0 || cut > time.Minute {
		cut = time.Second
	}
	a.log(ctx).Warn("chaos: this perf attempt's streams are cut", zap.String("point", p.PointID), zap.Duration("after", cut))
	return cut, nil
}
