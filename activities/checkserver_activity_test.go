package activities

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/point"
)

// TestCheckServer: the probe before a point uses the server the previous
// point of its deployment handed over. A dead server or lost nodes are
// answers the workflow acts on; only an unexpected backend error fails.
func TestCheckServer(t *testing.T) {
	ep := &cluster.Server{URL: "http://127.0.0.1:1", Mode: "perf", Handle: "fake"}
	tests := []struct {
		name      string
		backend   *fakeBackend
		endpoint  *cluster.Server
		want      ServerCheck
		wantErr   bool
		reasonHas string
	}{
		{name: "alive", backend: &fakeBackend{}, endpoint: ep, want: ServerCheck{AllocationAlive: true, ServerAlive: true}},
		{name: "allocation only", backend: &fakeBackend{}, want: ServerCheck{AllocationAlive: true}},
		{name: "server died", backend: &fakeBackend{healthErr: fmt.Errorf("%w: server process 42 exited", cluster.ErrAllocationLost)},
			endpoint: ep, want: ServerCheck{AllocationAlive: true}, reasonHas: "process 42 exited"},
		{name: "nodes gone", backend: &fakeBackend{checkErr: fmt.Errorf("%w: job 7 no longer holds its nodes", cluster.ErrAllocationLost)},
			endpoint: ep, reasonHas: "job 7"},
		{name: "backend broken", backend: &fakeBackend{checkErr: errors.New("squeue: connection refused")}, endpoint: ep, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{Backend: tc.backend, StateDir: t.TempDir()}
			env := newActivityEnv(a)
			val, err := env.ExecuteActivity(a.CheckServer, StageInput{Point: point.Spec{PointID: "p"}, Alloc: cluster.Allocation{JobID: "7"}, Endpoint: tc.endpoint})
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got ServerCheck
			require.NoError(t, val.Get(&got))
			assert.Equal(t, tc.want.AllocationAlive, got.AllocationAlive)
			assert.Equal(t, tc.want.ServerAlive, got.ServerAlive)
			assert.Contains(t, got.Reason, tc.reasonHas)
		})
	}
}
