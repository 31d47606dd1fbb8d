package matrix

import (
	"os"
	"testing"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// FuzzGenerate checks that any master config the loader accepts expands
// without panicking (errors are fine).
func FuzzGenerate(f *testing.F) {
	if data, err := os.ReadFile("../../configs/dsv4-gb200-agentx.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("k:\n  image: i\n  model: m\n  model-prefix: p\n  runner: r\n  precision: fp8\n  framework: f\n  multinode: true\n" +
		"  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n      - conc-start: 3\n        conc-end: 20\n" +
		"        prefill: {num-worker: 1, tp: 4, ep: 1, dp-attn: false}\n        decode: {num-worker: 1, tp: 8, ep: 8, dp-attn: true}\n"))
	runners, err := ixconfig.ParseRunners("r.yaml", []byte("labels: {cluster:gb200-nv: [a, b]}\nhardware: {cluster:gb200-nv: {available-cpu-dram-mib: 860160, gpus-per-node: 4}}\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ixconfig.ParseMaster("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, e := range m.Entries {
			if !e.Multinode {
				continue
			}
			rows, err := Generate(m, runners, Options{Keys: []string{e.Key}})
			if err != nil {
				continue
			}
			_ = EvalRows(rows)
			_ = MarkEvals(rows)
			if _, err := EncodeIXJSON(rows, 1); err != nil {
				t.Fatalf("encode: %v", err)
			}
		}
	})
}
