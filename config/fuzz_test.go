package config

import (
	"testing"

	"github.com/sweepflow/sweepflow/internal/fuzzseed"
)

// The loaders face hand-edited files; whatever the bytes, they must return
// an error or a value, never panic.

func FuzzParseRecipe(f *testing.F) {
	f.Add([]byte(disaggRecipe), "")
	f.Add([]byte(overrideRecipe), "zip_override_lat[1]")
	f.Add([]byte(overrideRecipe), "override_big")
	fuzzseed.Files(f, []string{"../configs/recipes/sglang/deepseek-v4-0813/gb200/agentic/*.yaml"}, "")
	f.Fuzz(func(t *testing.T, data []byte, selector string) {
		r, err := ParseRecipe("fuzz.yaml", data, selector)
		if err != nil {
			return
		}
		_, _ = r.Footprint(4)
	})
}

func FuzzParseClusterAndSweep(f *testing.F) {
	f.Add([]byte(baseCluster))
	fuzzseed.Files(f, []string{"../configs/clusters/*.yaml", "../configs/sweeps/*.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseCluster("fuzz.yaml", "/x/fuzz.yaml", data)
		_, _ = ParseSweep("fuzz.yaml", "/x/fuzz.yaml", data)
	})
}
