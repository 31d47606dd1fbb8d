package ixconfig

import (
	"fmt"
	"testing"
	"time"

	"github.com/sweepflow/sweepflow/internal/fuzzseed"
)

// The loaders face hand-edited files; whatever the bytes, they must return
// an error or a value, never panic.

func FuzzLoadMaster(f *testing.F) {
	f.Add([]byte(baseMaster))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte("k:\n  <<: {image: x}\n"))
	f.Add([]byte("k: [1, {a: b}]\n---\nz: 1\n"))
	fuzzseed.Files(f, []string{"../../configs/*.yaml"})
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
	fuzzseed.Files(f, []string{"../../configs/runners.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseRunners("fuzz.yaml", data)
	})
}
