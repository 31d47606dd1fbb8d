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
		assert.ElementsMatch(t, []string{"postgresql", "temporal-admin-tools", "temporal", "temporal-create-namespace", "temporal-ui", "node", "worker", "worker-2"},
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

// Needs no Docker engine: the local-image and mTLS overlays load on top of
// the base file; every service runs a local image, the server requires
// client certificates and every client presents one.
func TestComposeLocalTLSOverlays(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	files := []string{"docker-compose.yml", "docker-compose.local.yml", "docker-compose.tls.yml"}
	for i := range files {
		files[i] = filepath.Join(root, files[i])
	}
	opts, err := cli.NewProjectOptions(files, cli.WithName("sweepflow"), cli.WithWorkingDirectory(root),
		cli.WithEnv([]string{"SWEEPFLOW_CERTS_DIR=/srv/certs"}))
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err)
	for _, svc := range p.Services {
		assert.Regexp(t, `^sweepflow-local/`, svc.Image, "%s runs a local image", svc.Name)
	}
	srv, err := p.GetService("temporal")
	require.NoError(t, err)
	assert.Equal(t, "true", *srv.Environment["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"])
	for _, name := range []string{"temporal-create-namespace", "worker", "worker-2"} {
		s, err := p.GetService(name)
		require.NoError(t, err)
		assert.Equal(t, "/certs/client.pem", *s.Environment["TEMPORAL_TLS_CLIENT_CERT_PATH"], name)
		assert.Equal(t, "temporal", *s.Environment["TEMPORAL_TLS_SERVER_NAME"], name)
	}
	ui, err := p.GetService("temporal-ui")
	require.NoError(t, err)
	assert.Equal(t, "/certs/client.pem", *ui.Environment["TEMPORAL_TLS_CERT"])
	w, err := p.GetService("worker-2")
	require.NoError(t, err)
	assert.Equal(t, "service:node", w.NetworkMode)
	assert.Equal(t, "service:node", w.Pid)
}
