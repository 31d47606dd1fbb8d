package ixconfig

import (
	"testing"

	"github.com/sweepflow/sweepflow/internal/fuzzseed"
)

func FuzzParseRunners(f *testing.F) {
	f.Add([]byte("labels: {x: [a]}\nhardware: {x: {available-cpu-dram-mib: 1, gpus-per-node: 4}}\n"))
	fuzzseed.Files(f, []string{"../../configs/runners.yaml"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseRunners("fuzz.yaml", data)
	})
}
