package strictyaml

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Duplicate is a key written twice in one mapping.
type Duplicate struct {
	Key        string
	Line       int // the later occurrence, whose value wins
	FirstLine  int
	ValueLine  int
	ParentPath string // dotted path of the mapping ("" at the top)
}

// Field is the dotted path of the duplicated key.
func (d Duplicate) Field() string { return Join(d.ParentPath, d.Key) }

// ResolvePyYAML returns the tree PyYAML's safe_load builds from root, as
// YAML nodes: merge keys (<<: *alias or a list of aliases) expanded the way
// SafeConstructor.flatten_mapping expands them (merged pairs first, earlier
// list entries winning, the mapping's own keys last), and a key written
// twice kept once, at its first position with its last value, as a Python
// dict keeps it. Aliases are resolved. The duplicates are returned so a
// loader can warn about them: srt-slurm, which reads recipes with PyYAML,
// launches the last value without a word. root is not modified.
func ResolvePyYAML(root *yaml.Node) (*yaml.Node, []Duplicate, error) {
	r := &pyResolver{memo: map[*yaml.Node]*yaml.Node{}}
	out, err := r.node(root, "")
	return out, r.dups, err
}

type pyResolver struct {
	memo map[*yaml.Node]*yaml.Node
	dups []Duplicate
}

func (r *pyResolver) node(n *yaml.Node, path string) (*yaml.Node, error) {
	n = Deref(n)
	if n == nil {
		return nil, nil
	}
	if done, ok := r.memo[n]; ok {
		return done, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		pairs, err := r.flatten(n, path)
		if err != nil {
			return nil, err
		}
		out := *n
		out.Content = nil
		index := map[string]int{}
		for _, p := range pairs {
			k := p[0].Value
			if i, ok := index[k]; ok {
				out.Content[i+1] = p[1]
				continue
			}
			index[k] = len(out.Content)
			out.Content = append(out.Content, p[0], p[1])
		}
		r.memo[n] = &out
		return &out, nil
	case yaml.SequenceNode:
		out := *n
		out.Content = make([]*yaml.Node, len(n.Content))
		for i, c := range n.Content {
			v, err := r.node(c, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out.Content[i] = v
		}
		r.memo[n] = &out
		return &out, nil
	}
	return n, nil
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && (k.Tag == "!!merge" || (k.Value == "<<" && k.Style == 0))
}

// flatten returns a mapping's key/value pairs with merges expanded (values
// already resolved) and records its own duplicate keys.
func (r *pyResolver) flatten(n *yaml.Node, path string) ([][2]*yaml.Node, error) {
	var merged, own [][2]*yaml.Node
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), n.Content[i+1]
		if isMergeKey(k) {
			src := Deref(v)
			var maps []*yaml.Node
			switch {
			case src != nil && src.Kind == yaml.MappingNode:
				maps = []*yaml.Node{src}
			case src != nil && src.Kind == yaml.SequenceNode:
				for _, e := range src.Content {
					if e = Deref(e); e == nil || e.Kind != yaml.MappingNode {
						return nil, &Error{Pos: Pos{Line: k.Line}, Field: Join(path, "<<"), Msg: "a merge key takes a mapping or a list of mappings"}
					}
					maps = append(maps, e)
				}
			default:
				return nil, &Error{Pos: Pos{Line: k.Line}, Field: Join(path, "<<"), Msg: "a merge key takes a mapping or a list of mappings"}
			}
			var sub [][][2]*yaml.Node
			for _, m := range maps {
				p, err := r.flatten(m, path)
				if err != nil {
					return nil, err
				}
				sub = append(sub, p)
			}
			for i := len(sub) - 1; i >= 0; i-- { // earlier entries win: they go last
				merged = append(merged, sub[i]...)
			}
			continue
		}
		key := k.Value
		if line, dup := first[key]; dup {
			r.dups = append(r.dups, Duplicate{Key: key, Line: k.Line, FirstLine: line, ValueLine: Deref(v).Line, ParentPath: path})
		} else {
			first[key] = k.Line
		}
		val, err := r.node(v, Join(path, key))
		if err != nil {
			return nil, err
		}
		own = append(own, [2]*yaml.Node{k, val})
	}
	return append(merged, own...), nil
}
