package pyjson

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The expected strings are what CPython 3 prints for repr(f) and json.dumps.
func TestFloatRepr(t *testing.T) {
	floats := map[float64]string{0.85: "0.85", 2: "2.0", 1e-5: "1e-05", 1e16: "1e+16", 123456789012345.0: "123456789012345.0",
		0.0001: "0.0001", -3.5: "-3.5", 1.5e20: "1.5e+20", 0: "0.0", math.Inf(1): "inf"}
	for f, want := range floats {
		assert.Equal(t, want, FloatRepr(f), "%v", f)
	}
}

type obj [][2]any

func (o obj) Len() int               { return len(o) }
func (o obj) At(i int) (string, any) { return o[i][0].(string), o[i][1] }

func TestDumps(t *testing.T) {
	v := obj{{"a", "x\"é\n"}, {"b", []any{int64(1), 2.5, true, nil, obj{}}}, {"c", obj{{"k", []any{}}}}, {"d", math.Inf(1)}, {"e", "😀"}}
	assert.Equal(t, `{"a": "x\"\u00e9\n", "b": [1, 2.5, true, null, {}], "c": {"k": []}, "d": Infinity, "e": "\ud83d\ude00"}`, Dumps(v, 0))
	assert.Equal(t, "{\n  \"a\": \"x\\\"\\u00e9\\n\",\n  \"b\": [\n    1,\n    2.5,\n    true,\n    null,\n    {}\n  ],\n  \"c\": {\n    \"k\": []\n  },\n  \"d\": Infinity,\n  \"e\": \"\\ud83d\\ude00\"\n}", Dumps(v, 2))
}

// TestString: json.dumps(s) (ensure_ascii) escapes everything outside ' '
// to '~'. Expected values from Python 3.12:
// json.dumps('a"\\\x7f\u00e9\u20ac\U0001f600\n') ==
// '"a\\"\\\\\\u007f\\u00e9\\u20ac\\ud83d\\ude00\\n"'.
func TestString(t *testing.T) {
	got := String("a\"\\\x7f\u00e9\u20ac\U0001f600\n")
	want := `"a\"\\\u007f\u00e9\u20ac\ud83d\ude00\n"`
	if got != want {
		t.Fatalf("String = %s, want %s", got, want)
	}
}
