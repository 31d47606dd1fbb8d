package strictyaml

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// InferenceX reads its files with PyYAML's safe_load, i.e. YAML 1.1 implicit
// typing (2_063_837 is an int, yes/no/on/off are booleans, 1e3 is a string).
// yaml.v3 parses the text into nodes; the scalars are typed here the way
// PyYAML would type them so a file means the same thing to both tools.

var (
	yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

	pyBoolRe  = regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$`)
	pyIntRe   = regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	pyFloatRe = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	pyNullRe  = regexp.MustCompile(`^(?:~|null|Null|NULL|)$`)
)

// Parse parses one YAML document into its root node. Syntax errors come
// back as a single *Error carrying the line yaml.v3 reported. A stream with
// more than one document is rejected, as PyYAML's safe_load does.
func Parse(display string, data []byte) (root *yaml.Node, err error) {
	// yaml.v3 has panicked on hostile input in the past; a loader must not.
	defer func() {
		if r := recover(); r != nil {
			root = nil
			err = &Error{Pos: Pos{File: display, Line: 1}, Field: "yaml", Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Pos: Pos{File: display, Line: 1}, Msg: "file is empty; expected a YAML mapping"}
		}
		return nil, yamlError(display, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Pos: Pos{File: display, Line: extra.Line}, Field: "yaml", Msg: "more than one YAML document; expected exactly one"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(display, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{Pos: Pos{File: display, Line: 1}, Msg: "file is empty; expected a YAML mapping"}
	}
	// Aliases are followed while validating, so a small file of nested
	// aliases could expand to billions of nodes; refuse that up front.
	if n, line := expandedSize(doc.Content[0], map[*yaml.Node]int{}, 0); n > maxExpandedNodes {
		return nil, &Error{Pos: Pos{File: display, Line: line}, Field: "yaml", Msg: "aliases expand to too many nodes; write the values out"}
	}
	return doc.Content[0], nil
}

const maxExpandedNodes = 1 << 20

// expandedSize counts the nodes of n with aliases expanded (memoised;
// a cycle counts as over the limit). It returns the line of an offending alias.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int, depth int) (int, int) {
	if n == nil {
		return 0, 0
	}
	if v, ok := memo[n]; ok {
		if v < 0 { // still being counted: a cycle
			return maxExpandedNodes + 1, n.Line
		}
		return v, 0
	}
	if depth > 1000 {
		return maxExpandedNodes + 1, n.Line
	}
	memo[n] = -1
	total, bad := 1, 0
	if n.Kind == yaml.AliasNode {
		size, line := expandedSize(n.Alias, memo, depth+1)
		total += size
		if size > maxExpandedNodes {
			bad = max(line, n.Line)
		}
	}
	for _, c := range n.Content {
		size, line := expandedSize(c, memo, depth+1)
		total += size
		if bad == 0 && line != 0 {
			bad = line
		}
		if total > maxExpandedNodes {
			if bad == 0 {
				bad = c.Line
			}
			break
		}
	}
	if total > maxExpandedNodes {
		total = maxExpandedNodes + 1
	}
	memo[n] = total
	return total, bad
}

func yamlError(display string, err error) *Error {
	msg := err.Error()
	line := 1
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			line = n
		}
		msg = m[2]
		// yaml.v3 reports parser (not scanner) errors with a 0-based line.
		if strings.HasPrefix(msg, "did not find expected ") && parserProblems[strings.TrimPrefix(msg, "did not find expected ")] {
			line++
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	return &Error{Pos: Pos{File: display, Line: line}, Field: "yaml", Msg: "malformed YAML: " + msg}
}

// parserProblems are yaml.v3's parser-level "did not find expected X" messages.
var parserProblems = map[string]bool{"<document start>": true, "node content": true, "'-' indicator": true, "key": true, "',' or ']'": true, "',' or '}'": true}

// Deref follows aliases so that anchors behave like PyYAML's.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	return n
}

// ScalarValue types a YAML scalar node the way PyYAML's safe_load does and
// returns nil, bool, int64, float64 or string.
func ScalarValue(n *yaml.Node) (any, error) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil, errors.New("not a scalar")
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return n.Value, nil
	}
	if n.Style&yaml.TaggedStyle != 0 {
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool":
			if pyBoolRe.MatchString(n.Value) {
				return pyBool(n.Value), nil
			}
			return nil, fmt.Errorf("%q is not a boolean", n.Value)
		case "!!int":
			return pyInt(n.Value)
		case "!!float":
			return pyFloat(n.Value)
		default:
			return nil, fmt.Errorf("unsupported YAML tag %s", n.Tag)
		}
	}
	v := n.Value
	switch {
	case pyNullRe.MatchString(v):
		return nil, nil
	case pyBoolRe.MatchString(v):
		return pyBool(v), nil
	case pyIntRe.MatchString(v):
		return pyInt(v)
	case pyFloatRe.MatchString(v):
		return pyFloat(v)
	}
	return v, nil
}

func pyBool(s string) bool {
	switch strings.ToLower(s) {
	case "yes", "true", "on":
		return true
	}
	return false
}

func pyInt(s string) (any, error) {
	v := strings.ReplaceAll(s, "_", "")
	sign := int64(1)
	if strings.HasPrefix(v, "-") {
		sign = -1
		v = v[1:]
	} else if strings.HasPrefix(v, "+") {
		v = v[1:]
	}
	var (
		n   uint64
		err error
	)
	switch {
	case v == "0":
		return int64(0), nil
	case strings.HasPrefix(v, "0b"):
		n, err = strconv.ParseUint(v[2:], 2, 63)
	case strings.HasPrefix(v, "0x"):
		n, err = strconv.ParseUint(v[2:], 16, 63)
	case strings.HasPrefix(v, "0"):
		n, err = strconv.ParseUint(v[1:], 8, 63)
	case strings.Contains(v, ":"):
		for _, part := range strings.Split(v, ":") {
			d, perr := strconv.ParseUint(part, 10, 63)
			if perr != nil || n > math.MaxInt64/60 {
				return nil, fmt.Errorf("integer %q is out of range", s)
			}
			n = n*60 + d
		}
	default:
		n, err = strconv.ParseUint(v, 10, 63)
	}
	if err != nil {
		return nil, fmt.Errorf("integer %q is out of range", s)
	}
	return sign * int64(n), nil
}

func pyFloat(s string) (any, error) {
	v := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if strings.HasPrefix(v, "-") {
		sign = -1
		v = v[1:]
	} else if strings.HasPrefix(v, "+") {
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1), nil
	case v == ".nan":
		return math.NaN(), nil
	case strings.Contains(v, ":"):
		parts := strings.Split(v, ":")
		f := 0.0
		for i, p := range parts {
			d, err := strconv.ParseFloat(p, 64)
			if err != nil || (i < len(parts)-1 && p == "") {
				return nil, fmt.Errorf("%q is not a number", s)
			}
			f = f*60 + d
		}
		return sign * f, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	return sign * f, nil
}

// KindName describes a node for "expected X, got Y" messages.
func KindName(n *yaml.Node) string {
	n = Deref(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v, err := ScalarValue(n)
		if err != nil {
			return "an invalid scalar"
		}
		switch x := v.(type) {
		case nil:
			return "null"
		case bool:
			return fmt.Sprintf("boolean %v", x)
		case int64:
			return fmt.Sprintf("integer %d", x)
		case float64:
			return fmt.Sprintf("number %s", strconv.FormatFloat(x, 'g', -1, 64))
		case string:
			if len(x) > 40 {
				x = x[:40] + "..."
			}
			return fmt.Sprintf("string %q", x)
		}
	}
	return "an unknown node"
}

// Decoder walks the YAML nodes of one file and records every problem it
// finds in Errs, so a loader reports all of them at once.
type Decoder struct {
	File string // display path
	Errs *Errors
}

func (d *Decoder) Pos(n *yaml.Node) Pos {
	line := 0
	if n != nil {
		line = n.Line
	}
	return Pos{File: d.File, Line: line}
}

func (d *Decoder) Errorf(n *yaml.Node, field, format string, args ...any) {
	d.Errs.Add(d.Pos(n), field, format, args...)
}

// Mapping is a validated YAML mapping: string keys, no duplicates, and (when
// a field list is given) no keys outside it.
type Mapping struct {
	d        *Decoder
	Node     *yaml.Node
	Path     string                // dotted field path of the mapping itself
	Keys     []string              // in file order
	KeyNodes map[string]*yaml.Node // key node
	Values   map[string]*yaml.Node // value node (aliases resolved)
}

func Join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// Mapping checks that n is a mapping. allowed == nil accepts any key.
func (d *Decoder) Mapping(n *yaml.Node, path string, allowed []string) *Mapping {
	n = Deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "expected a mapping, got %s", KindName(n))
		return nil
	}
	m := &Mapping{d: d, Node: n, Path: path, KeyNodes: map[string]*yaml.Node{}, Values: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := Deref(n.Content[i]), Deref(n.Content[i+1])
		kv, err := ScalarValue(kn)
		ks, ok := kv.(string)
		if err != nil || !ok {
			d.Errorf(kn, path, "keys must be strings, got %s", KindName(kn))
			continue
		}
		if ks == "<<" && kn.Style == 0 {
			d.Errorf(kn, Join(path, ks), "YAML merge keys are not supported; write the fields out")
			continue
		}
		if _, dup := m.KeyNodes[ks]; dup {
			d.Errorf(kn, Join(path, ks), "duplicate key (first defined on line %d)", m.KeyNodes[ks].Line)
			continue
		}
		if allowed != nil && !slices.Contains(allowed, ks) {
			d.Errorf(kn, Join(path, ks), "unknown field (expected one of: %s)", strings.Join(allowed, ", "))
			continue
		}
		m.Keys = append(m.Keys, ks)
		m.KeyNodes[ks] = kn
		m.Values[ks] = vn
	}
	return m
}

// Has reports whether key is present (even with a null value).
func (m *Mapping) Has(key string) bool { _, ok := m.Values[key]; return ok }

// Get returns the value node when present and not null.
func (m *Mapping) Get(key string) *yaml.Node {
	v := m.Values[key]
	if v == nil || IsNull(v) {
		return nil
	}
	return v
}

func (m *Mapping) Field(key string) string { return Join(m.Path, key) }

func (m *Mapping) Missing(key string) {
	m.d.Errorf(m.Node, m.Field(key), "required field is missing")
}

func IsNull(n *yaml.Node) bool {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return false
	}
	v, err := ScalarValue(n)
	return err == nil && v == nil
}

// Scalar returns the typed value of a scalar node or records an error.
func (d *Decoder) Scalar(n *yaml.Node, field string) (any, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		d.Errorf(n, field, "expected a scalar, got %s", KindName(n))
		return nil, false
	}
	v, err := ScalarValue(n)
	if err != nil {
		d.Errorf(n, field, "%v", err)
		return nil, false
	}
	return v, true
}

func (d *Decoder) Str(n *yaml.Node, field string) (string, bool) {
	n = Deref(n)
	if n != nil && n.Kind == yaml.ScalarNode {
		if v, err := ScalarValue(n); err == nil {
			if s, ok := v.(string); ok {
				return s, true
			}
		}
	}
	d.Errorf(n, field, "expected a string, got %s", KindName(n))
	return "", false
}

func (d *Decoder) Int(n *yaml.Node, field string) (int64, bool) {
	n = Deref(n)
	if n != nil && n.Kind == yaml.ScalarNode {
		if v, err := ScalarValue(n); err == nil {
			if i, ok := v.(int64); ok {
				return i, true
			}
		}
	}
	d.Errorf(n, field, "expected an integer, got %s", KindName(n))
	return 0, false
}

func (d *Decoder) Boolean(n *yaml.Node, field string) (bool, bool) {
	n = Deref(n)
	if n != nil && n.Kind == yaml.ScalarNode {
		if v, err := ScalarValue(n); err == nil {
			if b, ok := v.(bool); ok {
				return b, true
			}
		}
	}
	d.Errorf(n, field, "expected true or false, got %s", KindName(n))
	return false, false
}

// Number accepts an integer or a float and returns it with the exact decimal
// text of its shortest round-trip form (what Python's str(float) gives).
func (d *Decoder) Number(n *yaml.Node, field string) (float64, string, bool) {
	n = Deref(n)
	if n != nil && n.Kind == yaml.ScalarNode {
		if v, err := ScalarValue(n); err == nil {
			switch x := v.(type) {
			case int64:
				return float64(x), strconv.FormatInt(x, 10), true
			case float64:
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					return x, strconv.FormatFloat(x, 'g', -1, 64), true
				}
			}
		}
	}
	d.Errorf(n, field, "expected a number, got %s", KindName(n))
	return 0, "", false
}

// Seq checks that n is a list and returns its items (aliases resolved).
func (d *Decoder) Seq(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	n = Deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		d.Errorf(n, field, "expected a list, got %s", KindName(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = Deref(c)
	}
	return out, true
}

func Index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

// OptStr reads an optional string field: absent or null gives ("", false).
func (m *Mapping) OptStr(key string) (string, bool) {
	v := m.Get(key)
	if v == nil {
		return "", false
	}
	return m.d.Str(v, m.Field(key))
}

// ReqStr reads a required string field (null is an error).
func (m *Mapping) ReqStr(key string) string {
	if !m.Has(key) {
		m.Missing(key)
		return ""
	}
	s, _ := m.d.Str(m.Values[key], m.Field(key))
	return s
}

func (m *Mapping) OptInt(key string) (int64, bool) {
	v := m.Get(key)
	if v == nil {
		return 0, false
	}
	return m.d.Int(v, m.Field(key))
}

func (m *Mapping) ReqInt(key string) (int64, bool) {
	if !m.Has(key) {
		m.Missing(key)
		return 0, false
	}
	return m.d.Int(m.Values[key], m.Field(key))
}

func (m *Mapping) OptBool(key string) (bool, bool) {
	v := m.Get(key)
	if v == nil {
		return false, false
	}
	return m.d.Boolean(v, m.Field(key))
}

func (m *Mapping) ReqBool(key string) (bool, bool) {
	if !m.Has(key) {
		m.Missing(key)
		return false, false
	}
	return m.d.Boolean(m.Values[key], m.Field(key))
}

// Value converts n into the value PyYAML's safe_load would build: aliases
// are followed, scalars are typed by ScalarValue, sequences become []any,
// and a mapping becomes what mapping makes of its keys (each typed by key,
// in order, before its value is converted) and values. Nesting deeper than
// maxDepth is an error; maxDepth < 0 means no limit.
func Value(n *yaml.Node, maxDepth int, key func(*yaml.Node) (string, error), mapping func(keys []string, vals []any) any) (any, error) {
	return value(n, 0, maxDepth, key, mapping)
}

func value(n *yaml.Node, depth, maxDepth int, key func(*yaml.Node) (string, error), mapping func([]string, []any) any) (any, error) {
	if maxDepth >= 0 && depth > maxDepth {
		return nil, fmt.Errorf("YAML nested too deeply")
	}
	n = Deref(n)
	if n == nil {
		return nil, nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return ScalarValue(n)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := value(c, depth+1, maxDepth, key, mapping)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		keys := make([]string, 0, len(n.Content)/2)
		vals := make([]any, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := key(n.Content[i])
			if err != nil {
				return nil, err
			}
			v, err := value(n.Content[i+1], depth+1, maxDepth, key, mapping)
			if err != nil {
				return nil, err
			}
			keys, vals = append(keys, k), append(vals, v)
		}
		return mapping(keys, vals), nil
	}
	return nil, fmt.Errorf("unsupported YAML node at line %d", n.Line)
}
