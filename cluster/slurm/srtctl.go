package slurm

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/config"
)

// submitSrtctl submits the recipe with srt-slurm's `srtctl apply
// --no-preflight -f RECIPE` (the login node cannot see node-local NVMe, so
// preflight would fail, as it does for InferenceX) and parses the job id from
// its "✅ Job N submitted!" line. srtctl names the job after the recipe's
// name; RUNNER_NAME carries sweepflow's namespaced name for its logs.
func (b *Backend) submitSrtctl(ctx context.Context, rec *config.Recipe, name string) (string, error) {
	env := append(os.Environ(), "RUNNER_NAME="+name)
	out, err := run(ctx, env, b.cfg.Srtctl, "apply", "--no-preflight", "-f", rec.File)
	if err != nil {
		if strings.Contains(err.Error(), "executable file not found") {
			return "", fmt.Errorf("%w: %v (install srt-slurm on the worker or use launcher: sbatch)", cluster.ErrBadConfig, err)
		}
		return "", err
	}
	return ParseSrtctlApply(out)
}
