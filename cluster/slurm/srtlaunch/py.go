package srtlaunch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// srt-slurm loads recipes with PyYAML and turns values into flags with
// Python's str(), so a value must be typed (YAML 1.1) and printed the way
// Python would: 0.850 -> "0.85", true -> "True" inside a list, a mapping ->
// "{'k': 'v'}".

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
	case *config.Map:
		parts := make([]string, x.Len())
		for i, k := range keysOf(x) {
			parts[i] = pyStrRepr(k) + ": " + pyRepr(x.Vals[k])
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
func pyJSON(m *config.Map) string {
	parts := make([]string, len(m.Keys))
	for i, k := range m.Keys {
		parts[i] = strconv.Quote(k) + ": " + strconv.Quote(m.Str(k))
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
