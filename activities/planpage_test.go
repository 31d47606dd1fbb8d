package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/results"
)

func TestLoadPlanPage(t *testing.T) {
	ctx := context.Background()
	store, err := results.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	defer store.Close()
	var pts []point.Spec
	for i := range 450 {
		pts = append(pts, point.Spec{PointID: fmt.Sprintf("p%03d", i), Nodes: 1, Row: json.RawMessage(fmt.Sprintf(`{"conc":%d}`, i))})
	}
	plan, err := json.Marshal(map[string]any{"sweep_id": "s", "points": pts})
	require.NoError(t, err)
	require.NoError(t, store.PutSweepPlan(ctx, results.SweepPlan{SweepID: "s", PlanJSON: plan}))
	a := &Activities{Store: store}

	var got []point.Spec
	for off := 0; off < 450; off += 200 {
		page, err := a.LoadPlanPage(ctx, PlanPageRequest{SweepID: "s", Offset: off, Limit: 200})
		require.NoError(t, err)
		assert.Equal(t, 450, page.Total)
		got = append(got, page.Points...)
	}
	assert.Equal(t, pts, got, "the pages are the plan, in order")
	page, err := a.LoadPlanPage(ctx, PlanPageRequest{SweepID: "s", Offset: 450, Limit: 200})
	require.NoError(t, err)
	assert.Empty(t, page.Points, "past the end")

	tests := []struct {
		name string
		a    *Activities
		req  PlanPageRequest
		want string
	}{
		{"no ledger", &Activities{}, PlanPageRequest{SweepID: "s", Limit: 1}, "this worker has no ledger"},
		{"no plan", a, PlanPageRequest{SweepID: "other", Limit: 1}, "holds no stored plan"},
		{"bad limit", a, PlanPageRequest{SweepID: "s"}, "bad plan page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.a.LoadPlanPage(ctx, tt.req)
			require.ErrorContains(t, err, tt.want)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app))
			assert.True(t, app.NonRetryable(), "retrying cannot help")
		})
	}
}
