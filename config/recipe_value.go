package config

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Map is a recipe mapping that srt-slurm hands to a program as it is
// written: engine args, environments, frontend args, aiperf args. Keys keep
// their file order and values are typed as PyYAML reads them (nil, bool,
// int64, float64, string, []any or *Map), so a launcher can print them the
// way Python would. A key written twice keeps its first place and its last
// value, as a Python dict does.
type Map struct {
	Keys []string
	Vals map[string]any
	// Path is where the mapping is written, e.g. backend.decode_environment
	// (not part of the resolved recipe).
	Path string
	// Pos is where each key is written (not part of the resolved recipe).
	Pos map[string]strictyaml.Pos
	// SingleQuoted marks string values written in single quotes: InferenceX's
	// vLLM synthetic-acceptance injector rewrites only those.
	SingleQuoted map[string]bool
}

// NewMap returns an empty Map.
func NewMap() *Map { return &Map{Vals: map[string]any{}} }

// Len is the number of keys (0 for nil).
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.Keys)
}

// Get returns k's value and whether k is present.
func (m *Map) Get(k string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.Vals[k]
	return v, ok
}

// Has reports whether k is present (even with a null value).
func (m *Map) Has(k string) bool { _, ok := m.Get(k); return ok }

// Str returns k's value as a string ("" when absent or not a string).
func (m *Map) Str(k string) string {
	v, _ := m.Get(k)
	s, _ := v.(string)
	return s
}

// Set adds or replaces k; a replaced key keeps its place.
func (m *Map) Set(k string, v any) {
	if m.Vals == nil {
		m.Vals = map[string]any{}
	}
	if _, ok := m.Vals[k]; !ok {
		m.Keys = append(m.Keys, k)
	}
	m.Vals[k] = v
}

// Delete removes k.
func (m *Map) Delete(k string) {
	if !m.Has(k) {
		return
	}
	delete(m.Vals, k)
	for i, x := range m.Keys {
		if x == k {
			m.Keys = append(m.Keys[:i:i], m.Keys[i+1:]...)
			break
		}
	}
	delete(m.Pos, k)
	delete(m.SingleQuoted, k)
}

// Clone copies m deeply (nested maps and lists included).
func (m *Map) Clone() *Map {
	if m == nil {
		return nil
	}
	c := &Map{Keys: append([]string(nil), m.Keys...), Vals: make(map[string]any, len(m.Vals)), Path: m.Path}
	for k, v := range m.Vals {
		c.Vals[k] = cloneValue(v)
	}
	if m.Pos != nil {
		c.Pos = make(map[string]strictyaml.Pos, len(m.Pos))
		for k, p := range m.Pos {
			c.Pos[k] = p
		}
	}
	if m.SingleQuoted != nil {
		c.SingleQuoted = make(map[string]bool, len(m.SingleQuoted))
		for k, q := range m.SingleQuoted {
			c.SingleQuoted[k] = q
		}
	}
	return c
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case *Map:
		return x.Clone()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// At is the i-th key and its value, so a Map dumps as a Python dict
// (pyjson.Object).
func (m *Map) At(i int) (string, any) { return m.Keys[i], m.Vals[m.Keys[i]] }

// MarshalJSON writes the map as a JSON object with its keys in order (the
// process fields of srt-slurm's renders). The resolved recipe does not use
// it: there a value keeps its Python type (writeCanonical).
func (m *Map) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		return nil
	}
	b.WriteByte('{')
	for i, k := range m.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := put(k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := put(m.Vals[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		s := "nan"
		switch {
		case math.IsInf(x, 1):
			s = "inf"
		case math.IsInf(x, -1):
			s = "-inf"
		case !math.IsNaN(x):
			s = strconv.FormatFloat(x, 'g', -1, 64)
		}
		b.WriteString(`{"float":"` + s + `"}`)
	case string:
		s, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(s)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *Map:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteString(`{"map":[`)
		for i, k := range x.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			ks, _ := json.Marshal(k)
			b.WriteByte('[')
			b.Write(ks)
			b.WriteByte(',')
			if err := writeCanonical(b, x.Vals[k]); err != nil {
				return err
			}
			b.WriteByte(']')
		}
		b.WriteString("]}")
	default:
		s, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(s)
	}
	return nil
}

// pyValue converts n into the value PyYAML's safe_load builds, with
// mappings as *Map (positions and quoting kept). Keys are their text, as
// srt-slurm's flag builders see them.
func (d *recipeDecoder) pyValue(n *yaml.Node, field string, depth int) (any, bool) {
	n = strictyaml.Deref(n)
	if n == nil {
		return nil, true
	}
	if depth > 64 {
		d.Errorf(n, field, "nested too deeply")
		return nil, false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := strictyaml.ScalarValue(n)
		if err != nil {
			d.Errorf(n, field, "%v", err)
			return nil, false
		}
		return v, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := d.pyValue(c, strictyaml.Index(field, i), depth+1)
			ok = ok && vok
			out = append(out, v)
		}
		return out, ok
	case yaml.MappingNode:
		m := NewMap()
		m.Path = field
		ok := true
		// Merge keys were expanded (PyYAML's way) when ParseRecipe read the
		// tree, so a mapping's pairs are its own.
		pairs := n.Content
		for i := 0; i+1 < len(pairs); i += 2 {
			kn, vn := strictyaml.Deref(pairs[i]), strictyaml.Deref(pairs[i+1])
			if kn.Kind != yaml.ScalarNode {
				d.Errorf(kn, field, "keys must be scalars, got %s", strictyaml.KindName(kn))
				ok = false
				continue
			}
			k := kn.Value
			v, vok := d.pyValue(vn, strictyaml.Join(field, k), depth+1)
			ok = ok && vok
			m.Set(k, v)
			if m.Pos == nil {
				m.Pos = map[string]strictyaml.Pos{}
			}
			m.Pos[k] = d.Pos(kn)
			if vn.Kind == yaml.ScalarNode && vn.Style == yaml.SingleQuotedStyle {
				if m.SingleQuoted == nil {
					m.SingleQuoted = map[string]bool{}
				}
				m.SingleQuoted[k] = true
			} else {
				delete(m.SingleQuoted, k)
			}
		}
		return m, ok
	}
	d.Errorf(n, field, "unsupported YAML node")
	return nil, false
}

// anyMap reads a mapping with Python-typed values; nil when n is absent or null.
func (d *recipeDecoder) anyMap(n *yaml.Node, field string) *Map {
	if n == nil || strictyaml.IsNull(n) {
		return nil
	}
	if dn := strictyaml.Deref(n); dn.Kind != yaml.MappingNode {
		d.Errorf(dn, field, "expected a mapping, got %s", strictyaml.KindName(dn))
		return nil
	}
	v, _ := d.pyValue(n, field, 0)
	m, _ := v.(*Map)
	return m
}

// envMap reads a mapping of scalars (an environment, srun options): values
// stay typed (the launcher prints them with Python's str()), null values
// are left out as srt-slurm leaves them out, and a list or mapping value is
// an error. nil when n is absent or null.
func (d *recipeDecoder) envMap(n *yaml.Node, field string) *Map {
	m := d.anyMap(n, field)
	if m == nil {
		return nil
	}
	out := &Map{Vals: map[string]any{}, Path: m.Path, Pos: m.Pos, SingleQuoted: m.SingleQuoted}
	for _, k := range m.Keys {
		switch v := m.Vals[k].(type) {
		case nil:
		case *Map, []any:
			d.Errs.Add(m.Pos[k], strictyaml.Join(field, k), "expected a scalar, got %s", kindOf(v))
		default:
			out.Set(k, v)
		}
	}
	return out
}

func kindOf(v any) string {
	switch v.(type) {
	case *Map:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return "a scalar"
}
