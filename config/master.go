package config

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Master is the merged content of one or more InferenceX master config files
// (nvidia-master.yaml format), validated by InferenceX's rules
// (research/ix-generator-spec.md §2), with the one deliberate difference that
// scalars must have their canonical YAML type (tp: 8, not tp: "8").
type Master struct {
	Files   []string // display paths, in load order
	Entries []*Entry // every config key, in file order then document order
	index   map[string]*Entry
}

// Entry returns the config key's entry, or nil.
func (m *Master) Entry(key string) *Entry { return m.index[key] }

// Keys returns every config key in merge order.
func (m *Master) Keys() []string {
	out := make([]string, len(m.Entries))
	for i, e := range m.Entries {
		out[i] = e.Key
	}
	return out
}

// Entry is one config key of a master config.
type Entry struct {
	Key  string
	Pos  Pos        // where the key is written
	Node *yaml.Node // the entry's mapping, verbatim

	Image, Model, ModelPrefix, Precision, Framework, Runner string

	Multinode bool
	Disagg    bool
	// DisaggNode is the raw `disagg` value (nil when absent); rows carry it as written.
	DisaggNode *yaml.Node

	Router        *Component // top-level router, nil when absent or null
	KVP2PTransfer *string    // top-level kv-p2p-transfer, nil when absent or null

	Fixed   []*FixedSeqLen
	Agentic []*AgenticCoding
}

// Component is InferenceX ComponentMetadata ({name, version}) and also the
// kv-offload-backend object; Node keeps the original key order for rows.
type Component struct {
	Pos     Pos
	Name    string
	Version *string
	Node    *yaml.Node
}

// FixedSeqLen is one scenarios.fixed-seq-len item.
type FixedSeqLen struct {
	Pos         Pos
	Path        string
	ISL, OSL    int
	SearchSpace []*SearchEntry
}

// AgenticCoding is one scenarios.agentic-coding item.
type AgenticCoding struct {
	Pos  Pos
	Path string
	// DramUtilization is nil when absent or null. DramUtilizationText is its
	// shortest round-trip decimal, the exact value InferenceX computes with.
	DramUtilization     *float64
	DramUtilizationText string
	SearchSpace         []*SearchEntry
}

// SearchEntry is one search-space item of either scenario type.
type SearchEntry struct {
	Pos  Pos
	Path string // dotted field path, e.g. key.scenarios.agentic-coding[0].search-space[2]
	Node *yaml.Node

	SpecDecoding string // default "none"

	Prefill, Decode *Worker // multinode (and agentic prefill/decode shape)

	// Single-node shape and agentic tp shape.
	TP, EP               *int
	DPAttn               *bool
	PP, DCPSize, PCPSize int // default 1

	KVOffloading     string // "" when absent or null
	KVOffloadBackend *Component

	// Router and KV P2P transfer: *Present is true when the key is written at
	// all, even as null; a present null overrides the top-level value.
	RouterPresent bool
	Router        *Component
	KVP2PPresent  bool
	KVP2PTransfer *string

	ConcStart, ConcEnd *int
	ConcListPresent    bool
	ConcListNull       bool
	ConcList           []int
	ConcListPos        []Pos
}

// Worker is a prefill or decode block.
type Worker struct {
	Pos  Pos
	Path string
	Node *yaml.Node // verbatim mapping; rows emit its keys in this order

	NumWorker, TP, EP    int
	DPAttn               bool
	PP, DCPSize, PCPSize int

	Hardware           *string
	AdditionalSettings []string
	SettingPos         []Pos
}

// Setting returns the value of KEY=VALUE in additional-settings.
func (w *Worker) Setting(key string) (string, Pos, bool) {
	if w == nil {
		return "", Pos{}, false
	}
	for i, s := range w.AdditionalSettings {
		if k, v, ok := strings.Cut(s, "="); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), w.SettingPos[i], true
		}
	}
	return "", Pos{}, false
}

var (
	specDecodingValues = []string{"mtp", "draft_model", "none"}
	kvOffloadingValues = []string{"none", "dram"}

	masterFieldsMN = []string{"image", "model", "model-prefix", "precision", "framework", "runner", "multinode", "disagg", "router", "kv-p2p-transfer", "scenarios"}
	masterFieldsSN = []string{"image", "model", "model-prefix", "precision", "framework", "runner", "multinode", "disagg", "router", "scenarios"}
	scenarioFields = []string{"fixed-seq-len", "agentic-coding"}
	fixedFields    = []string{"isl", "osl", "search-space"}
	agenticFields  = []string{"search-space", "dram-utilization"}
	mnFixedFields  = []string{"spec-decoding", "prefill", "decode", "router", "kv-p2p-transfer", "conc-start", "conc-end", "conc-list"}
	snFixedFields  = []string{"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding", "router", "conc-start", "conc-end", "conc-list"}
	agenticEntry   = []string{"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding", "prefill", "decode", "kv-offloading", "kv-offload-backend", "router", "kv-p2p-transfer", "conc-start", "conc-end", "conc-list"}
	workerFields   = []string{"num-worker", "tp", "ep", "dp-attn", "pp", "dcp-size", "pcp-size", "hardware", "additional-settings"}
	componentKeys  = []string{"name", "version"}
)

// LoadMaster reads and merges master config files in order and validates
// every entry (not only the ones a sweep selects), as InferenceX does.
func LoadMaster(paths ...string) (*Master, error) {
	var errs errorList
	m := &Master{index: map[string]*Entry{}}
	if len(paths) == 0 {
		errs.add(Pos{File: "(command line)"}, "config-files", "no master config files given")
		return nil, errs.errs.Err()
	}
	for _, p := range paths {
		display := DisplayPath(p)
		data, err := os.ReadFile(p)
		if err != nil {
			errs.add(Pos{File: display}, "", "cannot read master config: %v", cleanIOError(err))
			continue
		}
		entries := parseMaster(display, data, &errs)
		m.Files = append(m.Files, display)
		for _, e := range entries {
			if prev := m.index[e.Key]; prev != nil {
				errs.add(e.Pos, e.Key, "duplicate config key (already defined at %s)", prev.Pos)
				continue
			}
			m.index[e.Key] = e
			m.Entries = append(m.Entries, e)
		}
	}
	if err := errs.errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// ParseMaster validates one master config document held in memory.
func ParseMaster(display string, data []byte) (*Master, error) {
	var errs errorList
	entries := parseMaster(display, data, &errs)
	if err := errs.errs.Err(); err != nil {
		return nil, err
	}
	m := &Master{Files: []string{display}, Entries: entries, index: map[string]*Entry{}}
	for _, e := range entries {
		m.index[e.Key] = e
	}
	return m, nil
}

func parseMaster(display string, data []byte, errs *errorList) []*Entry {
	root, err := parseYAML(display, data)
	if err != nil {
		errs.addErr(err)
		return nil
	}
	d := &decoder{file: display, errs: errs}
	top := d.mapping(root, "", nil)
	if top == nil {
		return nil
	}
	var out []*Entry
	for _, key := range top.keys {
		if strings.Contains(key, "*") {
			d.errorf(top.key[key], key, "config keys may not contain '*' (reserved for key globs)")
			continue
		}
		if e := d.entry(key, top.key[key], top.value[key]); e != nil {
			out = append(out, e)
		}
	}
	return out
}

func (d *decoder) entry(key string, kn, vn *yaml.Node) *Entry {
	e := &Entry{Key: key, Pos: d.pos(kn), Node: vn}
	// Dispatch on multinode first: it decides which schema applies.
	multinode := false
	if vm := deref(vn); vm != nil && vm.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(vm.Content); i += 2 {
			if deref(vm.Content[i]).Value == "multinode" {
				if v, err := ScalarValue(vm.Content[i+1]); err == nil && (v == true || v == int64(1)) {
					multinode = true
				}
			}
		}
	}
	fields := masterFieldsSN
	if multinode {
		fields = masterFieldsMN
	}
	m := d.mapping(vn, key, fields)
	if m == nil {
		return nil
	}
	nErr := len(d.errs.errs)
	e.Image = m.reqStr("image")
	e.Model = m.reqStr("model")
	e.ModelPrefix = m.reqStr("model-prefix")
	e.Precision = m.reqStr("precision")
	e.Framework = m.reqStr("framework")
	e.Runner = m.reqStr("runner")
	if mn, ok := m.reqBool("multinode"); ok {
		e.Multinode = mn
	}
	if m.has("disagg") {
		e.DisaggNode = m.value["disagg"]
		e.Disagg, _ = m.d.boolean(m.value["disagg"], m.field("disagg"))
		if !e.Multinode && e.Disagg {
			d.errorf(m.value["disagg"], m.field("disagg"), "single-node entries cannot be disaggregated; expected false")
		}
	}
	e.Router = d.component(m, "router")
	if m.has("kv-p2p-transfer") {
		e.KVP2PTransfer = d.p2p(m)
	}
	if !m.has("scenarios") {
		m.missing("scenarios")
		return nil
	}
	sm := d.mapping(m.value["scenarios"], m.field("scenarios"), scenarioFields)
	if sm == nil {
		return nil
	}
	nonEmpty := false
	if n := sm.get("fixed-seq-len"); n != nil {
		items, ok := d.seq(n, sm.field("fixed-seq-len"))
		nonEmpty = nonEmpty || len(items) > 0
		for i, it := range items {
			if ok {
				if f := d.fixed(e, it, idx(sm.field("fixed-seq-len"), i)); f != nil {
					e.Fixed = append(e.Fixed, f)
				}
			}
		}
	}
	if n := sm.get("agentic-coding"); n != nil {
		items, ok := d.seq(n, sm.field("agentic-coding"))
		nonEmpty = nonEmpty || len(items) > 0
		for i, it := range items {
			if ok {
				if a := d.agentic(e, it, idx(sm.field("agentic-coding"), i)); a != nil {
					e.Agentic = append(e.Agentic, a)
				}
			}
		}
		// R8: agentic configs run on whole clusters, named by an exact label.
		if len(items) > 0 && !strings.HasPrefix(e.Runner, "cluster:") {
			d.errorf(m.value["runner"], m.field("runner"), "agentic-coding configs need a 'cluster:<name>' runner label, got %q", e.Runner)
		}
	}
	if !nonEmpty {
		d.errorf(sm.node, sm.path, "at least one scenario type (fixed-seq-len or agentic-coding) must be a non-empty list")
	}
	d.crossChecks(e)
	if len(d.errs.errs) > nErr {
		return nil
	}
	return e
}

// crossChecks applies the master-level rules R9 and R10.
func (d *decoder) crossChecks(e *Entry) {
	var all []*SearchEntry
	for _, f := range e.Fixed {
		all = append(all, f.SearchSpace...)
	}
	for _, a := range e.Agentic {
		all = append(all, a.SearchSpace...)
	}
	for _, s := range all {
		if e.Router != nil && s.Router != nil {
			d.errs.add(s.Router.Pos, s.Path+".router", "router must be declared either at the top level (line %d) or in search-space entries, not both", e.Router.Pos.Line)
		}
		if e.KVP2PTransfer != nil && s.KVP2PTransfer != nil {
			d.errs.add(s.FieldPos("kv-p2p-transfer"), s.Path+".kv-p2p-transfer", "kv-p2p-transfer must be declared either at the top level or in search-space entries, not both")
		}
	}
	if e.Multinode && e.Disagg && e.KVP2PTransfer == nil {
		if len(all) == 0 {
			d.errs.add(e.Pos, e.Key+".kv-p2p-transfer", "disaggregated configs must name a kv-p2p-transfer (top level or in every search-space entry)")
		}
		for _, s := range all {
			if s.KVP2PTransfer == nil {
				d.errs.add(s.Pos, s.Path+".kv-p2p-transfer", "disaggregated configs must name a kv-p2p-transfer here or at the top level")
			}
		}
	}
}

func (d *decoder) component(m *mapping, key string) *Component {
	n := m.get(key)
	if n == nil {
		return nil
	}
	cm := d.mapping(n, m.field(key), componentKeys)
	if cm == nil {
		return nil
	}
	c := &Component{Pos: d.pos(cm.node), Node: cm.node}
	if !cm.has("name") {
		cm.missing("name")
	} else if s, ok := d.str(cm.value["name"], cm.field("name")); ok {
		if s == "" {
			d.errorf(cm.value["name"], cm.field("name"), "must not be empty")
		}
		c.Name = s
	}
	if key == "router" && !cm.has("version") {
		cm.missing("version")
	}
	if cm.has("version") {
		if key == "router" || !isNull(cm.value["version"]) {
			if s, ok := d.str(cm.value["version"], cm.field("version")); ok {
				switch {
				case s == "":
					d.errorf(cm.value["version"], cm.field("version"), "must not be empty")
				case strings.HasPrefix(s, "image:"):
					d.errorf(cm.value["version"], cm.field("version"), "must be a release, package or commit, not an image: reference")
				}
				c.Version = &s
			}
		}
	}
	return c
}

func (d *decoder) p2p(m *mapping) *string {
	n := m.get("kv-p2p-transfer")
	if n == nil {
		return nil
	}
	s, ok := d.str(n, m.field("kv-p2p-transfer"))
	if !ok {
		return nil
	}
	if s == "" {
		d.errorf(n, m.field("kv-p2p-transfer"), "must not be empty")
	}
	return &s
}

func (d *decoder) fixed(e *Entry, n *yaml.Node, path string) *FixedSeqLen {
	m := d.mapping(n, path, fixedFields)
	if m == nil {
		return nil
	}
	f := &FixedSeqLen{Pos: d.pos(m.node), Path: path}
	if v, ok := m.reqInt("isl"); ok {
		f.ISL = int(v)
	}
	if v, ok := m.reqInt("osl"); ok {
		f.OSL = int(v)
	}
	if !m.has("search-space") {
		m.missing("search-space")
		return f
	}
	items, ok := d.seq(m.value["search-space"], m.field("search-space"))
	if !ok {
		return f
	}
	for i, it := range items {
		p := idx(m.field("search-space"), i)
		var s *SearchEntry
		if e.Multinode {
			s = d.searchEntry(e, it, p, mnFixedFields, false)
		} else {
			s = d.searchEntry(e, it, p, snFixedFields, false)
		}
		if s != nil {
			f.SearchSpace = append(f.SearchSpace, s)
		}
	}
	return f
}

func (d *decoder) agentic(e *Entry, n *yaml.Node, path string) *AgenticCoding {
	m := d.mapping(n, path, agenticFields)
	if m == nil {
		return nil
	}
	a := &AgenticCoding{Pos: d.pos(m.node), Path: path}
	if v := m.get("dram-utilization"); v != nil {
		if u, text, ok := d.number(v, m.field("dram-utilization")); ok {
			if u <= 0 || u > 1 {
				d.errorf(v, m.field("dram-utilization"), "must be > 0 and <= 1, got %s", text)
			}
			a.DramUtilization, a.DramUtilizationText = &u, text
		}
	}
	if !m.has("search-space") {
		m.missing("search-space")
		return a
	}
	items, ok := d.seq(m.value["search-space"], m.field("search-space"))
	if !ok {
		return a
	}
	for i, it := range items {
		if s := d.searchEntry(e, it, idx(m.field("search-space"), i), agenticEntry, true); s != nil {
			a.SearchSpace = append(a.SearchSpace, s)
			// R7: DRAM offload is sized from the utilisation; it must be given.
			if s.KVOffloading == "dram" && a.DramUtilization == nil {
				d.errorf(m.node, m.field("dram-utilization"), "required when a search-space entry uses kv-offloading: dram")
			}
		}
	}
	return a
}

func (d *decoder) searchEntry(e *Entry, n *yaml.Node, path string, fields []string, agentic bool) *SearchEntry {
	m := d.mapping(n, path, fields)
	if m == nil {
		return nil
	}
	s := &SearchEntry{Pos: d.pos(m.node), Path: path, Node: m.node, SpecDecoding: "none", PP: 1, DCPSize: 1, PCPSize: 1}
	if m.has("spec-decoding") {
		s.SpecDecoding = d.literal(m, "spec-decoding", specDecodingValues)
	}
	s.PP = d.positive(m, "pp")
	s.DCPSize = d.positive(m, "dcp-size")
	s.PCPSize = d.positive(m, "pcp-size")
	if v, ok := m.optInt("tp"); ok {
		t := int(v)
		s.TP = &t
	}
	if v, ok := m.optInt("ep"); ok {
		t := int(v)
		s.EP = &t
	}
	if v, ok := m.optBool("dp-attn"); ok {
		s.DPAttn = &v
	}
	needPD := e.Multinode && !agentic // the multinode fixed-seq-len schema requires both blocks
	if m.has("prefill") && !isNull(m.value["prefill"]) {
		s.Prefill = d.worker(m.value["prefill"], m.field("prefill"))
	} else if needPD {
		m.missing("prefill")
	}
	if m.has("decode") && !isNull(m.value["decode"]) {
		s.Decode = d.worker(m.value["decode"], m.field("decode"))
	} else if needPD {
		m.missing("decode")
	}
	if m.has("router") {
		s.RouterPresent = true
		s.Router = d.component(m, "router")
	}
	if m.has("kv-p2p-transfer") {
		if !e.Multinode {
			d.errorf(m.key["kv-p2p-transfer"], m.field("kv-p2p-transfer"), "only valid when multinode is true")
		}
		s.KVP2PPresent = true
		s.KVP2PTransfer = d.p2p(m)
	}
	if m.has("kv-offloading") && !isNull(m.value["kv-offloading"]) {
		s.KVOffloading = d.literal(m, "kv-offloading", kvOffloadingValues)
	}
	s.KVOffloadBackend = d.component(m, "kv-offload-backend")
	d.conc(m, s)

	// tp and prefill/decode block rules (single-node fixed needs tp; the
	// multinode fixed schema has no tp field at all).
	if !e.Multinode && !agentic && !m.has("tp") {
		m.missing("tp")
	}
	if s.TP != nil && *s.TP%s.DCPSize != 0 {
		d.errorf(m.value["tp"], m.field("tp"), "'tp' (%d) must be divisible by 'dcp-size' (%d)", *s.TP, s.DCPSize)
	}
	if s.Prefill != nil && s.Decode != nil && (s.Prefill.Hardware != nil) != (s.Decode.Hardware != nil) {
		d.errorf(m.node, path, "hardware must be given on both prefill and decode or on neither")
	}
	if !agentic {
		return s
	}
	hasPD := s.Prefill != nil && s.Decode != nil
	switch {
	case s.TP != nil && (s.Prefill != nil || s.Decode != nil), s.TP == nil && !hasPD:
		d.errorf(m.node, path, "agentic search-space entries must specify either tp or both prefill and decode")
	case e.Multinode && s.TP != nil:
		d.errorf(m.value["tp"], m.field("tp"), "multinode agentic entries must give prefill and decode blocks, not tp")
	case !e.Multinode && hasPD:
		d.errorf(m.node, path, "prefill and decode blocks are only valid when multinode is true; give tp")
	}
	if s.TP != nil && s.KVOffloading == "" {
		d.errorf(m.node, m.field("kv-offloading"), "required (none or dram) when tp is given")
	}
	if hasPD {
		for _, k := range []string{"pp", "dcp-size", "pcp-size"} {
			if m.has(k) {
				d.errorf(m.key[k], m.field(k), "cannot specify 'pp', 'dcp-size', 'pcp-size' next to prefill and decode; set them inside the worker blocks")
			}
		}
	}
	switch {
	case s.KVOffloading == "" && s.KVOffloadBackend != nil:
		d.errorf(m.value["kv-offload-backend"], m.field("kv-offload-backend"), "given without kv-offloading")
	case s.KVOffloading == "none" && s.KVOffloadBackend != nil:
		d.errorf(m.value["kv-offload-backend"], m.field("kv-offload-backend"), "must not be given with kv-offloading: none")
	case s.KVOffloading == "dram" && s.KVOffloadBackend == nil:
		d.errorf(m.node, m.field("kv-offload-backend"), "required with kv-offloading: dram")
	}
	return s
}

// literal reads a string restricted to values; null is an error.
func (d *decoder) literal(m *mapping, key string, values []string) string {
	s, ok := d.str(m.value[key], m.field(key))
	if !ok {
		return ""
	}
	if !contains(values, s) {
		d.errorf(m.value[key], m.field(key), "expected one of %s, got %q", strings.Join(values, ", "), s)
	}
	return s
}

// positive reads pp/dcp-size/pcp-size: a genuine integer > 0, default 1.
func (d *decoder) positive(m *mapping, key string) int {
	if !m.has(key) {
		return 1
	}
	v, ok := d.int(m.value[key], m.field(key))
	if !ok {
		return 1
	}
	if v <= 0 {
		d.errorf(m.value[key], m.field(key), "must be > 0, got %d", v)
		return 1
	}
	return int(v)
}

// conc applies rule R1 to conc-start / conc-end / conc-list.
func (d *decoder) conc(m *mapping, s *SearchEntry) {
	if v, ok := m.optInt("conc-start"); ok {
		c := int(v)
		s.ConcStart = &c
	}
	if v, ok := m.optInt("conc-end"); ok {
		c := int(v)
		s.ConcEnd = &c
	}
	if m.has("conc-list") {
		s.ConcListPresent = true
		if isNull(m.value["conc-list"]) {
			s.ConcListNull = true
		} else if items, ok := d.seq(m.value["conc-list"], m.field("conc-list")); ok {
			s.ConcList = []int{}
			for i, it := range items {
				if v, ok := d.int(it, idx(m.field("conc-list"), i)); ok {
					if v <= 0 {
						d.errorf(it, idx(m.field("conc-list"), i), "concurrency must be > 0, got %d", v)
					}
					s.ConcList = append(s.ConcList, int(v))
					s.ConcListPos = append(s.ConcListPos, d.pos(it))
				}
			}
		}
	}
	hasRange := s.ConcStart != nil && s.ConcEnd != nil
	hasList := len(s.ConcList) > 0
	switch {
	case hasRange && hasList:
		d.errorf(m.value["conc-list"], m.field("conc-list"), "cannot be combined with conc-start/conc-end; use either a list or a range")
	case !hasRange && !hasList:
		d.errorf(m.node, m.field("conc-list"), "give either a non-empty conc-list or both conc-start and conc-end")
	case hasRange:
		if *s.ConcStart <= 0 {
			d.errorf(m.value["conc-start"], m.field("conc-start"), "concurrency must be > 0, got %d", *s.ConcStart)
		}
		if *s.ConcEnd <= 0 {
			d.errorf(m.value["conc-end"], m.field("conc-end"), "concurrency must be > 0, got %d", *s.ConcEnd)
		}
		if *s.ConcStart > *s.ConcEnd {
			d.errorf(m.value["conc-start"], m.field("conc-start"), "(%d) must be <= conc-end (%d)", *s.ConcStart, *s.ConcEnd)
		}
	}
}

func (d *decoder) worker(n *yaml.Node, path string) *Worker {
	m := d.mapping(n, path, workerFields)
	if m == nil {
		return nil
	}
	w := &Worker{Pos: d.pos(m.node), Path: path, Node: m.node}
	if v, ok := m.reqInt("num-worker"); ok {
		w.NumWorker = int(v)
	}
	if v, ok := m.reqInt("tp"); ok {
		w.TP = int(v)
	}
	if v, ok := m.reqInt("ep"); ok {
		w.EP = int(v)
	}
	w.DPAttn, _ = m.reqBool("dp-attn")
	w.PP = d.positive(m, "pp")
	w.DCPSize = d.positive(m, "dcp-size")
	w.PCPSize = d.positive(m, "pcp-size")
	if w.TP%w.DCPSize != 0 {
		d.errorf(m.value["tp"], m.field("tp"), "'tp' (%d) must be divisible by 'dcp-size' (%d)", w.TP, w.DCPSize)
	}
	if s, ok := m.optStr("hardware"); ok {
		if s == "" {
			d.errorf(m.value["hardware"], m.field("hardware"), "must not be empty")
		}
		w.Hardware = &s
	}
	if v := m.get("additional-settings"); v != nil {
		if items, ok := d.seq(v, m.field("additional-settings")); ok {
			for i, it := range items {
				if s, ok := d.str(it, idx(m.field("additional-settings"), i)); ok {
					w.AdditionalSettings = append(w.AdditionalSettings, s)
					w.SettingPos = append(w.SettingPos, d.pos(it))
				}
			}
		}
	}
	return w
}

func cleanIOError(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Sprintf("%s %s: %v", pe.Op, DisplayPath(pe.Path), pe.Err)
	}
	return err.Error()
}

// FieldPos is where key is written in the entry (the entry itself when absent).
func (s *SearchEntry) FieldPos(key string) Pos { return keyPos(s.Node, key, s.Pos) }

// FieldPos is where key is written in the config key's mapping.
func (e *Entry) FieldPos(key string) Pos { return keyPos(e.Node, key, e.Pos) }

// FieldPos is where key is written in the worker block.
func (w *Worker) FieldPos(key string) Pos { return keyPos(w.Node, key, w.Pos) }

func keyPos(n *yaml.Node, key string, fallback Pos) Pos {
	if n = deref(n); n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if deref(n.Content[i]).Value == key {
				return Pos{File: fallback.File, Line: n.Content[i].Line}
			}
		}
	}
	return fallback
}
