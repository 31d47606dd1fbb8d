package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// --set dotted.key=value, as srtctl applies it: the value is read as YAML
// (PyYAML's typing: 8 is an int, true a bool, [1, 2] a list, {a: 1} a
// mapping) and set at the dotted path of the picked variant, in the
// spelling of the file, creating mappings on the way. Later sets win.

// ParseSet splits one --set argument into its path and YAML value.
func ParseSet(set string) (path []string, val *yaml.Node, err error) {
	key, raw, ok := strings.Cut(set, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return nil, nil, fmt.Errorf("--set %q: want dotted.key=value", set)
	}
	path = strings.Split(key, ".")
	for _, p := range path {
		if p == "" {
			return nil, nil, fmt.Errorf("--set %s: empty key in the dotted path", key)
		}
	}
	val = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	if strings.TrimSpace(raw) != "" { // an empty value is null, as yaml.safe_load("") is None
		doc, err := strictyaml.Parse("--set "+key, []byte(raw))
		if err != nil {
			return nil, nil, err
		}
		val = deepCopy(doc)
	}
	clearLines(val)
	return path, val, nil
}

// clearLines drops the line numbers of a --set value: they are lines of the
// command line, not of the recipe.
func clearLines(n *yaml.Node) {
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		clearLines(c)
	}
}

// applySets returns a copy of doc with sets applied in order.
func applySets(doc *yaml.Node, sets []string) (*yaml.Node, error) {
	doc = deepCopy(strictyaml.Deref(doc))
	for _, set := range sets {
		path, val, err := ParseSet(set)
		if err != nil {
			return nil, &strictyaml.Error{Msg: err.Error()}
		}
		m := doc
		for i, key := range path {
			if m.Kind != yaml.MappingNode {
				return nil, &strictyaml.Error{Msg: fmt.Sprintf("--set %s: %s is %s, not a mapping",
					strings.Join(path, "."), strings.Join(path[:i], "."), strictyaml.KindName(m))}
			}
			last := i == len(path)-1
			var next *yaml.Node
			for j := 0; j+1 < len(m.Content); j += 2 {
				if strictyaml.Deref(m.Content[j]).Value == key {
					if last {
						m.Content[j+1] = val
					}
					next = strictyaml.Deref(m.Content[j+1])
					if !last && strictyaml.IsNull(next) {
						next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
						m.Content[j+1] = next
					}
					break
				}
			}
			if next == nil {
				next = val
				if !last {
					next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				}
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, next)
			}
			m = next
		}
	}
	return doc, nil
}

// deepCopy copies a node tree, resolving aliases.
func deepCopy(n *yaml.Node) *yaml.Node {
	n = strictyaml.Deref(n)
	if n == nil {
		return nil
	}
	c := *n
	c.Alias, c.Anchor = nil, ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		c.Content[i] = deepCopy(ch)
	}
	return &c
}
