// Package anynum reads a number out of a decoded JSON or YAML value.
package anynum

import (
	"encoding/json"
	"strconv"
)

// Float converts a decoded number (float64, int, int64, json.Number) or a
// numeric string to float64; ok is false for anything else.
func Float(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}
