package slurmemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckRoles: the emulated profile's roles are this build's; a profile
// naming a role the build lacks is an error naming the entry, not a skip.
func TestCheckRoles(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	profile := filepath.Join(root, "configs", "clusters", "slurm-emu.yaml")
	require.NoError(t, checkRoles(profile))

	data, err := os.ReadFile(profile)
	require.NoError(t, err)
	bad := filepath.Join(t.TempDir(), "slurm-emu.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(string(data), "role: nginx", "role: haproxy", 1)), 0o644))
	err = checkRoles(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `emulation.entrypoints[7].role "haproxy" is not a simulator role of this build`)
}
