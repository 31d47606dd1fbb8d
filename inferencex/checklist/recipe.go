package checklist

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/internal/anynum"
)

// recipeView reads the parts of an srt-slurm recipe the rules need, keeping
// the line of every value so findings point into the recipe.
type recipeView struct {
	*config.Recipe
}

func (rv *recipeView) pos(n *yaml.Node) strictyaml.Pos {
	if n == nil {
		return strictyaml.Pos{File: rv.Display}
	}
	return strictyaml.Pos{File: rv.Display, Line: n.Line}
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// get walks a mapping path; it returns the key node and the value node.
func get(n *yaml.Node, path ...string) (*yaml.Node, *yaml.Node) {
	var key *yaml.Node
	for _, p := range path {
		n = deref(n)
		if n == nil || n.Kind != yaml.MappingNode {
			return nil, nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				key, next = n.Content[i], deref(n.Content[i+1])
				break
			}
		}
		if next == nil {
			return nil, nil
		}
		n = next
	}
	return key, n
}

// engineConfigKeys are srt-slurm's per-engine config sections.
var engineConfigKeys = []string{"sglang_config", "vllm_config", "trtllm_config"}

// roleConfig is backend.<engine>_config.<role> (role: prefill, decode,
// aggregated); nil when absent.
func (rv *recipeView) roleConfig(role string) *yaml.Node {
	for _, k := range engineConfigKeys {
		for _, r := range roleNames(role) {
			if _, n := get(rv.Doc, "backend", k, r); n != nil && n.Kind == yaml.MappingNode {
				return n
			}
		}
	}
	return nil
}

func roleNames(role string) []string {
	if role == "aggregated" {
		return []string{"aggregated", "agg"}
	}
	return []string{role}
}

// decodeRole is the role that decodes: decode, or aggregated for agg recipes.
func (rv *recipeView) decodeRole() string {
	if rv.Resources.Disaggregated {
		return "decode"
	}
	return "aggregated"
}

// env is backend.<role>_environment, falling back to the recipe's
// top-level environment; nil when absent.
func (rv *recipeView) env(role string) *yaml.Node {
	for _, r := range roleNames(role) {
		if _, n := get(rv.Doc, "backend", r+"_environment"); n != nil {
			return n
		}
	}
	return nil
}

// envBlocks yields every environment mapping of the recipe with its name.
func (rv *recipeView) envBlocks() map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for _, k := range []string{"prefill_environment", "decode_environment", "aggregated_environment", "agg_environment"} {
		if _, n := get(rv.Doc, "backend", k); n != nil {
			out["backend."+k] = n
		}
	}
	if _, n := get(rv.Doc, "environment"); n != nil {
		out["environment"] = n
	}
	return out
}

// scalar returns a mapping value as a string with its node.
func scalar(m *yaml.Node, keys ...string) (string, *yaml.Node, bool) {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return "", nil, false
	}
	for _, k := range keys {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				v := deref(m.Content[i+1])
				if v.Kind == yaml.ScalarNode {
					return v.Value, v, true
				}
				return "", v, true
			}
		}
	}
	return "", nil, false
}

func scalarInt(m *yaml.Node, keys ...string) (int, *yaml.Node, bool) {
	s, n, ok := scalar(m, keys...)
	if !ok {
		return 0, nil, false
	}
	v, err := strconv.Atoi(s)
	return v, n, err == nil
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// specConfig reads a vLLM --speculative-config value (JSON text or a YAML
// mapping) into a map.
func specConfig(n *yaml.Node) map[string]any {
	n = deref(n)
	if n == nil {
		return nil
	}
	var out map[string]any
	switch n.Kind {
	case yaml.ScalarNode:
		if json.Unmarshal([]byte(n.Value), &out) != nil {
			return nil
		}
	case yaml.MappingNode:
		if n.Decode(&out) != nil {
			return nil
		}
	}
	return out
}

// draft is a recipe's speculative decoding on its decoding role.
type draft struct {
	Algorithm string
	Tokens    int // num_speculative_tokens / MTP level: the golden table's key
	Pos       strictyaml.Pos
	Field     string
}

// speculative reads the decoding role's speculative settings; ok is false
// when the recipe does not decode speculatively. SGLang's EAGLE/MTP count
// speculative-num-steps (num-draft-tokens is steps+1); DSpark's block size
// is speculative-num-draft-tokens.
func (rv *recipeView) speculative() (draft, bool) {
	role := rv.decodeRole()
	cfg := rv.roleConfig(role)
	if cfg == nil {
		cfg = rv.roleConfig("prefill")
	}
	if cfg == nil {
		return draft{}, false
	}
	d := draft{}
	if alg, n, ok := scalar(cfg, "speculative-algorithm", "speculative_algorithm"); ok {
		d.Algorithm, d.Pos = alg, rv.pos(n)
		if v, n, ok := scalarInt(cfg, "speculative-num-steps", "speculative_num_steps"); ok && !strings.EqualFold(alg, "DSPARK") {
			d.Tokens, d.Pos, d.Field = v, rv.pos(n), "speculative-num-steps"
		} else if v, n, ok := scalarInt(cfg, "speculative-num-draft-tokens", "speculative_num_draft_tokens"); ok {
			d.Tokens, d.Pos, d.Field = v, rv.pos(n), "speculative-num-draft-tokens"
		}
		return d, true
	}
	if _, n, ok := scalar(cfg, "speculative-config", "speculative_config"); ok {
		sc := specConfig(n)
		d.Pos, d.Field = rv.pos(n), "speculative-config"
		if m, ok := sc["method"].(string); ok {
			d.Algorithm = m
		} else if m, ok := sc["decoding_type"].(string); ok {
			d.Algorithm = m
		}
		for _, k := range []string{"num_speculative_tokens", "num_nextn_predict_layers", "max_draft_len"} {
			if v, ok := anynum.Float(sc[k]); ok {
				d.Tokens = int(v)
				break
			}
		}
		return d, true
	}
	return draft{}, false
}

// walkScalars calls fn for every scalar value (not key) under n, with the
// dotted path of the key that holds it.
func walkScalars(n *yaml.Node, path string, fn func(path string, key, val *yaml.Node)) {
	walk(n, path, nil, 0, fn)
}

func walk(n *yaml.Node, path string, key *yaml.Node, depth int, fn func(string, *yaml.Node, *yaml.Node)) {
	n = deref(n)
	if n == nil || depth > 64 {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		fn(path, key, n)
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walk(c, fmt.Sprintf("%s[%d]", path, i), key, depth+1, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			walk(n.Content[i+1], p, k, depth+1, fn)
		}
	}
}
