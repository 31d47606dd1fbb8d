package srtlaunch

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// srt-slurm loads recipes with PyYAML and turns values into flags with
// Python's str(), so a value must be typed (YAML 1.1) and printed the way
// Python would: 0.850 -> "0.85", true -> "True" inside a list, a mapping ->
// "{'k': 'v'}".

// pyValue converts a YAML node into nil, bool, int64, float64, string,
// []any or *ordered (for mappings).
func pyValue(n *yaml.Node) (any, error) {
	return strictyaml.Value(deref(n), -1,
		func(k *yaml.Node) (string, error) { return deref(k).Value, nil },
		func(keys []string, vals []any) any {
			m := &ordered{}
			for i, k := range keys {
				m.setAny(k, vals[i])
			}
			return m
		})
}

// pyStr is Python's str(v).
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pyRepr is Python's repr(v), which str() uses for everything but strings.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return pyjson.FloatRepr(x)
	case string:
		return pyStrRepr(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *ordered:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyStrRepr(k) + ": " + pyRepr(x.anyVals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyStrRepr quotes a string like Python's repr (ASCII-printable subset).
func pyStrRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// pyJSON is Python's json.dumps with default separators, for flat
// string-valued mappings such as --kv-events-config.
func pyJSON(m *ordered) string {
	parts := make([]string, len(m.keys))
	for i, k := range m.keys {
		parts[i] = strconv.Quote(k) + ": " + strconv.Quote(m.Get(k))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// pyJSONDump is Python's json.dumps of a recipe value (indent 0: one line).
func pyJSONDump(v any, indent int) string { return pyjson.Dumps(v, indent) }

// pyFormatMap mimics str.format_map with a dict that leaves unknown fields
// as they are: "{{" and "}}" unescape, "{name}" is replaced when known.
func pyFormatMap(s string, vars map[string]string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+1 : i+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("{" + name + "}")
			}
			i += end
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return deref(n.Content[0])
	}
	return n
}
