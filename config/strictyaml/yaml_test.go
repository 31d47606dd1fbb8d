package strictyaml

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScalarValueFollowsPyYAML(t *testing.T) {
	cases := []struct {
		src  string
		want any
	}{
		{"2_063_837", int64(2063837)},
		{"0x1F", int64(31)},
		{"017", int64(15)},
		{"1:30", int64(90)},
		{"yes", true},
		{"Off", false},
		{"y", "y"},
		{"0.80", 0.8},
		{"1e3", "1e3"}, // PyYAML needs a dot and a signed exponent
		{"1.0e+3", 1000.0},
		{"~", nil},
		{"'8'", "8"},
		{"!!str 8", "8"},
		{"null", nil},
		{"8", int64(8)},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			root, err := Parse("x", []byte("v: "+tc.src))
			require.NoError(t, err)
			v, err := ScalarValue(root.Content[1])
			require.NoError(t, err)
			require.Equal(t, tc.want, v)
		})
	}
}
