package matrix

import (
	"path/filepath"
	"testing"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// BenchmarkLoadMaster measures strict loading of InferenceX's whole
// nvidia-master.yaml (152 keys, ~10k lines).
func BenchmarkLoadMaster(b *testing.B) {
	path := filepath.Join(reftest.InferenceX(b, "nvidia-master.yaml"), "nvidia-master.yaml")
	for b.Loop() {
		if _, err := ixconfig.LoadMaster(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateAllMultinode expands all 83 multinode keys in both modes.
func BenchmarkGenerateAllMultinode(b *testing.B) {
	m, r, _ := loadReference(b)
	var keys []string
	for _, e := range m.Entries {
		if e.Multinode {
			keys = append(keys, e.Key)
		}
	}
	for b.Loop() {
		rows, err := Generate(m, r, Options{Keys: keys})
		if err != nil {
			b.Fatal(err)
		}
		_ = EvalRows(rows)
	}
}
