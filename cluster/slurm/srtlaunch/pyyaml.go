package srtlaunch

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// pyYAMLDump writes v the way PyYAML's yaml.safe_dump does with its
// defaults (block style, keys sorted, indent 2, sequences in a mapping not
// indented), for the values a recipe holds: srt-slurm writes the TensorRT-LLM
// engine options with it.
func pyYAMLDump(v any) string {
	var b strings.Builder
	switch x := v.(type) {
	case *config.Map:
		if x.Len() == 0 {
			return "{}\n"
		}
		dumpMapping(&b, x, 0, false)
	case []any:
		if len(x) == 0 {
			return "[]\n"
		}
		dumpSequence(&b, x, 0, false)
	default:
		b.WriteString(yamlScalar(v) + "\n")
	}
	return b.String()
}

// dumpMapping writes "key: value" lines at indent; inline: the first key
// follows a sequence dash already written.
func dumpMapping(b *strings.Builder, m *config.Map, indent int, inline bool) {
	keys := append([]string(nil), m.Keys...)
	sort.Strings(keys)
	pad := strings.Repeat(" ", indent)
	for i, k := range keys {
		if i > 0 || !inline {
			b.WriteString(pad)
		}
		b.WriteString(yamlScalar(k) + ":")
		switch x := m.Vals[k].(type) {
		case *config.Map:
			if x.Len() == 0 {
				b.WriteString(" {}\n")
				continue
			}
			b.WriteString("\n")
			dumpMapping(b, x, indent+2, false)
		case []any:
			if len(x) == 0 {
				b.WriteString(" []\n")
				continue
			}
			b.WriteString("\n")
			dumpSequence(b, x, indent, false) // PyYAML does not indent a sequence under a key
		default:
			b.WriteString(" " + yamlScalar(x) + "\n")
		}
	}
}

// dumpSequence writes "- item" lines at indent; a collection item starts on
// the dash's line.
func dumpSequence(b *strings.Builder, xs []any, indent int, inline bool) {
	pad := strings.Repeat(" ", indent)
	for i, v := range xs {
		if i > 0 || !inline {
			b.WriteString(pad)
		}
		b.WriteString("- ")
		switch x := v.(type) {
		case *config.Map:
			if x.Len() == 0 {
				b.WriteString("{}\n")
				continue
			}
			dumpMapping(b, x, indent+2, true)
		case []any:
			if len(x) == 0 {
				b.WriteString("[]\n")
				continue
			}
			dumpSequence(b, x, indent+2, true)
		default:
			b.WriteString(yamlScalar(x) + "\n")
		}
	}
}

// implicitNonStr matches plain scalars PyYAML's resolver would read as
// something other than a string (YAML 1.1 bool, null, int, float, timestamp,
// merge, value); such strings are quoted.
var implicitNonStr = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|~|null|Null|NULL|<<|=` +
	`|[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+` +
	`|[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*` +
	`|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)` +
	`|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)?)$`)

func yamlScalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		switch {
		case math.IsNaN(x):
			return ".nan"
		case math.IsInf(x, 1):
			return ".inf"
		case math.IsInf(x, -1):
			return "-.inf"
		}
		s := strings.ToLower(pyjson.FloatRepr(x))
		if !strings.Contains(s, ".") && strings.Contains(s, "e") {
			s = strings.Replace(s, "e", ".0e", 1)
		}
		return s
	case string:
		return yamlString(x)
	}
	return yamlString(pyStr(v))
}

// yamlString picks PyYAML's style for a string: plain when that reads back
// as the same string, else single-quoted, or double-quoted when it holds
// characters a single-quoted scalar cannot.
func yamlString(s string) string {
	for _, r := range s {
		if r < 0x20 && r != '\n' || r == 0x7f || r > 0x7e {
			return strconv.Quote(s)
		}
	}
	if plainOK(s) {
		return s
	}
	if strings.Contains(s, "\n") {
		return strconv.Quote(s)
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func plainOK(s string) bool {
	if s == "" || implicitNonStr.MatchString(s) {
		return false
	}
	if strings.ContainsAny(s, "\n") || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	if strings.ContainsRune("#,[]{}&*!|>'\"%@`", rune(s[0])) {
		return false
	}
	if strings.ContainsRune("-?:", rune(s[0])) && (len(s) == 1 || s[1] == ' ') {
		return false
	}
	if strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") {
		return false
	}
	return true
}
