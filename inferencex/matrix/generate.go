// Package matrix expands InferenceX master config entries into matrix rows
// exactly as InferenceX's generate_sweep_configs.py `test-config` does, for
// multinode keys (generate.go) and single-node keys
// (single.go), marks eval rows, and
// serialises rows the way the Python tool prints them.
package matrix

import (
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// Scenario types as they appear in rows and on the command line.
const (
	FixedSeqLen   = "fixed-seq-len"
	AgenticCoding = "agentic-coding"
)

// AgenticDuration is the constant `duration` of agentic rows (seconds).
const AgenticDuration = 3600

// MinEvalConc is InferenceX's MIN_EVAL_CONC.
const MinEvalConc = 16

// dramCapMiB caps available CPU DRAM at 3 TB (decimal) per node.
const dramCapMiB = 2_861_022

// Options selects and filters what Generate expands. The zero value expands
// throughput rows with no filters (`--no-evals` is the default mode).
type Options struct {
	Keys             []string // config keys or fnmatch globs, in order
	EvalsOnly        bool     // --evals-only: only the eval rows, annotated
	Conc             []int    // --conc filter
	SeqLens          []string // --seq-lens: 1k1k and/or 8k1k
	ScenarioTypes    []string // --scenario-type
	RunnerNodeFilter string   // --runner-node-filter
}

// Row is one generated matrix row (one cluster allocation) plus where it
// came from.
type Row struct {
	ConfigKey string
	Scenario  string // FixedSeqLen or AgenticCoding
	Entry     *ixconfig.Entry
	Search    *ixconfig.SearchEntry
	Fields    Object
}

// MarshalJSON emits the row exactly as InferenceX would (ordered keys).
func (r *Row) MarshalJSON() ([]byte, error) { return r.Fields.MarshalJSON() }

// Conc returns the row's conc list (one element for single-node rows).
func (r *Row) Conc() []int {
	v, _ := r.Fields.Get("conc")
	return intList(v)
}

// ExpName returns the row's exp-name.
func (r *Row) ExpName() string {
	v, _ := r.Fields.Get("exp-name")
	s, _ := v.(string)
	return s
}

// Int returns an integer field of the row (0 when absent).
func (r *Row) Int(key string) int {
	v, _ := r.Fields.Get(key)
	n, _ := asInt(v)
	return n
}

func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	}
	return 0, false
}

func intList(v any) []int {
	switch x := v.(type) {
	case int, int64: // single-node rows carry a scalar conc
		n, _ := asInt(x)
		return []int{n}
	case []int:
		return x
	case []any:
		out := make([]int, 0, len(x))
		for _, e := range x {
			if n, ok := asInt(e); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// Generate resolves opts.Keys against m and expands them. Without
// EvalsOnly it returns the throughput rows (`--no-evals`); with it, the
// annotated eval rows (`--evals-only`).
func Generate(m *ixconfig.Master, r *ixconfig.Runners, opts Options) ([]*Row, error) {
	keys, err := ResolveKeys(m, opts.Keys)
	if err != nil {
		return nil, err
	}
	rows, err := Expand(m, r, keys, opts)
	if err != nil {
		return nil, err
	}
	if opts.EvalsOnly {
		return EvalRows(rows), nil
	}
	return rows, nil
}

// ResolveKeys turns config keys and globs into concrete keys: globs (any
// argument holding * or ?) match in file order and must match something,
// plain keys must exist, and repeats are dropped keeping the first.
func ResolveKeys(m *ixconfig.Master, patterns []string) ([]string, error) {
	var errs strictyaml.Errors
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	if len(patterns) == 0 {
		errs = append(errs, &strictyaml.Error{Field: "config-keys", Msg: "no config keys given"})
	}
	for _, p := range patterns {
		if strings.ContainsAny(p, "*?") {
			re, err := globRegexp(p)
			if err != nil {
				errs = append(errs, &strictyaml.Error{Field: "config-keys", Msg: fmt.Sprintf("bad glob %q: %v", p, err)})
				continue
			}
			n := 0
			for _, k := range m.Keys() {
				if re.MatchString(k) {
					add(k)
					n++
				}
			}
			if n == 0 {
				errs = append(errs, &strictyaml.Error{Field: "config-keys", Msg: fmt.Sprintf("no config key matches %q in %s", p, strings.Join(m.Files, ", "))})
			}
			continue
		}
		if m.Entry(p) == nil {
			errs = append(errs, &strictyaml.Error{Field: "config-keys", Msg: fmt.Sprintf("config key %q not found in %s", p, strings.Join(m.Files, ", "))})
			continue
		}
		add(p)
	}
	return out, errs.Err()
}

// globRegexp translates an fnmatch pattern (Python semantics: * and ? match
// any character including '/', [..] classes with ! for negation).
func globRegexp(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '!' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) {
				b.WriteString(`\[`)
				continue
			}
			stuff := p[i+1 : j]
			i = j
			stuff = strings.ReplaceAll(stuff, `\`, `\\`)
			switch {
			case strings.HasPrefix(stuff, "!"):
				stuff = "^" + stuff[1:]
			case strings.HasPrefix(stuff, "^") || strings.HasPrefix(stuff, "["):
				stuff = `\` + stuff
			}
			b.WriteString("[" + stuff + "]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}

// Expand generates the throughput rows (`--no-evals` output) of keys, in
// InferenceX's loop order (§3.1): multinode fixed-seq-len entries give one
// row per runner holding the whole conc list, multinode agentic entries one
// row per runner and conc; single-node entries of both scenario types give
// one row per conc and runner, with a scalar conc.
func Expand(m *ixconfig.Master, r *ixconfig.Runners, keys []string, opts Options) ([]*Row, error) {
	var errs strictyaml.Errors
	var rows []*Row
	seq := map[string]bool{}
	for _, s := range opts.SeqLens {
		seq[s] = true
	}
	concFilter := map[int]bool{}
	for _, c := range opts.Conc {
		concFilter[c] = true
	}
	filterConc := func(c []int) []int {
		if len(opts.Conc) == 0 {
			return c
		}
		out := []int{}
		for _, x := range c {
			if concFilter[x] {
				out = append(out, x)
			}
		}
		return out
	}
	include := func(t string) bool {
		if len(opts.ScenarioTypes) == 0 {
			return true
		}
		for _, s := range opts.ScenarioTypes {
			if s == t {
				return true
			}
		}
		return false
	}

	for _, key := range keys {
		e := m.Entry(key)
		if e == nil {
			errs = append(errs, &strictyaml.Error{Field: "config-keys", Msg: fmt.Sprintf("config key %q not found", key)})
			continue
		}
		runners := runnerValues(e.Runner, r, opts.RunnerNodeFilter)
		if len(runners) == 0 {
			continue
		}
		if include(FixedSeqLen) {
			for _, sl := range e.Fixed {
				if len(opts.SeqLens) > 0 && !seq[seqLenName(sl.ISL, sl.OSL)] {
					continue
				}
				for _, s := range sl.SearchSpace {
					var concs []int
					switch {
					case s.ConcListPresent && s.ConcListNull:
						errs = append(errs, &strictyaml.Error{Pos: s.FieldPos("conc-list"), Field: s.Path + ".conc-list", Msg: "null conc-list is not allowed in fixed-seq-len entries; remove it or give a list"})
						continue
					case s.ConcListPresent:
						concs = s.ConcList
					default:
						concs = concRange(*s.ConcStart, *s.ConcEnd)
					}
					if len(opts.Conc) > 0 {
						concs = filterConc(concs)
						if len(concs) == 0 {
							continue
						}
					}
					if !e.Multinode {
						// Single-node: one row per concurrency, runners innermost.
						for _, c := range concs {
							for _, runner := range runners {
								row, err := singleFixedRow(e, sl, s, runner, c)
								if err != nil {
									errs = append(errs, err...)
									continue
								}
								rows = append(rows, row)
							}
						}
						continue
					}
					for _, runner := range runners {
						row, err := fixedRow(e, sl, s, runner, concs)
						if err != nil {
							errs = append(errs, err...)
							continue
						}
						rows = append(rows, row)
					}
				}
			}
		}
		if include(AgenticCoding) {
			for _, ac := range e.Agentic {
				for _, s := range ac.SearchSpace {
					dram, err := dramGB(e, ac, s, r)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					concs := s.ConcList
					if len(concs) == 0 {
						concs = concRange(*s.ConcStart, *s.ConcEnd)
					}
					concs = filterConc(concs)
					if len(concs) == 0 {
						continue
					}
					if !e.Multinode {
						// Single-node: one row per concurrency, runners innermost.
						for _, c := range concs {
							for _, runner := range runners {
								row, err := singleAgenticRow(e, s, runner, c, dram)
								if err != nil {
									errs = append(errs, err...)
									continue
								}
								rows = append(rows, row)
							}
						}
						continue
					}
					for _, runner := range runners {
						for _, c := range concs {
							row, err := agenticRow(e, s, runner, c, dram)
							if err != nil {
								errs = append(errs, err...)
								continue
							}
							rows = append(rows, row)
						}
					}
				}
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

func runnerValues(runner string, r *ixconfig.Runners, filter string) []string {
	if filter == "" {
		return []string{runner}
	}
	var cands []string
	if strings.Contains(runner, filter) {
		cands = append(cands, runner)
	}
	if r != nil {
		cands = append(cands, r.Labels[runner]...)
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range cands {
		if strings.Contains(c, filter) && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

func seqLenName(isl, osl int) string {
	switch {
	case isl == 1024 && osl == 1024:
		return "1k1k"
	case isl == 8192 && osl == 1024:
		return "8k1k"
	}
	return fmt.Sprintf("%d_%d", isl, osl)
}

// concRange is InferenceX's geometric range: x2 each step, end included.
func concRange(start, end int) []int {
	var out []int
	for v := start; ; {
		out = append(out, v)
		if v >= end {
			break
		}
		if v > end/2 { // v*2 would pass end (and must not overflow)
			v = end
		} else {
			v *= 2
		}
	}
	return out
}

// workerValue emits the raw worker mapping, then pp, dcp-size, pcp-size
// (in that order) for whichever were not written.
func workerValue(w *ixconfig.Worker) (Object, error) {
	v, err := fromNode(w.Node)
	if err != nil {
		return nil, err
	}
	obj, _ := v.(Object)
	for _, k := range []string{"pp", "dcp-size", "pcp-size"} {
		if _, ok := obj.Get(k); !ok {
			obj = append(obj, Field{k, int64(1)})
		}
	}
	return obj, nil
}

func componentValue(c *ixconfig.Component) (any, error) {
	if c == nil {
		return nil, nil
	}
	return fromNode(c.Node)
}

// header builds the row fields shared by both scenario types.
func header(e *ixconfig.Entry, runner string) Object {
	return Object{
		{"image", e.Image},
		{"model", e.Model},
		{"model-prefix", e.ModelPrefix},
		{"precision", e.Precision},
		{"framework", e.Framework},
		{"runner", runner},
	}
}

func disaggValue(e *ixconfig.Entry) any {
	if e.DisaggNode == nil {
		return false
	}
	v, err := fromNode(e.DisaggNode)
	if err != nil {
		return e.Disagg
	}
	return v
}

// metadata appends router and kv-p2p-transfer (§3.4): a key written in the
// search-space entry wins even when null; otherwise the top-level value.
func metadata(row *Object, e *ixconfig.Entry, s *ixconfig.SearchEntry) error {
	router := e.Router
	if s.RouterPresent {
		router = s.Router
	}
	if router != nil {
		v, err := componentValue(router)
		if err != nil {
			return err
		}
		*row = append(*row, Field{"router", v})
	}
	p2p := e.KVP2PTransfer
	if s.KVP2PPresent {
		p2p = s.KVP2PTransfer
	}
	if p2p != nil {
		*row = append(*row, Field{"kv-p2p-transfer", *p2p})
	}
	return nil
}

func workers(s *ixconfig.SearchEntry) (Object, Object, error) {
	if s.Prefill == nil || s.Decode == nil {
		return nil, nil, fmt.Errorf("multinode entries need prefill and decode blocks")
	}
	p, err := workerValue(s.Prefill)
	if err != nil {
		return nil, nil, err
	}
	d, err := workerValue(s.Decode)
	if err != nil {
		return nil, nil, err
	}
	return p, d, nil
}

func rowError(s *ixconfig.SearchEntry, err error) strictyaml.Errors {
	return strictyaml.Errors{&strictyaml.Error{Pos: s.Pos, Field: s.Path, Msg: err.Error()}}
}

// checkRow is the part of InferenceX's output-row validation that the input
// rules do not already guarantee: a disaggregated row needs its transfer.
func checkRow(e *ixconfig.Entry, s *ixconfig.SearchEntry, row Object) strictyaml.Errors {
	if e.Disagg {
		if _, ok := row.Get("kv-p2p-transfer"); !ok {
			return strictyaml.Errors{&strictyaml.Error{Pos: s.FieldPos("kv-p2p-transfer"), Field: s.Path + ".kv-p2p-transfer", Msg: "null here removes the transfer engine a disaggregated row needs"}}
		}
	}
	return nil
}

func fixedRow(e *ixconfig.Entry, sl *ixconfig.FixedSeqLen, s *ixconfig.SearchEntry, runner string, concs []int) (*Row, strictyaml.Errors) {
	p, d, err := workers(s)
	if err != nil {
		return nil, rowError(s, err)
	}
	row := header(e, runner)
	row = append(row,
		Field{"isl", int64(sl.ISL)},
		Field{"osl", int64(sl.OSL)},
		Field{"spec-decoding", s.SpecDecoding},
		Field{"prefill", p},
		Field{"decode", d},
		Field{"conc", toAny(concs)},
		Field{"max-model-len", int64(sl.ISL + sl.OSL + 256)},
		Field{"exp-name", e.ModelPrefix + "_" + seqLenName(sl.ISL, sl.OSL)},
		Field{"disagg", disaggValue(e)},
		Field{"run-eval", false},
	)
	if err := metadata(&row, e, s); err != nil {
		return nil, rowError(s, err)
	}
	if errs := checkRow(e, s, row); errs != nil {
		return nil, errs
	}
	return &Row{ConfigKey: e.Key, Scenario: FixedSeqLen, Entry: e, Search: s, Fields: row}, nil
}

func agenticRow(e *ixconfig.Entry, s *ixconfig.SearchEntry, runner string, conc, dram int) (*Row, strictyaml.Errors) {
	p, d, err := workers(s)
	if err != nil {
		return nil, rowError(s, err)
	}
	kvo := s.KVOffloading
	if kvo == "" {
		kvo = "none"
	}
	row := header(e, runner)
	row = append(row,
		Field{"spec-decoding", s.SpecDecoding},
		Field{"prefill", p},
		Field{"decode", d},
		Field{"conc", []any{int64(conc)}},
		Field{"kv-offloading", kvo},
		Field{"total-cpu-dram-gb", int64(dram)},
		Field{"duration", int64(AgenticDuration)},
		Field{"exp-name", agenticExpName(e, s, conc, kvo)},
		Field{"disagg", disaggValue(e)},
		Field{"scenario-type", AgenticCoding},
	)
	if err := agenticTail(&row, e, s); err != nil {
		return nil, err
	}
	if errs := checkRow(e, s, row); errs != nil {
		return nil, errs
	}
	return &Row{ConfigKey: e.Key, Scenario: AgenticCoding, Entry: e, Search: s, Fields: row}, nil
}

func toAny(c []int) []any {
	out := make([]any, len(c))
	for i, v := range c {
		out[i] = int64(v)
	}
	return out
}

// agenticExpName is §4.2: prefix_p{nw}x{tp}[ep{ep}][dpa]_d..._conc{c}[_kv{mode}-{backend}].
func agenticExpName(e *ixconfig.Entry, s *ixconfig.SearchEntry, conc int, kvo string) string {
	w := func(x *ixconfig.Worker) string {
		out := strconv.Itoa(x.NumWorker) + "x" + strconv.Itoa(x.TP)
		if x.EP != 1 {
			out += "ep" + strconv.Itoa(x.EP)
		}
		if x.DPAttn {
			out += "dpa"
		}
		return out
	}
	name := fmt.Sprintf("%s_p%s_d%s_conc%d", e.ModelPrefix, w(s.Prefill), w(s.Decode), conc)
	if kvo != "none" {
		backend := ""
		if s.KVOffloadBackend != nil {
			backend = s.KVOffloadBackend.Name
		}
		name += "_kv" + kvo + "-" + backend
	}
	return name
}

// dramGB is §4.3: the CPU DRAM budget for KV offload of one prefill replica
// (multinode) or of the single-node server, in decimal GB, computed exactly
// and truncated.
func dramGB(e *ixconfig.Entry, ac *ixconfig.AgenticCoding, s *ixconfig.SearchEntry, r *ixconfig.Runners) (int, *strictyaml.Error) {
	if s.KVOffloading != "dram" {
		return 0, nil
	}
	var hw *ixconfig.Hardware
	if r != nil {
		hw = r.Hardware[e.Runner]
	}
	if hw == nil {
		var keys []string
		if r != nil {
			for k := range r.Hardware {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		return 0, &strictyaml.Error{Pos: s.Pos, Field: s.Path + ".kv-offloading", Msg: fmt.Sprintf("runner %q requires 'available-cpu-dram-mib' in runner hardware metadata (available hardware keys: %s)", e.Runner, strings.Join(keys, ", "))}
	}
	if ac.DramUtilization == nil {
		return 0, &strictyaml.Error{Pos: ac.Pos, Field: ac.Path + ".dram-utilization", Msg: "required with kv-offloading: dram"}
	}
	a := hw.AvailableCPUDRAMMiB
	if a > dramCapMiB {
		a = dramCapMiB
	}
	g := int64(hw.GPUsPerNode)
	var used int64
	if s.Prefill == nil {
		// Single-node tp shape: the server's whole TP/PP/PCP topology must
		// fit one node; it claims that share of the node's DRAM.
		tp := 0
		if s.TP != nil {
			tp = *s.TP
		}
		used = int64(tp) * int64(s.PP) * int64(s.PCPSize)
		if used > g {
			return 0, &strictyaml.Error{Pos: s.FieldPos("tp"), Field: s.Path + ".tp", Msg: fmt.Sprintf("tp=%d with pp=%d and pcp-size=%d requires %d GPUs and exceeds gpus-per-node=%d for runner %q", tp, s.PP, s.PCPSize, used, g, e.Runner)}
		}
	} else {
		rr := int64(s.Prefill.TP) * int64(s.Prefill.PP) * int64(s.Prefill.PCPSize)
		switch {
		case rr > g && rr%g == 0:
			used = g
		case rr > g:
			return 0, &strictyaml.Error{Pos: s.Prefill.Pos, Field: s.Prefill.Path, Msg: fmt.Sprintf("prefill replica of %d GPUs spans multiple nodes but is not a multiple of gpus-per-node=%d", rr, g)}
		case rr > 0 && g%rr == 0:
			used = rr
		default:
			return 0, &strictyaml.Error{Pos: s.Prefill.Pos, Field: s.Prefill.Path, Msg: fmt.Sprintf("prefill replica of %d GPUs does not divide gpus-per-node=%d evenly", rr, g)}
		}
	}
	u, ok := new(big.Rat).SetString(ac.DramUtilizationText)
	if !ok {
		return 0, &strictyaml.Error{Pos: ac.Pos, Field: ac.Path + ".dram-utilization", Msg: "not a decimal number"}
	}
	total := new(big.Rat).SetInt64(a * 1_048_576)
	total.Mul(total, u)
	total.Mul(total, new(big.Rat).SetInt64(used))
	total.Quo(total, new(big.Rat).SetInt64(g*1_000_000_000))
	q := new(big.Int).Quo(total.Num(), total.Denom()) // both positive: truncation == floor
	return int(q.Int64()), nil
}

// agenticTail appends what every agentic row ends with, single-node or
// multinode: the KV offload backend when set, then the metadata fields.
func agenticTail(row *Object, e *ixconfig.Entry, s *ixconfig.SearchEntry) strictyaml.Errors {
	if s.KVOffloadBackend != nil {
		v, err := componentValue(s.KVOffloadBackend)
		if err != nil {
			return rowError(s, err)
		}
		*row = append(*row, Field{"kv-offload-backend", v})
	}
	if err := metadata(row, e, s); err != nil {
		return rowError(s, err)
	}
	return nil
}
