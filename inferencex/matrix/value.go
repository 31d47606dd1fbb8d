package matrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// Object is a JSON object that keeps its key order: InferenceX emits rows
// with a fixed key order and raw YAML mappings in document order.
// Values are nil, bool, int64, int, float64, string, []any or Object.
type Object []Field

// Field is one key/value pair of an Object.
type Field struct {
	Key   string
	Value any
}

// Get returns the value for key.
func (o Object) Get(key string) (any, bool) {
	for _, f := range o {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Set replaces key's value in place, or appends it when absent.
func (o *Object) Set(key string, v any) {
	for i := range *o {
		if (*o)[i].Key == key {
			(*o)[i].Value = v
			return
		}
	}
	*o = append(*o, Field{key, v})
}

// Without returns a copy of o minus the given keys.
func (o Object) Without(keys ...string) Object {
	out := make(Object, 0, len(o))
	for _, f := range o {
		skip := false
		for _, k := range keys {
			if f.Key == k {
				skip = true
				break
			}
		}
		if !skip {
			out = append(out, f)
		}
	}
	return out
}

// MarshalJSON encodes o with Go's usual compact layout, keeping key order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, o, encOptions{itemSep: ",", keySep: ":"}, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fromNode converts a YAML node (already validated by config) into a JSON
// value, keeping mapping order. A depth cap guards against pathological input.
func fromNode(n *yaml.Node) (any, error) {
	return strictyaml.Value(n, 100,
		func(k *yaml.Node) (string, error) {
			v, err := strictyaml.ScalarValue(k)
			if err != nil {
				return "", err
			}
			return fmt.Sprint(v), nil
		},
		func(keys []string, vals []any) any {
			out := make(Object, 0, len(keys))
			for i, k := range keys {
				out.Set(k, vals[i])
			}
			return out
		})
}

type encOptions struct {
	itemSep, keySep string
	indent          int // > 0: Python json.dumps(indent=N) layout
	sortKeys        bool
}

// encode writes v the way Python's json.dumps does (ensure_ascii, repr
// floats), so `--format ix-json` output can be compared byte for byte.
func encode(b *bytes.Buffer, v any, o encOptions, level int) error {
	newline := func(l int) {
		if o.indent > 0 {
			b.WriteByte('\n')
			for i := 0; i < l*o.indent; i++ {
				b.WriteByte(' ')
			}
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		b.WriteString(pyjson.String(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(level + 1)
			if err := encode(b, e, o, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte(']')
	case []int:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = e
		}
		return encode(b, items, o, level)
	case Object:
		if len(x) == 0 {
			b.WriteString("{}")
			return nil
		}
		fields := x
		if o.sortKeys {
			fields = append(Object(nil), x...)
			sort.SliceStable(fields, func(i, j int) bool { return fields[i].Key < fields[j].Key })
		}
		b.WriteByte('{')
		for i, f := range fields {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(level + 1)
			b.WriteString(pyjson.String(f.Key))
			b.WriteString(o.keySep)
			if err := encode(b, f.Value, o, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("matrix: cannot encode %T", v)
	}
	return nil
}

// pyFloat formats like Python's float repr.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		// Go's shortest 'e' form matches Python's repr here (1e-05, 1.5e+16).
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !bytes.ContainsAny([]byte(s), ".") {
		s += ".0"
	}
	return s
}

// canonical is sorted-key compact JSON, used for parallelism keys and
// fingerprints. It is stable across machines and Go versions.
func canonical(v any) string {
	var b bytes.Buffer
	if err := encode(&b, v, encOptions{itemSep: ",", keySep: ":", sortKeys: true}, 0); err != nil {
		// Rows only ever hold encodable values; fall back to encoding/json.
		raw, _ := json.Marshal(v)
		return string(raw)
	}
	return b.String()
}

// Canonical returns the sorted-key compact JSON of a row value.
func Canonical(v any) string { return canonical(v) }
