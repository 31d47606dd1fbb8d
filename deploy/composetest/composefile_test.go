package composetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadProject reads docker-compose.yml with Compose's own loader (schema
// validation, interpolation, normalisation), as `docker compose config` does.
func loadProject(t *testing.T, env ...string) *types.Project {
	t.Helper()
	root := repoRoot(t)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithName("sweepflow"), cli.WithWorkingDirectory(root), cli.WithEnv(env))
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err)
	return p
}

// Needs no Docker engine: Compose's loader accepts the file, and the GSM8K
// mount is a named volume by default and a bind mount of the directory
// SWEEPFLOW_GSM8K_DIR names.
func TestComposeFileLoads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      []string
		kind     string
		source   string
		tempPort string
	}{
		{name: "defaults", kind: types.VolumeTypeVolume, source: "gsm8k", tempPort: "7233"},
		{name: "host GSM8K and ports", env: []string{"SWEEPFLOW_GSM8K_DIR=/srv/gsm8k", "SWEEPFLOW_TEMPORAL_PORT=17233"},
			kind: types.VolumeTypeBind, source: "/srv/gsm8k", tempPort: "17233"},
	}
	for _, tt := range tests {
		p := loadProject(t, tt.env...)
		assert.ElementsMatch(t, []string{"postgresql", "temporal-admin-tools", "temporal", "temporal-create-namespace", "temporal-ui", "worker"},
			p.ServiceNames(), tt.name)
		w, err := p.GetService("worker")
		require.NoError(t, err)
		require.NotNil(t, w.Build, "worker is built")
		assert.Equal(t, repoRoot(t), w.Build.Context)
		var gsm *types.ServiceVolumeConfig
		for i := range w.Volumes {
			if w.Volumes[i].Target == "/gsm8k" {
				gsm = &w.Volumes[i]
			}
		}
		require.NotNil(t, gsm, "%s: no /gsm8k mount", tt.name)
		assert.Equal(t, tt.kind, gsm.Type, tt.name)
		assert.Equal(t, tt.source, gsm.Source, tt.name)
		assert.True(t, gsm.ReadOnly, tt.name)
		srv, err := p.GetService("temporal")
		require.NoError(t, err)
		require.Len(t, srv.Ports, 1)
		assert.Equal(t, tt.tempPort, srv.Ports[0].Published, tt.name)
		assert.Equal(t, uint32(7233), srv.Ports[0].Target, tt.name)
		assert.Equal(t, types.ServiceConditionCompletedSuccessfully, w.DependsOn["temporal-create-namespace"].Condition, tt.name)
	}
}
