package point

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStages(t *testing.T) {
	assert.Equal(t, []string{StagePerf, StageEval}, ReusableStages())
	assert.NotContains(t, OperatorStages(), StageTeardown)
	for _, s := range Stages() {
		assert.Greater(t, s.StartToClose, s.Heartbeat, s.Name)
		assert.Positive(t, s.MaxAttempts, s.Name)
	}
	_, ok := Lookup(StageLedger)
	assert.True(t, ok)
	_, ok = Lookup("nope")
	assert.False(t, ok)
}
