package srtlaunch

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// placeholderRe matches the reference renders' path placeholders. They stand
// for plain paths, which shlex.quote leaves bare, so they count as safe.
var placeholderRe = regexp.MustCompile(`\{[A-Z_]+(:[A-Za-z0-9._-]+)?\}`)

// shQuote is Python's shlex.quote, which srt-slurm uses for exports and
// the command line inside `bash -c`.
func shQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range placeholderRe.ReplaceAllString(s, "x") {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// shJoin is Python's shlex.join.
func shJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shQuote(a)
	}
	return strings.Join(q, " ")
}

// ordered is a string map that keeps insertion order and, like a Python
// dict, keeps a key's first position when it is set again. Environment order
// is part of what srt-slurm launches.
type ordered struct {
	keys    []string
	vals    map[string]string
	anyVals map[string]any // only for values read from YAML mappings
}

func newOrdered() *ordered { return &ordered{vals: map[string]string{}} }

// Set adds or replaces k.
func (o *ordered) Set(k, v string) {
	if o.vals == nil {
		o.vals = map[string]string{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *ordered) setAny(k string, v any) {
	if o.anyVals == nil {
		o.anyVals = map[string]any{}
	}
	if _, ok := o.anyVals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.anyVals[k] = v
}

// Get returns k's value ("" when absent).
func (o *ordered) Get(k string) string { return o.vals[k] }

// Has reports whether k is set.
func (o *ordered) Has(k string) bool { _, ok := o.vals[k]; return ok }

// Keys returns the keys in order.
func (o *ordered) Keys() []string { return append([]string(nil), o.keys...) }

// Len is the number of keys.
func (o *ordered) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// At is the i-th key and its value (typed when read from YAML), so an
// ordered map dumps as a Python dict (pyjson.Object).
func (o *ordered) At(i int) (string, any) {
	k := o.keys[i]
	if v, ok := o.anyVals[k]; ok {
		return k, v
	}
	return k, o.vals[k]
}

func (o *ordered) clone() *ordered {
	c := newOrdered()
	if o != nil {
		for _, k := range o.keys {
			c.Set(k, o.vals[k])
		}
	}
	return c
}

// MarshalJSON writes the keys in order.
func (o *ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if o != nil {
		for i, k := range o.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, err := marshalNoEscape(k)
			if err != nil {
				return nil, err
			}
			vb, err := marshalNoEscape(o.vals[k])
			if err != nil {
				return nil, err
			}
			b.Write(kb)
			b.WriteByte(':')
			b.Write(vb)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
