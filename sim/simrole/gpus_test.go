package simrole

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"gb200-[03-10]": "gb200-03", "gb200-03,gb200-04": "gb200-03", "gb200-[03,05-06]": "gb200-03",
		"gb200-07": "gb200-07", "127.0.0.1": "127.0.0.1", "a[1-2],b[3-4]": "a1", "": "",
	} {
		assert.Equal(t, want, firstHost(in), in)
	}
}
