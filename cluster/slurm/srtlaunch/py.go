package srtlaunch

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
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
		return PyFloatRepr(x)
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

// PyFloatRepr prints a float like Python's repr: shortest round-trip digits,
// fixed notation for exponents in [-4, 16), always with a fractional part.
func PyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(f, 'e', -1, 64) // Go's shortest 'e' form is Python's: 1e-05, 1.5e+16
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
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

// pyJSONDump is Python's json.dumps(v) (indent 0: one line with ", " and
// ": ") or json.dumps(v, indent=n), ensure_ascii included, for the values a
// recipe holds (mappings as *ordered with typed values).
func pyJSONDump(v any, indent int) string {
	var b strings.Builder
	pyJSONWrite(&b, v, indent, 0)
	return b.String()
}

func pyJSONWrite(b *strings.Builder, v any, indent, depth int) {
	open := func(c string) (sep string) {
		b.WriteString(c)
		if indent == 0 {
			return ", "
		}
		return ",\n" + strings.Repeat(" ", indent*(depth+1))
	}
	nl := func(c string) {
		if indent > 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*depth))
		}
		b.WriteString(c)
	}
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
		switch {
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(x):
			b.WriteString("NaN")
		default:
			b.WriteString(PyFloatRepr(x))
		}
	case string:
		b.WriteString(pyJSONString(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		sep := open("[")
		if indent > 0 {
			b.WriteString(sep[1:])
		}
		for i, e := range x {
			if i > 0 {
				b.WriteString(sep)
			}
			pyJSONWrite(b, e, indent, depth+1)
		}
		nl("]")
	case *ordered:
		if len(x.keys) == 0 {
			b.WriteString("{}")
			return
		}
		sep := open("{")
		if indent > 0 {
			b.WriteString(sep[1:])
		}
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(pyJSONString(k) + ": ")
			if val, ok := x.anyVals[k]; ok {
				pyJSONWrite(b, val, indent, depth+1)
			} else {
				pyJSONWrite(b, x.vals[k], indent, depth+1)
			}
		}
		nl("}")
	default:
		b.WriteString(pyJSONString(fmt.Sprint(x)))
	}
}

// pyJSONString quotes s as json.dumps does with ensure_ascii.
func pyJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x80 && r < 0x10000):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

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
