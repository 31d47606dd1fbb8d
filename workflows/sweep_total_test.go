package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/sweepflow/sweepflow/point"
)

// total must count what progress lists, without building it.
func TestSweepTotalMatchesProgress(t *testing.T) {
	pts := []point.Spec{{PointID: "a"}, {PointID: "b"}, {PointID: "c"}}
	one := func(ps ...point.Spec) []queuedDeployment { return queuedDeployments(ps, nil) }
	tests := []struct {
		name string
		run  sweepRun
	}{
		{"fresh", sweepRun{in: SweepInput{Points: pts}, points: pts, queue: one(pts...)}},
		{"some done", sweepRun{in: SweepInput{Points: pts}, points: pts, queue: one(pts[2:]...), running: queuedDeployments(pts[1:2], nil),
			done: []PointOutcome{{PointID: "a"}}}},
		{"continued as new", sweepRun{in: SweepInput{Points: pts[1:]}, points: pts[1:], queue: one(pts[2:]...),
			done: []PointOutcome{{PointID: "x"}, {PointID: "y"}, {PointID: "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, len(tt.run.progress(time.Time{}).Points), tt.run.total())
		})
	}
}
