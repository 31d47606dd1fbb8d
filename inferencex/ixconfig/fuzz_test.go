package ixconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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

func FuzzLoadMaster(f *testing.F) {
	f.Add([]byte(baseMaster))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte("k:\n  <<: {image: x}\n"))
	f.Add([]byte("k: [1, {a: b}]\n---\nz: 1\n"))
	addSeeds(f, []string{"../../configs/*.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too: report the input instead of stalling the fuzzer.
		tm := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("slow input %q", data)) })
		defer tm.Stop()
		m, err := ParseMaster("fuzz.yaml", data)
		if err == nil && m == nil {
			t.Fatal("nil master without error")
		}
		if err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}

func FuzzParseRunners(f *testing.F) {
	f.Add([]byte("labels: {x: [a]}\nhardware: {x: {available-cpu-dram-mib: 1, gpus-per-node: 4}}\n"))
	addSeeds(f, []string{"../../configs/runners.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseRunners("fuzz.yaml", data)
	})
}
