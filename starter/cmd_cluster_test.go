package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
)

// TestClusterImport: `starter cluster import` writes a profile that loads,
// says what it did not carry, and refuses what srtctl would not read.
func TestClusterImport(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "srtslurm.yaml")
	require.NoError(t, os.WriteFile(src, []byte(`default_account: "benchmark"
default_partition: "batch"
default_time_limit: "4:00:00"
gpus_per_node: 4
srtctl_root: "/mnt/srt-slurm"
model_paths:
  "nvidia/GLM-5.2-NVFP4": "/scratch/models/GLM-5.2-NVFP4"
containers:
  nginx-sqsh: /squash/nginx_1.27.4.sqsh
default_mounts:
  /data/hf-hub-cache: /hf_hub_cache
`), 0o644))
	out := filepath.Join(dir, "gb300.yaml")
	var stdout, stderr bytes.Buffer
	code := runIO([]string{"cluster", "import", src, "--name", "gb300-mine", "--nodes", "18", "--shared-root", "/data/sweepflow",
		"--node-local-root", "/scratch/sweepflow", "--runners", "cluster:gb300-nv,gb300", "-o", out}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, "not carried (no counterpart in a profile): default_mounts\n", stderr.String())
	c, err := config.LoadCluster(out)
	require.NoError(t, err)
	assert.Equal(t, "gb300-mine", c.Name)
	assert.Equal(t, "/scratch/models/GLM-5.2-NVFP4", c.Models["nvidia/GLM-5.2-NVFP4"].Path)
	assert.Equal(t, "/squash/nginx_1.27.4.sqsh", c.Containers["nginx-sqsh"])
	assert.Equal(t, "/mnt/srt-slurm", c.RecipesRoot)
	assert.True(t, c.ServesRunner("gb300"))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{src, "--name", "x"}, "--nodes, --shared-root and --node-local-root are required"},
		{[]string{src, "--nodes", "2", "--shared-root", "/s", "--node-local-root", "/n"}, "give --name: " + src + " names no cluster"},
		{[]string{filepath.Join(dir, "missing.yaml"), "--name", "x", "--nodes", "2", "--shared-root", "/s", "--node-local-root", "/n"}, "cannot read srtslurm.yaml"},
	} {
		stdout.Reset()
		stderr.Reset()
		code := runIO(append([]string{"cluster", "import"}, tc.args...), &stdout, &stderr)
		assert.NotEqual(t, 0, code, tc.args)
		assert.Contains(t, stderr.String(), tc.want, tc.args)
	}
}

// TestRecipesFlagsExclusive: a root composed by hand and one composed from
// the checkouts are one or the other.
func TestRecipesFlagsExclusive(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runIO([]string{"plan", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--recipes-root", "..", "--inferencex", "."}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--recipes-root names a tree composed by hand; --inferencex and --srt-slurm compose one")
	stderr.Reset()
	code = runIO([]string{"plan", "--sweep", "../configs/sweeps/dsv4-gb200-agentx.yaml", "--inferencex", "."}, &stdout, &stderr)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr.String(), "is not an InferenceX checkout")
}
