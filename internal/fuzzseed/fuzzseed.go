// Package fuzzseed seeds fuzz targets with the project's own files, so the
// loaders' fuzzers start from inputs users actually write.
package fuzzseed

import (
	"os"
	"path/filepath"
	"testing"
)

// Files adds every file (under 64 KiB) matching globs to f's corpus, each
// followed by the extra arguments.
func Files(f *testing.F, globs []string, extra ...any) {
	for _, g := range globs {
		paths, _ := filepath.Glob(g)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
				f.Add(append([]any{data}, extra...)...)
			}
		}
	}
}
