package checklist

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/internal/anynum"
)

// recipeView reads the parts of a typed srt-slurm recipe the rules need
// (whichever schema spells it), keeping the line of every value so
// findings point into the recipe.
type recipeView struct {
	*config.Recipe
}

// at is the position of key k of m (the recipe's file when unknown).
func (rv *recipeView) at(m *config.Map, k string) strictyaml.Pos {
	if m != nil {
		if p, ok := m.Pos[k]; ok {
			return p
		}
	}
	return strictyaml.Pos{File: rv.Display}
}

// role is the typed role of an srt-slurm mode (prefill, decode, aggregated).
func (rv *recipeView) role(mode string) *config.Role {
	if mode == "aggregated" {
		mode = config.RoleAgg
	}
	return rv.Roles.Get(mode)
}

// roleConfig is the engine args of a mode's role; nil when the recipe
// gives the role none.
func (rv *recipeView) roleConfig(mode string) *config.Map {
	if ro := rv.role(mode); ro != nil && ro.Args.Len() > 0 {
		return ro.Args
	}
	return nil
}

// decodeRole is the mode that decodes: decode, or aggregated for agg recipes.
func (rv *recipeView) decodeRole() string {
	if rv.Resources.Disaggregated {
		return "decode"
	}
	return "aggregated"
}

// envBlock is one environment mapping of the recipe: a role's (mode set)
// or the top-level one.
type envBlock struct {
	mode string
	env  *config.Map
}

// envBlocks are the recipe's environment mappings, roles first.
func (rv *recipeView) envBlocks() []envBlock {
	var out []envBlock
	for _, ro := range rv.Roles.All() {
		if ro.Env != nil {
			out = append(out, envBlock{ro.Mode(), ro.Env})
		}
	}
	if rv.Environment != nil {
		out = append(out, envBlock{"", rv.Environment})
	}
	return out
}

// lookup is the first of keys that m has, with its value as text (Python's
// str()) and position.
func (rv *recipeView) lookup(m *config.Map, keys ...string) (val any, text string, pos strictyaml.Pos, ok bool) {
	for _, k := range keys {
		if v, found := m.Get(k); found {
			return v, textOf(v), rv.at(m, k), true
		}
	}
	return nil, "", strictyaml.Pos{}, false
}

// textOf is a recipe value as text.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// intOf reads an integer value (or its decimal text).
func intOf(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil
	}
	return 0, false
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// specConfig reads a vLLM --speculative-config value (JSON text or a
// mapping) into a map.
func specConfig(v any) map[string]any {
	switch x := v.(type) {
	case string:
		var out map[string]any
		if json.Unmarshal([]byte(x), &out) != nil {
			return nil
		}
		return out
	case *config.Map:
		out := map[string]any{}
		for _, k := range x.Keys {
			out[k] = x.Vals[k]
		}
		return out
	}
	return nil
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
	cfg := rv.roleConfig(rv.decodeRole())
	if cfg == nil {
		cfg = rv.roleConfig("prefill")
	}
	if cfg == nil {
		return draft{}, false
	}
	d := draft{}
	if _, alg, pos, ok := rv.lookup(cfg, "speculative-algorithm", "speculative_algorithm"); ok {
		d.Algorithm, d.Pos = alg, pos
		if v, _, pos, ok := rv.lookup(cfg, "speculative-num-steps", "speculative_num_steps"); ok && !strings.EqualFold(alg, "DSPARK") {
			if n, ok := intOf(v); ok {
				d.Tokens, d.Pos, d.Field = n, pos, "speculative-num-steps"
				return d, true
			}
		}
		if v, _, pos, ok := rv.lookup(cfg, "speculative-num-draft-tokens", "speculative_num_draft_tokens"); ok {
			if n, ok := intOf(v); ok {
				d.Tokens, d.Pos, d.Field = n, pos, "speculative-num-draft-tokens"
			}
		}
		return d, true
	}
	if v, _, pos, ok := rv.lookup(cfg, "speculative-config", "speculative_config"); ok {
		sc := specConfig(v)
		d.Pos, d.Field = pos, "speculative-config"
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
