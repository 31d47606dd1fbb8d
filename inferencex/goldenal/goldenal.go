// Package goldenal reads InferenceX's golden acceptance-length files
// (utils/golden_al_distribution/*.yaml): model -> thinking mode -> number of
// speculative tokens -> AL. Perf runs inject the golden AL as synthetic
// acceptance so throughput is comparable across engines; evals never do.
package goldenal

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Table maps model -> mode (thinking_on|thinking_off) -> draft tokens -> AL.
type Table map[string]map[string]map[int]float64

// Load parses one golden AL file.
func Load(file string) (Table, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("golden AL: %w", err)
	}
	return Parse(file, data)
}

// Parse parses golden AL YAML; name is used in errors.
func Parse(name string, data []byte) (Table, error) {
	var raw map[string]map[string]map[string]float64
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := Table{}
	for model, modes := range raw {
		t[model] = map[string]map[int]float64{}
		for mode, levels := range modes {
			if mode != "thinking_on" && mode != "thinking_off" {
				return nil, fmt.Errorf("%s: %s: unknown mode %q (want thinking_on or thinking_off)", name, model, mode)
			}
			t[model][mode] = map[int]float64{}
			for k, al := range levels {
				n, err := strconv.Atoi(k)
				if err != nil || n <= 0 {
					return nil, fmt.Errorf("%s: %s.%s: draft token count %q is not a positive integer", name, model, mode, k)
				}
				if al < 1 {
					return nil, fmt.Errorf("%s: %s.%s.%d: acceptance length %v is below 1", name, model, mode, n, al)
				}
				t[model][mode][n] = al
			}
		}
	}
	return t, nil
}

// Lookup finds the AL for a Hugging Face model id ("deepseek-ai/DeepSeek-V4-
// Pro-0813" matches the file's "deepseek-v4-pro-0813"), a thinking mode and a
// draft token count.
func (t Table) Lookup(model string, thinking bool, draftTokens int) (float64, error) {
	key := strings.ToLower(path.Base(model))
	modes, ok := t[key]
	if !ok {
		return 0, fmt.Errorf("golden AL: no entry for model %q (looked for %q)", model, key)
	}
	mode := "thinking_off"
	if thinking {
		mode = "thinking_on"
	}
	levels, ok := modes[mode]
	if !ok {
		return 0, fmt.Errorf("golden AL: model %q has no %s values", key, mode)
	}
	al, ok := levels[draftTokens]
	if !ok {
		return 0, fmt.Errorf("golden AL: model %q %s has no value for %d draft tokens", key, mode, draftTokens)
	}
	return al, nil
}
