package plan

import (
	"path/filepath"
	"testing"

	"github.com/sweepflow/sweepflow/config"
)

// BenchmarkBuildSeed is `starter plan` on the seed sweep minus process
// start-up: load sweep, master, runners, six recipes; expand; fingerprint.
func BenchmarkBuildSeed(b *testing.B) {
	dir := filepath.Join("..", "configs")
	s, err := config.LoadSweep(filepath.Join(dir, seedSweep))
	if err != nil {
		b.Fatal(err)
	}
	c, err := config.LoadCluster(filepath.Join(dir, seedCluster))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Build(Options{Sweep: s, Cluster: c}); err != nil {
			b.Fatal(err)
		}
	}
}
