package matrix

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// Single-node rows (master entries with multinode: false).
//
// A single-node search-space entry names one server by its tp (plus
// optional pp, dcp-size, pcp-size, ep, dp-attn). InferenceX expands it into
// one row per concurrency (conc is a scalar, not a list) and, within a
// concurrency, one row per runner. Parallelism fields are flat on the row;
// there are no prefill/decode blocks.
//
// FIXED row keys, in order:
//
//	image model model-prefix precision framework runner
//	isl osl tp pp dcp-size pcp-size conc max-model-len ep dp-attn
//	spec-decoding exp-name disagg run-eval [router]
//
// AGENTIC row keys, in order (no disagg, no run-eval):
//
//	image model model-prefix precision framework runner
//	tp pp dcp-size pcp-size ep dp-attn spec-decoding conc
//	kv-offloading total-cpu-dram-gb duration exp-name scenario-type
//	[kv-offload-backend] [router]
//
// pp, dcp-size and pcp-size default to 1, ep to 1 and dp-attn to false; a
// written value is emitted as written.

// searchValue returns the raw value of key in a search-space entry, or def
// when the key is absent or null.
func searchValue(s *ixconfig.SearchEntry, key string, def any) (any, error) {
	n := mappingValue(s.Node, key)
	if n == nil {
		return def, nil
	}
	v, err := fromNode(n)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return def, nil
	}
	return v, nil
}

// mappingValue is the value node of key in mapping n (nil when absent).
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var out *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			out = n.Content[i+1] // a later duplicate wins, as in PyYAML
		}
	}
	return out
}

// singleParallelism returns tp, pp, dcp-size, pcp-size, ep and dp-attn as
// the row carries them.
func singleParallelism(s *ixconfig.SearchEntry) (tp, pp, dcp, pcp, ep, dpa any, err error) {
	vals := make([]any, 6)
	for i, kd := range []struct {
		key string
		def any
	}{{"tp", nil}, {"pp", int64(1)}, {"dcp-size", int64(1)}, {"pcp-size", int64(1)}, {"ep", int64(1)}, {"dp-attn", false}} {
		if vals[i], err = searchValue(s, kd.key, kd.def); err != nil {
			return
		}
	}
	if vals[0] == nil {
		err = fmt.Errorf("single-node search-space entries need tp")
		return
	}
	return vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], nil
}

func singleFixedRow(e *ixconfig.Entry, sl *ixconfig.FixedSeqLen, s *ixconfig.SearchEntry, runner string, conc int) (*Row, strictyaml.Errors) {
	tp, pp, dcp, pcp, ep, dpa, err := singleParallelism(s)
	if err != nil {
		return nil, rowError(s, err)
	}
	row := header(e, runner)
	row = append(row,
		Field{"isl", int64(sl.ISL)},
		Field{"osl", int64(sl.OSL)},
		Field{"tp", tp},
		Field{"pp", pp},
		Field{"dcp-size", dcp},
		Field{"pcp-size", pcp},
		Field{"conc", int64(conc)},
		Field{"max-model-len", int64(sl.ISL + sl.OSL + 256)},
		Field{"ep", ep},
		Field{"dp-attn", dpa},
		Field{"spec-decoding", s.SpecDecoding},
		Field{"exp-name", e.ModelPrefix + "_" + seqLenName(sl.ISL, sl.OSL)},
		Field{"disagg", disaggValue(e)},
		Field{"run-eval", false},
	)
	if err := metadata(&row, e, s); err != nil {
		return nil, rowError(s, err)
	}
	return &Row{ConfigKey: e.Key, Scenario: FixedSeqLen, Entry: e, Search: s, Fields: row}, nil
}

func singleAgenticRow(e *ixconfig.Entry, s *ixconfig.SearchEntry, runner string, conc, dram int) (*Row, strictyaml.Errors) {
	tp, pp, dcp, pcp, ep, dpa, err := singleParallelism(s)
	if err != nil {
		return nil, rowError(s, err)
	}
	kvo := s.KVOffloading
	if kvo == "" {
		return nil, rowError(s, fmt.Errorf("single-node agentic entries need kv-offloading (none or dram)"))
	}
	row := header(e, runner)
	row = append(row,
		Field{"tp", tp},
		Field{"pp", pp},
		Field{"dcp-size", dcp},
		Field{"pcp-size", pcp},
		Field{"ep", ep},
		Field{"dp-attn", dpa},
		Field{"spec-decoding", s.SpecDecoding},
		Field{"conc", int64(conc)},
		Field{"kv-offloading", kvo},
		Field{"total-cpu-dram-gb", int64(dram)},
		Field{"duration", int64(AgenticDuration)},
		Field{"exp-name", singleAgenticExpName(e, s, tp, conc, kvo)},
		Field{"scenario-type", AgenticCoding},
	)
	if err := agenticTail(&row, e, s); err != nil {
		return nil, err
	}
	return &Row{ConfigKey: e.Key, Scenario: AgenticCoding, Entry: e, Search: s, Fields: row}, nil
}

// singleAgenticExpName is {prefix}_tp{tp}_conc{c}_{kv}[_spec-{spec}], where
// kv is "kvnone" without offload and "kv{mode}-{backend}" with it.
func singleAgenticExpName(e *ixconfig.Entry, s *ixconfig.SearchEntry, tp any, conc int, kvo string) string {
	kv := "kvnone"
	if kvo != "none" {
		backend := ""
		if s.KVOffloadBackend != nil {
			backend = s.KVOffloadBackend.Name
		}
		kv = "kv" + kvo + "-" + backend
	}
	name := fmt.Sprintf("%s_tp%s_conc%d_%s", e.ModelPrefix, pyStr(tp), conc, kv)
	if s.SpecDecoding != "none" {
		name += "_spec-" + s.SpecDecoding
	}
	return name
}

// pyStr formats a scalar as Python's str() would inside an f-string.
func pyStr(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		return pyFloat(x)
	case nil:
		return "None"
	}
	return fmt.Sprint(v)
}
