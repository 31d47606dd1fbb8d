package ixconfig

import (
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Master is the merged content of one or more InferenceX master config files
// (nvidia-master.yaml format), validated by the rules of InferenceX's
// generate_sweep_configs.py, with the one deliberate difference that
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
	Pos  strictyaml.Pos // where the key is written
	Node *yaml.Node     // the entry's mapping, verbatim

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
	Pos     strictyaml.Pos
	Name    string
	Version *string
	Node    *yaml.Node
}

// FixedSeqLen is one scenarios.fixed-seq-len item.
type FixedSeqLen struct {
	Pos         strictyaml.Pos
	Path        string
	ISL, OSL    int
	SearchSpace []*SearchEntry
}

// AgenticCoding is one scenarios.agentic-coding item.
type AgenticCoding struct {
	Pos  strictyaml.Pos
	Path string
	// DramUtilization is nil when absent or null. DramUtilizationText is its
	// shortest round-trip decimal, the exact value InferenceX computes with.
	DramUtilization     *float64
	DramUtilizationText string
	SearchSpace         []*SearchEntry
}

// SearchEntry is one search-space item of either scenario type.
type SearchEntry struct {
	Pos  strictyaml.Pos
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
	ConcListPos        []strictyaml.Pos
}

// Worker is a prefill or decode block.
type Worker struct {
	Pos  strictyaml.Pos
	Path string
	Node *yaml.Node // verbatim mapping; rows emit its keys in this order

	NumWorker, TP, EP    int
	DPAttn               bool
	PP, DCPSize, PCPSize int

	Hardware           *string
	AdditionalSettings []string
	SettingPos         []strictyaml.Pos
}

// Setting returns the value of KEY=VALUE in additional-settings.
func (w *Worker) Setting(key string) (string, strictyaml.Pos, bool) {
	if w == nil {
		return "", strictyaml.Pos{}, false
	}
	for i, s := range w.AdditionalSettings {
		if k, v, ok := strings.Cut(s, "="); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), w.SettingPos[i], true
		}
	}
	return "", strictyaml.Pos{}, false
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
	var errs strictyaml.Errors
	m := &Master{index: map[string]*Entry{}}
	if len(paths) == 0 {
		errs.Add(strictyaml.Pos{File: "(command line)"}, "config-files", "no master config files given")
		return nil, errs.Err()
	}
	for _, p := range paths {
		display := strictyaml.DisplayPath(p)
		data, err := os.ReadFile(p)
		if err != nil {
			errs.Add(strictyaml.Pos{File: display}, "", "cannot read master config: %v", strictyaml.CleanIOError(err))
			continue
		}
		entries := parseMaster(display, data, &errs)
		m.Files = append(m.Files, display)
		for _, e := range entries {
			if prev := m.index[e.Key]; prev != nil {
				errs.Add(e.Pos, e.Key, "duplicate config key (already defined at %s)", prev.Pos)
				continue
			}
			m.index[e.Key] = e
			m.Entries = append(m.Entries, e)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// ParseMaster validates one master config document held in memory.
func ParseMaster(display string, data []byte) (*Master, error) {
	var errs strictyaml.Errors
	entries := parseMaster(display, data, &errs)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	m := &Master{Files: []string{display}, Entries: entries, index: map[string]*Entry{}}
	for _, e := range entries {
		m.index[e.Key] = e
	}
	return m, nil
}

func parseMaster(display string, data []byte, errs *strictyaml.Errors) []*Entry {
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		errs.AddErr(err)
		return nil
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: errs}}
	top := d.Mapping(root, "", nil)
	if top == nil {
		return nil
	}
	var out []*Entry
	for _, key := range top.Keys {
		if strings.Contains(key, "*") {
			d.Errorf(top.KeyNodes[key], key, "config keys may not contain '*' (reserved for key globs)")
			continue
		}
		if e := d.entry(key, top.KeyNodes[key], top.Values[key]); e != nil {
			out = append(out, e)
		}
	}
	return out
}

func (d *decoder) entry(key string, kn, vn *yaml.Node) *Entry {
	e := &Entry{Key: key, Pos: d.Pos(kn), Node: vn}
	// Dispatch on multinode first: it decides which schema applies.
	multinode := false
	if vm := strictyaml.Deref(vn); vm != nil && vm.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(vm.Content); i += 2 {
			if strictyaml.Deref(vm.Content[i]).Value == "multinode" {
				if v, err := strictyaml.ScalarValue(vm.Content[i+1]); err == nil && (v == true || v == int64(1)) {
					multinode = true
				}
			}
		}
	}
	fields := masterFieldsSN
	if multinode {
		fields = masterFieldsMN
	}
	m := d.Mapping(vn, key, fields)
	if m == nil {
		return nil
	}
	nErr := len(*d.Errs)
	e.Image = m.ReqStr("image")
	e.Model = m.ReqStr("model")
	e.ModelPrefix = m.ReqStr("model-prefix")
	e.Precision = m.ReqStr("precision")
	e.Framework = m.ReqStr("framework")
	e.Runner = m.ReqStr("runner")
	if mn, ok := m.ReqBool("multinode"); ok {
		e.Multinode = mn
	}
	if m.Has("disagg") {
		e.DisaggNode = m.Values["disagg"]
		e.Disagg, _ = d.Boolean(m.Values["disagg"], m.Field("disagg"))
		if !e.Multinode && e.Disagg {
			d.Errorf(m.Values["disagg"], m.Field("disagg"), "single-node entries cannot be disaggregated; expected false")
		}
	}
	e.Router = d.component(m, "router")
	if m.Has("kv-p2p-transfer") {
		e.KVP2PTransfer = d.p2p(m)
	}
	if !m.Has("scenarios") {
		m.Missing("scenarios")
		return nil
	}
	sm := d.Mapping(m.Values["scenarios"], m.Field("scenarios"), scenarioFields)
	if sm == nil {
		return nil
	}
	nonEmpty := false
	if n := sm.Get("fixed-seq-len"); n != nil {
		items, ok := d.Seq(n, sm.Field("fixed-seq-len"))
		nonEmpty = nonEmpty || len(items) > 0
		for i, it := range items {
			if ok {
				if f := d.fixed(e, it, strictyaml.Index(sm.Field("fixed-seq-len"), i)); f != nil {
					e.Fixed = append(e.Fixed, f)
				}
			}
		}
	}
	if n := sm.Get("agentic-coding"); n != nil {
		items, ok := d.Seq(n, sm.Field("agentic-coding"))
		nonEmpty = nonEmpty || len(items) > 0
		for i, it := range items {
			if ok {
				if a := d.agentic(e, it, strictyaml.Index(sm.Field("agentic-coding"), i)); a != nil {
					e.Agentic = append(e.Agentic, a)
				}
			}
		}
		// R8: agentic configs run on whole clusters, named by an exact label.
		if len(items) > 0 && !strings.HasPrefix(e.Runner, "cluster:") {
			d.Errorf(m.Values["runner"], m.Field("runner"), "agentic-coding configs need a 'cluster:<name>' runner label, got %q", e.Runner)
		}
	}
	if !nonEmpty {
		d.Errorf(sm.Node, sm.Path, "at least one scenario type (fixed-seq-len or agentic-coding) must be a non-empty list")
	}
	d.crossChecks(e)
	if len(*d.Errs) > nErr {
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
			d.Errs.Add(s.Router.Pos, s.Path+".router", "router must be declared either at the top level (line %d) or in search-space entries, not both", e.Router.Pos.Line)
		}
		if e.KVP2PTransfer != nil && s.KVP2PTransfer != nil {
			d.Errs.Add(s.FieldPos("kv-p2p-transfer"), s.Path+".kv-p2p-transfer", "kv-p2p-transfer must be declared either at the top level or in search-space entries, not both")
		}
	}
	if e.Multinode && e.Disagg && e.KVP2PTransfer == nil {
		if len(all) == 0 {
			d.Errs.Add(e.Pos, e.Key+".kv-p2p-transfer", "disaggregated configs must name a kv-p2p-transfer (top level or in every search-space entry)")
		}
		for _, s := range all {
			if s.KVP2PTransfer == nil {
				d.Errs.Add(s.Pos, s.Path+".kv-p2p-transfer", "disaggregated configs must name a kv-p2p-transfer here or at the top level")
			}
		}
	}
}

func (d *decoder) component(m *strictyaml.Mapping, key string) *Component {
	n := m.Get(key)
	if n == nil {
		return nil
	}
	cm := d.Mapping(n, m.Field(key), componentKeys)
	if cm == nil {
		return nil
	}
	c := &Component{Pos: d.Pos(cm.Node), Node: cm.Node}
	if !cm.Has("name") {
		cm.Missing("name")
	} else if s, ok := d.Str(cm.Values["name"], cm.Field("name")); ok {
		if s == "" {
			d.Errorf(cm.Values["name"], cm.Field("name"), "must not be empty")
		}
		c.Name = s
	}
	if key == "router" && !cm.Has("version") {
		cm.Missing("version")
	}
	if cm.Has("version") {
		if key == "router" || !strictyaml.IsNull(cm.Values["version"]) {
			if s, ok := d.Str(cm.Values["version"], cm.Field("version")); ok {
				switch {
				case s == "":
					d.Errorf(cm.Values["version"], cm.Field("version"), "must not be empty")
				case strings.HasPrefix(s, "image:"):
					d.Errorf(cm.Values["version"], cm.Field("version"), "must be a release, package or commit, not an image: reference")
				}
				c.Version = &s
			}
		}
	}
	return c
}

func (d *decoder) p2p(m *strictyaml.Mapping) *string {
	n := m.Get("kv-p2p-transfer")
	if n == nil {
		return nil
	}
	s, ok := d.Str(n, m.Field("kv-p2p-transfer"))
	if !ok {
		return nil
	}
	if s == "" {
		d.Errorf(n, m.Field("kv-p2p-transfer"), "must not be empty")
	}
	return &s
}

func (d *decoder) fixed(e *Entry, n *yaml.Node, path string) *FixedSeqLen {
	m := d.Mapping(n, path, fixedFields)
	if m == nil {
		return nil
	}
	f := &FixedSeqLen{Pos: d.Pos(m.Node), Path: path}
	if v, ok := m.ReqInt("isl"); ok {
		f.ISL = int(v)
	}
	if v, ok := m.ReqInt("osl"); ok {
		f.OSL = int(v)
	}
	if !m.Has("search-space") {
		m.Missing("search-space")
		return f
	}
	items, ok := d.Seq(m.Values["search-space"], m.Field("search-space"))
	if !ok {
		return f
	}
	for i, it := range items {
		p := strictyaml.Index(m.Field("search-space"), i)
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
	m := d.Mapping(n, path, agenticFields)
	if m == nil {
		return nil
	}
	a := &AgenticCoding{Pos: d.Pos(m.Node), Path: path}
	if v := m.Get("dram-utilization"); v != nil {
		if u, text, ok := d.Number(v, m.Field("dram-utilization")); ok {
			if u <= 0 || u > 1 {
				d.Errorf(v, m.Field("dram-utilization"), "must be > 0 and <= 1, got %s", text)
			}
			a.DramUtilization, a.DramUtilizationText = &u, text
		}
	}
	if !m.Has("search-space") {
		m.Missing("search-space")
		return a
	}
	items, ok := d.Seq(m.Values["search-space"], m.Field("search-space"))
	if !ok {
		return a
	}
	for i, it := range items {
		if s := d.searchEntry(e, it, strictyaml.Index(m.Field("search-space"), i), agenticEntry, true); s != nil {
			a.SearchSpace = append(a.SearchSpace, s)
			// R7: DRAM offload is sized from the utilisation; it must be given.
			if s.KVOffloading == "dram" && a.DramUtilization == nil {
				d.Errorf(m.Node, m.Field("dram-utilization"), "required when a search-space entry uses kv-offloading: dram")
			}
		}
	}
	return a
}

func (d *decoder) searchEntry(e *Entry, n *yaml.Node, path string, fields []string, agentic bool) *SearchEntry {
	m := d.Mapping(n, path, fields)
	if m == nil {
		return nil
	}
	s := &SearchEntry{Pos: d.Pos(m.Node), Path: path, Node: m.Node, SpecDecoding: "none", PP: 1, DCPSize: 1, PCPSize: 1}
	if m.Has("spec-decoding") {
		s.SpecDecoding = d.literal(m, "spec-decoding", specDecodingValues)
	}
	s.PP = d.positive(m, "pp")
	s.DCPSize = d.positive(m, "dcp-size")
	s.PCPSize = d.positive(m, "pcp-size")
	if v, ok := m.OptInt("tp"); ok {
		t := int(v)
		s.TP = &t
	}
	if v, ok := m.OptInt("ep"); ok {
		t := int(v)
		s.EP = &t
	}
	if v, ok := m.OptBool("dp-attn"); ok {
		s.DPAttn = &v
	}
	needPD := e.Multinode && !agentic // the multinode fixed-seq-len schema requires both blocks
	if m.Has("prefill") && !strictyaml.IsNull(m.Values["prefill"]) {
		s.Prefill = d.worker(m.Values["prefill"], m.Field("prefill"))
	} else if needPD {
		m.Missing("prefill")
	}
	if m.Has("decode") && !strictyaml.IsNull(m.Values["decode"]) {
		s.Decode = d.worker(m.Values["decode"], m.Field("decode"))
	} else if needPD {
		m.Missing("decode")
	}
	if m.Has("router") {
		s.RouterPresent = true
		s.Router = d.component(m, "router")
	}
	if m.Has("kv-p2p-transfer") {
		if !e.Multinode {
			d.Errorf(m.KeyNodes["kv-p2p-transfer"], m.Field("kv-p2p-transfer"), "only valid when multinode is true")
		}
		s.KVP2PPresent = true
		s.KVP2PTransfer = d.p2p(m)
	}
	if m.Has("kv-offloading") && !strictyaml.IsNull(m.Values["kv-offloading"]) {
		s.KVOffloading = d.literal(m, "kv-offloading", kvOffloadingValues)
	}
	s.KVOffloadBackend = d.component(m, "kv-offload-backend")
	d.conc(m, s)

	// tp and prefill/decode block rules (single-node fixed needs tp; the
	// multinode fixed schema has no tp field at all).
	if !e.Multinode && !agentic && !m.Has("tp") {
		m.Missing("tp")
	}
	if s.TP != nil && *s.TP%s.DCPSize != 0 {
		d.Errorf(m.Values["tp"], m.Field("tp"), "'tp' (%d) must be divisible by 'dcp-size' (%d)", *s.TP, s.DCPSize)
	}
	if s.Prefill != nil && s.Decode != nil && (s.Prefill.Hardware != nil) != (s.Decode.Hardware != nil) {
		d.Errorf(m.Node, path, "hardware must be given on both prefill and decode or on neither")
	}
	if !agentic {
		return s
	}
	hasPD := s.Prefill != nil && s.Decode != nil
	switch {
	case s.TP != nil && (s.Prefill != nil || s.Decode != nil), s.TP == nil && !hasPD:
		d.Errorf(m.Node, path, "agentic search-space entries must specify either tp or both prefill and decode")
	case e.Multinode && s.TP != nil:
		d.Errorf(m.Values["tp"], m.Field("tp"), "multinode agentic entries must give prefill and decode blocks, not tp")
	case !e.Multinode && hasPD:
		d.Errorf(m.Node, path, "prefill and decode blocks are only valid when multinode is true; give tp")
	}
	if s.TP != nil && s.KVOffloading == "" {
		d.Errorf(m.Node, m.Field("kv-offloading"), "required (none or dram) when tp is given")
	}
	if hasPD {
		for _, k := range []string{"pp", "dcp-size", "pcp-size"} {
			if m.Has(k) {
				d.Errorf(m.KeyNodes[k], m.Field(k), "cannot specify 'pp', 'dcp-size', 'pcp-size' next to prefill and decode; set them inside the worker blocks")
			}
		}
	}
	switch {
	case s.KVOffloading == "" && s.KVOffloadBackend != nil:
		d.Errorf(m.Values["kv-offload-backend"], m.Field("kv-offload-backend"), "given without kv-offloading")
	case s.KVOffloading == "none" && s.KVOffloadBackend != nil:
		d.Errorf(m.Values["kv-offload-backend"], m.Field("kv-offload-backend"), "must not be given with kv-offloading: none")
	case s.KVOffloading == "dram" && s.KVOffloadBackend == nil:
		d.Errorf(m.Node, m.Field("kv-offload-backend"), "required with kv-offloading: dram")
	}
	return s
}

// literal reads a string restricted to values; null is an error.
func (d *decoder) literal(m *strictyaml.Mapping, key string, values []string) string {
	s, ok := d.Str(m.Values[key], m.Field(key))
	if !ok {
		return ""
	}
	if !slices.Contains(values, s) {
		d.Errorf(m.Values[key], m.Field(key), "expected one of %s, got %q", strings.Join(values, ", "), s)
	}
	return s
}

// positive reads pp/dcp-size/pcp-size: a genuine integer > 0, default 1.
func (d *decoder) positive(m *strictyaml.Mapping, key string) int {
	if !m.Has(key) {
		return 1
	}
	v, ok := d.Int(m.Values[key], m.Field(key))
	if !ok {
		return 1
	}
	if v <= 0 {
		d.Errorf(m.Values[key], m.Field(key), "must be > 0, got %d", v)
		return 1
	}
	return int(v)
}

// conc applies rule R1 to conc-start / conc-end / conc-list.
func (d *decoder) conc(m *strictyaml.Mapping, s *SearchEntry) {
	if v, ok := m.OptInt("conc-start"); ok {
		c := int(v)
		s.ConcStart = &c
	}
	if v, ok := m.OptInt("conc-end"); ok {
		c := int(v)
		s.ConcEnd = &c
	}
	if m.Has("conc-list") {
		s.ConcListPresent = true
		if strictyaml.IsNull(m.Values["conc-list"]) {
			s.ConcListNull = true
		} else if items, ok := d.Seq(m.Values["conc-list"], m.Field("conc-list")); ok {
			s.ConcList = []int{}
			for i, it := range items {
				if v, ok := d.Int(it, strictyaml.Index(m.Field("conc-list"), i)); ok {
					if v <= 0 {
						d.Errorf(it, strictyaml.Index(m.Field("conc-list"), i), "concurrency must be > 0, got %d", v)
					}
					s.ConcList = append(s.ConcList, int(v))
					s.ConcListPos = append(s.ConcListPos, d.Pos(it))
				}
			}
		}
	}
	hasRange := s.ConcStart != nil && s.ConcEnd != nil
	hasList := len(s.ConcList) > 0
	switch {
	case hasRange && hasList:
		d.Errorf(m.Values["conc-list"], m.Field("conc-list"), "cannot be combined with conc-start/conc-end; use either a list or a range")
	case !hasRange && !hasList:
		d.Errorf(m.Node, m.Field("conc-list"), "give either a non-empty conc-list or both conc-start and conc-end")
	case hasRange:
		if *s.ConcStart <= 0 {
			d.Errorf(m.Values["conc-start"], m.Field("conc-start"), "concurrency must be > 0, got %d", *s.ConcStart)
		}
		if *s.ConcEnd <= 0 {
			d.Errorf(m.Values["conc-end"], m.Field("conc-end"), "concurrency must be > 0, got %d", *s.ConcEnd)
		}
		if *s.ConcStart > *s.ConcEnd {
			d.Errorf(m.Values["conc-start"], m.Field("conc-start"), "(%d) must be <= conc-end (%d)", *s.ConcStart, *s.ConcEnd)
		}
	}
}

func (d *decoder) worker(n *yaml.Node, path string) *Worker {
	m := d.Mapping(n, path, workerFields)
	if m == nil {
		return nil
	}
	w := &Worker{Pos: d.Pos(m.Node), Path: path, Node: m.Node}
	if v, ok := m.ReqInt("num-worker"); ok {
		w.NumWorker = int(v)
	}
	if v, ok := m.ReqInt("tp"); ok {
		w.TP = int(v)
	}
	if v, ok := m.ReqInt("ep"); ok {
		w.EP = int(v)
	}
	w.DPAttn, _ = m.ReqBool("dp-attn")
	w.PP = d.positive(m, "pp")
	w.DCPSize = d.positive(m, "dcp-size")
	w.PCPSize = d.positive(m, "pcp-size")
	if w.TP%w.DCPSize != 0 {
		d.Errorf(m.Values["tp"], m.Field("tp"), "'tp' (%d) must be divisible by 'dcp-size' (%d)", w.TP, w.DCPSize)
	}
	if s, ok := m.OptStr("hardware"); ok {
		if s == "" {
			d.Errorf(m.Values["hardware"], m.Field("hardware"), "must not be empty")
		}
		w.Hardware = &s
	}
	if v := m.Get("additional-settings"); v != nil {
		if items, ok := d.Seq(v, m.Field("additional-settings")); ok {
			for i, it := range items {
				if s, ok := d.Str(it, strictyaml.Index(m.Field("additional-settings"), i)); ok {
					w.AdditionalSettings = append(w.AdditionalSettings, s)
					w.SettingPos = append(w.SettingPos, d.Pos(it))
				}
			}
		}
	}
	return w
}

// FieldPos is where key is written in the entry (the entry itself when absent).
func (s *SearchEntry) FieldPos(key string) strictyaml.Pos { return keyPos(s.Node, key, s.Pos) }

// FieldPos is where key is written in the config key's mapping.
func (e *Entry) FieldPos(key string) strictyaml.Pos { return keyPos(e.Node, key, e.Pos) }

// FieldPos is where key is written in the worker block.
func (w *Worker) FieldPos(key string) strictyaml.Pos { return keyPos(w.Node, key, w.Pos) }

func keyPos(n *yaml.Node, key string, fallback strictyaml.Pos) strictyaml.Pos {
	if n = strictyaml.Deref(n); n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if strictyaml.Deref(n.Content[i]).Value == key {
				return strictyaml.Pos{File: fallback.File, Line: n.Content[i].Line}
			}
		}
	}
	return fallback
}
