package hostlist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"gb200-[01-03]", []string{"gb200-01", "gb200-02", "gb200-03"}, ""},
		{"gb200-01,gb200-02", []string{"gb200-01", "gb200-02"}, ""},
		{"n[8-10]", []string{"n8", "n9", "n10"}, ""},
		{"a[1,3-4],b", []string{"a1", "a3", "a4", "b"}, ""},
		{"r[1-2]-n[01-02]", []string{"r1-n01", "r1-n02", "r2-n01", "r2-n02"}, ""},
		{"10.0.0.[1-2]", []string{"10.0.0.1", "10.0.0.2"}, ""},
		{"gb200-[01-02", nil, "unbalanced '['"},
		{"gb200-[03-01]", nil, "bad range"},
		{"a,a", nil, "names a twice"},
		{"", nil, "empty node list"},
		{"gb200-[01-02,07],login1", []string{"gb200-01", "gb200-02", "gb200-07", "login1"}, ""},
		{"gb200-[a-b]", nil, "bad range"},
		{"gb200-]01[", nil, "unbalanced"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Expand(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
