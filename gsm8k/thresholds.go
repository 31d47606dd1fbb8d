package gsm8k

import (
	"fmt"
	"os"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Thresholds are InferenceX's eval floors (utils/evals/thresholds.yaml):
// a floor per task under "default", overridden per model prefix under
// "models.<prefix>".
type Thresholds struct {
	Default map[string]float64
	Models  map[string]map[string]float64
}

// LoadThresholds reads a thresholds.yaml. Errors name the file, line and key.
func LoadThresholds(path string) (*Thresholds, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gsm8k: %w", err)
	}
	return ParseThresholds(data, path)
}

// ParseThresholds parses thresholds.yaml content; name is used in errors.
func ParseThresholds(data []byte, name string) (*Thresholds, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	t := &Thresholds{Default: map[string]float64{}, Models: map[string]map[string]float64{}}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty thresholds file", name)
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: top level must be a mapping with default: and models:", name, doc.Line)
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		switch k.Value {
		case "default":
			m, err := floorMap(v, name, "default")
			if err != nil {
				return nil, err
			}
			t.Default = m
		case "models":
			if v.Kind != yaml.MappingNode {
				if v.Tag == "!!null" {
					continue
				}
				return nil, fmt.Errorf("%s:%d: field models: must be a mapping of model prefix to task floors", name, v.Line)
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				pk, pv := v.Content[j], v.Content[j+1]
				m, err := floorMap(pv, name, "models."+pk.Value)
				if err != nil {
					return nil, err
				}
				t.Models[pk.Value] = m
			}
		default:
			return nil, fmt.Errorf("%s:%d: field %s: unknown key (want default or models)", name, k.Line, k.Value)
		}
	}
	return t, nil
}

func floorMap(n *yaml.Node, name, field string) (map[string]float64, error) {
	out := map[string]float64{}
	if n.Tag == "!!null" {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: field %s: must be a mapping of task to floor", name, n.Line, field)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || err != nil {
			return nil, fmt.Errorf("%s:%d: field %s.%s: %q is not a number", name, v.Line, field, k.Value, v.Value)
		}
		if f < 0 || f > 1 {
			return nil, fmt.Errorf("%s:%d: field %s.%s: floor %v is outside [0, 1]", name, v.Line, field, k.Value, f)
		}
		out[k.Value] = f
	}
	return out, nil
}

// Floor is validate_scores.py's lookup: models.<prefix>.<task>, then
// default.<task>. ok is false when neither exists (InferenceX then falls
// back to its --min-score, 0.85).
func (t *Thresholds) Floor(task, modelPrefix string) (float64, bool) {
	if m, ok := t.Models[modelPrefix]; ok {
		if f, ok := m[task]; ok {
			return f, true
		}
	}
	f, ok := t.Default[task]
	return f, ok
}

// DefaultMinScore is validate_scores.py's --min-score default, used when the
// thresholds file has no floor for the task.
const DefaultMinScore = 0.85

// Verdict is the gate's decision. Failing it marks the point eval-failed; it
// is a recorded outcome, not an error to retry.
type Verdict struct {
	Passed bool    `json:"passed"`
	Floor  float64 `json:"floor"`
	Reason string  `json:"reason"`
}

// Gate applies InferenceX's rule: every exact_match metric, strict-match and
// flexible-extract alike, must be >= floor. A run that scored nothing fails.
func Gate(s Summary, floor float64) Verdict {
	v := Verdict{Floor: floor}
	switch {
	case s.NEff == 0:
		v.Reason = "no documents were scored"
	case s.EMStrict < floor && s.EMFlexible < floor:
		v.Reason = fmt.Sprintf("em_strict %.4f and em_flexible %.4f below floor %.2f", s.EMStrict, s.EMFlexible, floor)
	case s.EMStrict < floor:
		v.Reason = fmt.Sprintf("em_strict %.4f below floor %.2f (em_flexible %.4f)", s.EMStrict, floor, s.EMFlexible)
	case s.EMFlexible < floor:
		v.Reason = fmt.Sprintf("em_flexible %.4f below floor %.2f (em_strict %.4f)", s.EMFlexible, floor, s.EMStrict)
	default:
		v.Passed = true
		v.Reason = fmt.Sprintf("em_strict %.4f and em_flexible %.4f reach floor %.2f", s.EMStrict, s.EMFlexible, floor)
	}
	return v
}

// GateFloor picks the gate floor: flagFloor when > 0, else the thresholds
// file th
// (gsm8k_cot falls back to gsm8k's floor, then to InferenceX's --min-score
// default 0.85). No floor and no file means no gate.
func GateFloor(flagFloor float64, th *Thresholds, task, prefix string) (float64, bool) {
	if flagFloor > 0 {
		return flagFloor, true
	}
	if th == nil {
		return 0, false
	}
	if f, ok := th.Floor(task, prefix); ok {
		return f, true
	}
	if f, ok := th.Floor("gsm8k", prefix); ok {
		return f, true
	}
	return DefaultMinScore, true
}
