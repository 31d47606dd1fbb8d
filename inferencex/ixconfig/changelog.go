package ixconfig

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Changelog is an InferenceX perf-changelog.yaml: an append-only list of
// entries, each naming the config keys a change affects. Adding an entry is
// what triggers a sweep of those keys.
type Changelog struct {
	Path    string // display path
	Raw     []byte
	Entries []*ChangelogEntry
}

// ChangelogEntry is one entry of a perf changelog.
type ChangelogEntry struct {
	Index       int            // 1-based position in the file
	Pos         strictyaml.Pos // the entry's first line
	ConfigKeys  []string
	KeyPos      []strictyaml.Pos // line of each config key
	Description []string
	PRLink      string
	EvalsOnly   bool
	AllEvals    bool
	NoEvals     bool
	AppendOnly  bool
	// EvalMinPrefillEP drops multinode eval rows whose prefill EP is below
	// it (0: not set).
	EvalMinPrefillEP int
	// ScenarioTypes restricts the entry to these scenarios; nil means all.
	ScenarioTypes []string
	// Problems are what is wrong with the entry. InferenceX validates only
	// the entries a change adds, so old entries written before a rule
	// existed do not stop the file from loading; Check reports them for
	// the entries a sweep selects.
	Problems strictyaml.Errors
	fields   map[string]strictyaml.Pos
}

// Check returns the problems of the given entries (nil when there are none).
func (c *Changelog) Check(entries []*ChangelogEntry) error {
	var all strictyaml.Errors
	for _, e := range entries {
		all = append(all, e.Problems...)
	}
	return all.Err()
}

// FieldPos is the line of one of the entry's fields (the entry's line when
// the field is absent).
func (e *ChangelogEntry) FieldPos(field string) strictyaml.Pos {
	if p, ok := e.fields[field]; ok {
		return p
	}
	return e.Pos
}

// Changelog scenario types, as InferenceX spells them.
const (
	ScenarioFixedSeqLen   = "fixed-seq-len"
	ScenarioAgenticCoding = "agentic-coding"
)

var changelogFields = []string{"config-keys", "description", "pr-link", "evals-only", "all-evals", "no-evals",
	"append-only", "eval-min-prefill-ep", "scenario-type"}

// prLinkRe is InferenceX's canonical PR link; XXX stands for the PR's own
// link before it has a number.
var prLinkRe = regexp.MustCompile(`^https://github\.com/SemiAnalysisAI/InferenceX/pull/(?:[1-9][0-9]*|XXX)$`)

// LoadChangelog reads and validates a perf changelog.
func LoadChangelog(path string) (*Changelog, error) {
	display := strictyaml.DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: "cannot read changelog: " + strictyaml.CleanIOError(err)}
	}
	return ParseChangelog(display, data)
}

// ParseChangelog reads a perf changelog held in memory. The file must be a
// YAML list of mappings; each entry is checked the way InferenceX's ChangelogEntry model checks it: the known
// fields only, config-keys and description non-empty lists of strings, a
// canonical pr-link (or XXX), the eval flags booleans, scenario-type a
// non-empty list of fixed-seq-len / agentic-coding, and no-evals or
// append-only never combined with an eval selection field. The file itself
// must end with a newline and hold no tabs, carriage returns or NULs.
func ParseChangelog(display string, data []byte) (*Changelog, error) {
	var errs strictyaml.Errors
	for _, bad := range []struct {
		b    byte
		name string
	}{{'\t', "a tab"}, {'\r', "a carriage return"}, {0, "a NUL byte"}} {
		if i := bytes.IndexByte(data, bad.b); i >= 0 {
			errs.Add(strictyaml.Pos{File: display, Line: 1 + bytes.Count(data[:i], []byte{'\n'})}, "", "%s; the changelog must hold none", bad.name)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		errs.Add(strictyaml.Pos{File: display, Line: 1 + bytes.Count(data, []byte{'\n'})}, "", "no newline at the end of the file")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	items, ok := d.Seq(root, "")
	if !ok {
		return nil, errs.Err()
	}
	cl := &Changelog{Path: display, Raw: data}
	for i, it := range items {
		var probs strictyaml.Errors
		ed := &decoder{&strictyaml.Decoder{File: display, Errs: &probs}}
		e := ed.changelogEntry(it, i)
		if e == nil { // not a mapping: the file is not a changelog
			errs.AddErr(probs)
			continue
		}
		e.Problems = probs
		cl.Entries = append(cl.Entries, e)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if len(cl.Entries) == 0 {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display, Line: 1}, Msg: "the changelog has no entries"}
	}
	return cl, nil
}

func (d *decoder) changelogEntry(n *yaml.Node, i int) *ChangelogEntry {
	path := fmt.Sprintf("entry %d", i+1)
	m := d.Mapping(n, path, changelogFields)
	if m == nil {
		return nil
	}
	e := &ChangelogEntry{Index: i + 1, Pos: d.Pos(n), fields: map[string]strictyaml.Pos{}}
	for _, k := range m.Keys {
		e.fields[k] = d.Pos(m.KeyNodes[k])
	}
	e.ConfigKeys, e.KeyPos = d.changelogList(m, "config-keys")
	for j, k := range e.ConfigKeys {
		if k == "" {
			d.Errorf(n, strictyaml.Index(m.Field("config-keys"), j), "must not be empty")
		}
	}
	e.Description, _ = d.changelogList(m, "description")
	if link := m.ReqStr("pr-link"); link != "" {
		e.PRLink = link
		if link != "XXX" && !prLinkRe.MatchString(link) {
			d.Errorf(m.Values["pr-link"], m.Field("pr-link"), "%q is not a PR link; want https://github.com/SemiAnalysisAI/InferenceX/pull/N (pull/XXX before the PR has a number)", link)
		}
	}
	e.EvalsOnly, _ = m.OptBool("evals-only")
	e.AllEvals, _ = m.OptBool("all-evals")
	e.NoEvals, _ = m.OptBool("no-evals")
	e.AppendOnly, _ = m.OptBool("append-only")
	if v, ok := m.OptInt("eval-min-prefill-ep"); ok {
		if v < 1 {
			d.Errorf(m.Values["eval-min-prefill-ep"], m.Field("eval-min-prefill-ep"), "must be at least 1, got %d", v)
		} else {
			e.EvalMinPrefillEP = int(v)
		}
	}
	if m.Has("scenario-type") {
		sts, pos := d.changelogList(m, "scenario-type")
		for j, st := range sts {
			if st != ScenarioFixedSeqLen && st != ScenarioAgenticCoding {
				d.Errs.Add(pos[j], strictyaml.Index(m.Field("scenario-type"), j), "unknown scenario type %q; want %s or %s", st, ScenarioFixedSeqLen, ScenarioAgenticCoding)
			} else if !slices.Contains(e.ScenarioTypes, st) {
				e.ScenarioTypes = append(e.ScenarioTypes, st)
			}
		}
	}
	evalSel := e.EvalsOnly || e.AllEvals || e.EvalMinPrefillEP > 0
	if e.NoEvals && evalSel {
		d.Errorf(m.KeyNodes["no-evals"], m.Field("no-evals"), "no-evals cannot be combined with evals-only, all-evals or eval-min-prefill-ep")
	}
	if e.AppendOnly && evalSel {
		d.Errorf(m.KeyNodes["append-only"], m.Field("append-only"), "append-only cannot be combined with evals-only, all-evals or eval-min-prefill-ep")
	}
	return e
}

// changelogList reads a required non-empty list of strings with the line of
// each item.
func (d *decoder) changelogList(m *strictyaml.Mapping, key string) ([]string, []strictyaml.Pos) {
	n := m.Get(key)
	if n == nil {
		m.Missing(key)
		return nil, nil
	}
	items, ok := d.Seq(n, m.Field(key))
	if !ok {
		return nil, nil
	}
	if len(items) == 0 {
		d.Errorf(n, m.Field(key), "must not be empty")
	}
	var out []string
	var pos []strictyaml.Pos
	for i, it := range items {
		if s, ok := d.Str(it, strictyaml.Index(m.Field(key), i)); ok {
			out = append(out, s)
			pos = append(pos, d.Pos(it))
		}
	}
	return out, pos
}
