package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// launcherSrtslurm is an srtslurm.yaml in the shape InferenceX's GB200
// launcher writes (runners/launch_gb200-nv.sh), for a dynamo-vllm dsv4 key.
const launcherSrtslurm = `# SRT SLURM Configuration for GB200

# Default SLURM settings
default_account: "benchmark"
default_partition: "batch"
default_time_limit: "6:00:00"

# Resource defaults
gpus_per_node: 4
network_interface: ""

srtctl_root: "/mnt/lustre01/srt-slurm"

# Model path aliases
model_paths:
  "deepseek-v4-pro": "/mnt/lustre01/models/DeepSeek-V4-Pro"
  "deepseek-v4-pro-mxfp4": "/mnt/lustre01/models/DeepSeek-V4-Pro"

containers:
  dynamo-trtllm: /mnt/sa-shared/vllm_vllm-openai_v0.20.1-ubuntu2404.sqsh
  dynamo-sglang: /mnt/sa-shared/vllm_vllm-openai_v0.20.1-ubuntu2404.sqsh
  "vllm/vllm-openai:v0.20.1-ubuntu2404": /mnt/sa-shared/vllm_vllm-openai_v0.20.1-ubuntu2404.sqsh
  nginx-sqsh: /mnt/sa-shared/nginx_1.27.4.sqsh
use_segment_sbatch_directive: false
default_mounts:
  /mnt/sa-shared/ai-perf-cache: /aiperf_mmap_cache
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestLoadSrtslurm(t *testing.T) {
	s, err := LoadSrtslurm(writeFile(t, t.TempDir(), "srtslurm.yaml", launcherSrtslurm))
	require.NoError(t, err)
	assert.Equal(t, "benchmark", s.DefaultAccount)
	assert.Equal(t, "batch", s.DefaultPartition)
	assert.Equal(t, "6:00:00", s.DefaultTimeLimit)
	assert.Equal(t, 4, s.GPUsPerNode)
	assert.Equal(t, "/mnt/lustre01/srt-slurm", s.SrtctlRoot)
	assert.Equal(t, map[string]string{"deepseek-v4-pro": "/mnt/lustre01/models/DeepSeek-V4-Pro", "deepseek-v4-pro-mxfp4": "/mnt/lustre01/models/DeepSeek-V4-Pro"}, s.ModelPaths)
	assert.Equal(t, "/mnt/sa-shared/vllm_vllm-openai_v0.20.1-ubuntu2404.sqsh", s.Containers["vllm/vllm-openai:v0.20.1-ubuntu2404"])
	assert.Len(t, s.Containers, 4)
	assert.Equal(t, []string{"use_segment_sbatch_directive", "default_mounts"}, s.Unused, "an empty network_interface says nothing")

	for name, tc := range map[string]struct{ old, new, want string }{
		"unknown key": {"gpus_per_node: 4", "gpus_per_node: 4\ndefault_container: x.sqsh",
			"srtslurm.yaml:10: default_container: unknown field"},
		"relative model": {`"deepseek-v4-pro": "/mnt/lustre01/models/DeepSeek-V4-Pro"`, `"deepseek-v4-pro": "models/DeepSeek-V4-Pro"`,
			`srtslurm.yaml:16: model_paths.deepseek-v4-pro: must be an absolute path, got "models/DeepSeek-V4-Pro"`},
		"bad time": {`default_time_limit: "6:00:00"`, `default_time_limit: "soon"`, "srtslurm.yaml:6: default_time_limit: expected a Slurm time limit"},
		"bad gpus": {"gpus_per_node: 4", "gpus_per_node: four", "srtslurm.yaml:9: gpus_per_node: expected an integer"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, launcherSrtslurm, tc.old)
			body := strings.Replace(launcherSrtslurm, tc.old, tc.new, 1)
			_, err := LoadSrtslurm(writeFile(t, t.TempDir(), "srtslurm.yaml", body))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestProfileFromSrtslurm: `starter cluster import` writes a profile that
// loads, with the file's defaults, aliases and containers.
func TestProfileFromSrtslurm(t *testing.T) {
	dir := t.TempDir()
	s, err := LoadSrtslurm(writeFile(t, dir, "srtslurm.yaml", launcherSrtslurm))
	require.NoError(t, err)
	data, err := s.Profile(ProfileFrom{Name: "watchtower", Nodes: 18, SharedRoot: "/mnt/lustre01/sweepflow", NodeLocalRoot: "/mnt/numa1/sweepflow",
		InferenceX: "/mnt/lustre01/InferenceX", Runners: []string{"cluster:gb200-nv", "gb200"}})
	require.NoError(t, err)
	assert.Contains(t, string(data), "# Not carried (no counterpart in a profile): use_segment_sbatch_directive, default_mounts.\n")
	c, err := ParseCluster("p.yaml", filepath.Join(dir, "p.yaml"), data)
	require.NoError(t, err)
	assert.Equal(t, "watchtower", c.Name)
	assert.Equal(t, 18, c.Nodes)
	assert.Equal(t, 4, c.GPUsPerNode)
	assert.Equal(t, "batch", c.Partition)
	assert.Equal(t, "benchmark", c.Account)
	assert.Equal(t, 6*time.Hour, c.DefaultTimeLimit)
	assert.Equal(t, RuntimePyxis, c.Runtime)
	assert.Equal(t, Model{Path: "/mnt/lustre01/models/DeepSeek-V4-Pro"}, c.Models["deepseek-v4-pro-mxfp4"], "srtctl loads it where it is: nothing to stage")
	assert.Equal(t, s.Containers, c.Containers)
	assert.Equal(t, "/mnt/lustre01/InferenceX", c.InferenceX)
	assert.Equal(t, "/mnt/lustre01/srt-slurm", c.SrtSlurm)
	assert.Equal(t, "/mnt/lustre01/srt-slurm", c.SrtRoot, "srt-root defaults to the srt-slurm checkout")
	assert.Equal(t, "/mnt/lustre01/InferenceX", c.InfmaxWorkspace, "infmax-workspace defaults to the InferenceX checkout")
	assert.Empty(t, c.RecipesRoot, "composed from the checkouts when used")
	assert.True(t, c.ServesRunner("gb200"))

	_, err = s.Profile(ProfileFrom{Nodes: 18, SharedRoot: "/s", NodeLocalRoot: "/n"})
	require.EqualError(t, err, s.Path+": names no cluster: give the profile a name", "the file names no cluster")
}

// TestProfileTakesSrtslurmYAML: a profile naming an srtslurm.yaml takes its
// aliases and containers; its own entries are the more specific and win.
func TestProfileTakesSrtslurmYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "srtslurm.yaml", launcherSrtslurm)
	profile := `name: p
backend: slurm
nodes: 2
gpus-per-node: 4
partition: batch
shared-root: /s
node-local-root: /n
srt-slurm: srt
srtslurm-yaml: srtslurm.yaml
containers:
  nginx-sqsh: /mine/nginx.sqsh
models:
  deepseek-v4-pro:
    path: /n/models/DeepSeek-V4-Pro
    source: /s/models/DeepSeek-V4-Pro
`
	c, err := ParseCluster("p.yaml", filepath.Join(dir, "p.yaml"), []byte(profile))
	require.NoError(t, err)
	assert.Equal(t, "/mine/nginx.sqsh", c.Containers["nginx-sqsh"])
	assert.Equal(t, "/mnt/sa-shared/vllm_vllm-openai_v0.20.1-ubuntu2404.sqsh", c.Containers["dynamo-sglang"])
	assert.Equal(t, Model{Path: "/n/models/DeepSeek-V4-Pro", Source: "/s/models/DeepSeek-V4-Pro"}, c.Models["deepseek-v4-pro"])
	assert.Equal(t, Model{Path: "/mnt/lustre01/models/DeepSeek-V4-Pro"}, c.Models["deepseek-v4-pro-mxfp4"])
	assert.Equal(t, filepath.Join(dir, "srt"), c.RecipesRoot, "without inferencex the srt-slurm checkout is the recipes root")
	assert.Equal(t, filepath.Join(dir, "srt"), c.SrtRoot)

	writeFile(t, dir, "srtslurm.yaml", launcherSrtslurm+"bogus: 1\n")
	_, err = ParseCluster("p.yaml", filepath.Join(dir, "p.yaml"), []byte(profile))
	require.ErrorContains(t, err, "p.yaml:9: srtslurm-yaml: ")
	require.ErrorContains(t, err, "bogus: unknown field")

	_, err = ParseCluster("p.yaml", filepath.Join(dir, "p.yaml"), []byte(profile+"inferencex: ix\nrecipes-root: r\n"))
	require.ErrorContains(t, err, "recipes-root: give either recipes-root (a tree composed by hand) or inferencex")
}
