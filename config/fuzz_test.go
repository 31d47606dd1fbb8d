package config

import (
	"os"
	"path/filepath"
	"testing"
)

// The loaders face hand-edited files; whatever the bytes, they must return
// an error or a value, never panic.

// addSeeds adds every file matching globs, followed by extra arguments.
func addSeeds(f *testing.F, globs []string, extra ...any) {
	for _, g := range globs {
		paths, _ := filepath.Glob(g)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
				f.Add(append([]any{data}, extra...)...)
			}
		}
	}
}

func FuzzParseRecipe(f *testing.F) {
	f.Add([]byte(disaggRecipe), "")
	f.Add([]byte(overrideRecipe), "zip_override_lat[1]")
	f.Add([]byte(overrideRecipe), "override_big")
	addSeeds(f, []string{"../configs/recipes/sglang/deepseek-v4-0813/gb200/agentic/*.yaml"}, "")
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
	addSeeds(f, []string{"../configs/clusters/*.yaml", "../configs/sweeps/*.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseCluster("fuzz.yaml", "/x/fuzz.yaml", data)
		_, _ = ParseSweep("fuzz.yaml", "/x/fuzz.yaml", data)
	})
}
