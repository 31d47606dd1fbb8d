package prereq

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skip(args ...any)               { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		ci     string
		isCI   bool
		failed bool
	}{{"", false, false}, {"false", false, false}, {"0", false, false}, {"true", true, true}, {"1", true, true}, {"TRUE", true, true}} {
		t.Setenv("CI", tc.ci)
		assert.Equal(t, tc.isCI, CI(), "CI=%q", tc.ci)
		r := &recorder{TB: t}
		Missing(r, "no git")
		if tc.failed {
			assert.Equal(t, "no git (CI="+tc.ci+": a missing prerequisite fails)", r.failed)
			assert.Empty(t, r.skipped)
		} else {
			assert.Equal(t, "no git", r.skipped, "CI=%q skips", tc.ci)
			assert.Empty(t, r.failed)
		}
	}
}
