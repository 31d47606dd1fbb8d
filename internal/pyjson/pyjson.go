// Package pyjson writes values the way Python does where sweepflow must
// match a Python program byte for byte (srt-slurm's renders and artifacts):
// repr of a float, and json.dumps with its default separators or indent,
// ensure_ascii included.
package pyjson

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FloatRepr is Python's repr(float): shortest round-trip digits, fixed
// notation for exponents in [-4, 16), always a fractional part.
func FloatRepr(f float64) string {
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

// Object is a mapping that keeps its key order (a Python dict).
type Object interface {
	Len() int
	At(i int) (key string, value any)
}

// Dumps is json.dumps(v) (indent 0: one line, ", " and ": ") or
// json.dumps(v, indent=indent), for nil, bool, int, int64, float64,
// string, []any and Object values.
func Dumps(v any, indent int) string {
	var b strings.Builder
	write(&b, v, indent, 0)
	return b.String()
}

func write(b *strings.Builder, v any, indent, depth int) {
	// sep goes between items; with an indent every item starts a line.
	sep, open, close := ", ", "", ""
	if indent > 0 {
		sep = ",\n" + strings.Repeat(" ", indent*(depth+1))
		open, close = "\n"+strings.Repeat(" ", indent*(depth+1)), "\n"+strings.Repeat(" ", indent*depth)
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
			b.WriteString(FloatRepr(x))
		}
	case string:
		b.WriteString(String(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[" + open)
		for i, e := range x {
			if i > 0 {
				b.WriteString(sep)
			}
			write(b, e, indent, depth+1)
		}
		b.WriteString(close + "]")
	case Object:
		if x.Len() == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{" + open)
		for i := 0; i < x.Len(); i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			k, e := x.At(i)
			b.WriteString(String(k) + ": ")
			write(b, e, indent, depth+1)
		}
		b.WriteString(close + "}")
	default:
		b.WriteString(String(fmt.Sprint(x)))
	}
}

// String quotes s as json.dumps does with ensure_ascii: every character
// outside printable ASCII (' ' to '~'; DEL included) as \uXXXX, a
// surrogate pair beyond the BMP.
func String(s string) string {
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
		case r < 0x20 || (r >= 0x7f && r < 0x10000):
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
