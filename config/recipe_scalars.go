package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// RecipeScalar is one scalar value of a resolved recipe, as written.
type RecipeScalar struct {
	Path  string // dotted path of the key holding it, "[i]" for list items
	Key   string // that key
	Value string // the text as written
	Pos   strictyaml.Pos
	// Engine: part of the engine's settings (schema 1 backend; schema 2
	// engine and roles). Benchmark: part of the benchmark section.
	Engine, Benchmark bool
}

// Scalars lists every scalar value of the recipe as it resolved (the picked
// variant, --set applied), in file order: for checks that scan what a
// recipe says wherever it says it (an architecture override, a patch).
func (r *Recipe) Scalars() []RecipeScalar {
	var out []RecipeScalar
	var walk func(n *yaml.Node, path, key string, top string, depth int)
	walk = func(n *yaml.Node, path, key, top string, depth int) {
		n = strictyaml.Deref(n)
		if n == nil || depth > 64 {
			return
		}
		switch n.Kind {
		case yaml.ScalarNode:
			out = append(out, RecipeScalar{Path: path, Key: key, Value: n.Value, Pos: strictyaml.Pos{File: r.Display, Line: n.Line},
				Engine: top == "backend" || top == "engine" || top == "roles", Benchmark: top == "benchmark"})
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), key, top, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := strictyaml.Deref(n.Content[i]).Value
				t := top
				if depth == 0 {
					t = k
				}
				walk(n.Content[i+1], strictyaml.Join(path, k), k, t, depth+1)
			}
		}
	}
	walk(r.doc, "", "", "", 0)
	return out
}
