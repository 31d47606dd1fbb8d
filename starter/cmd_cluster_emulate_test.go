package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan/launchcheck"
)

// emulateRack runs `starter cluster emulate` for a shipped rack profile
// with the emulation's roots under a temporary SWEEPFLOW_DATA_DIR, and
// returns the written profile's path and the emulation's data directory.
func emulateRack(t *testing.T, rack string, extra ...string) (profile, data string) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	t.Setenv("SWEEPFLOW_DATA_DIR", data)
	profile = filepath.Join(dir, rack+"-emu.yaml")
	var stdout, stderr bytes.Buffer
	code := runIO(append([]string{"cluster", "emulate", filepath.Join("..", "configs", "clusters", rack+".yaml"),
		"--emulation", filepath.Join("..", "configs", "clusters", "slurm-emu.yaml"), "-o", profile}, extra...), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	return profile, data
}

// TestClusterEmulate: the emulated stand-in of each shipped rack keeps the
// rack's GPU type, runners, every model alias (at the rack's directory name,
// on the emulation's filesystems) and bring-up time, runs on the emulation
// (its partition, entry points, no containers, load-generator perf), and
// --checkpoints writes one simulated checkpoint per distinct directory.
func TestClusterEmulate(t *testing.T) {
	emu, err := config.LoadCluster(filepath.Join("..", "configs", "clusters", "slurm-emu.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct{ rack string }{{"gb200-nvl72"}, {"gb300-nvl72"}} {
		t.Run(tc.rack, func(t *testing.T) {
			profile, data := emulateRack(t, tc.rack, "--checkpoints", "--shards", "2", "--shard-mib", "1")
			rack, err := config.LoadCluster(filepath.Join("..", "configs", "clusters", tc.rack+".yaml"))
			require.NoError(t, err)
			c, err := config.LoadCluster(profile)
			require.NoError(t, err)
			assert.Equal(t, "slurm-emu-"+tc.rack, c.Name)
			assert.True(t, c.Simulated())
			assert.Equal(t, emu.Partition, c.Partition)
			assert.Equal(t, emu.Nodes, c.Nodes)
			assert.Equal(t, emu.TaskQueue, c.TaskQueue)
			assert.Equal(t, config.RuntimeNone, c.Runtime)
			assert.Equal(t, config.PerfClientLoadgen, c.PerfClient)
			assert.Equal(t, emu.Emulation.Entrypoints, c.Emulation.Entrypoints)
			assert.Equal(t, rack.GPUType, c.GPUType)
			assert.Equal(t, rack.Runners, c.Runners)
			assert.Equal(t, rack.RowImageContainers, c.RowImageContainers)
			assert.Equal(t, rack.BringUpTime, c.BringUpTime)
			require.Len(t, c.Models, len(rack.Models))
			for alias, m := range rack.Models {
				got, ok := c.Models[alias]
				require.True(t, ok, alias)
				assert.Equal(t, filepath.Join(data, "slurm-emu", "nvme", "%n", "models", filepath.Base(m.Path)), got.Path, alias)
				assert.Equal(t, filepath.Join(data, "slurm-emu", "shared", "models", filepath.Base(m.Path)), got.Source, alias)
			}
			for name := range rack.Containers {
				assert.Contains(t, c.Containers, name)
			}
			dirs := config.FleetCheckpoints(c)
			require.NotEmpty(t, dirs)
			for _, d := range dirs {
				meta, err := os.ReadFile(filepath.Join(d, "config.json"))
				require.NoError(t, err, d)
				assert.Contains(t, string(meta), `"simulated": true`)
				for _, shard := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
					st, err := os.Stat(filepath.Join(d, shard))
					require.NoError(t, err)
					assert.EqualValues(t, 1<<20, st.Size())
				}
			}
			entries, err := os.ReadDir(filepath.Join(data, "slurm-emu", "shared", "models"))
			require.NoError(t, err)
			assert.Len(t, entries, len(dirs), "a checkpoint for each distinct directory, nothing else")
		})
	}

	// With the user's checkouts, the profile composes its recipes root from
	// them (the worker launches from the root the plan was made from).
	ix, srt := t.TempDir(), t.TempDir()
	profile, data := emulateRack(t, "gb200-nvl72", "--inferencex", ix, "--srt-slurm", srt)
	c, err := config.LoadCluster(profile)
	require.NoError(t, err)
	assert.Equal(t, ix, c.InferenceX)
	assert.Equal(t, srt, c.SrtSlurm)
	assert.Empty(t, c.RecipesRoot, "composed from the checkouts, not the emulation's own root")
	assert.Equal(t, filepath.Join(data, "slurm-emu", "shared", "srt-slurm"), c.SrtRoot, "the emulation's stand-in is mounted")

	var stdout, stderr bytes.Buffer
	code := runIO([]string{"cluster", "emulate", filepath.Join("..", "configs", "clusters", "gb200-nvl72.yaml"),
		"--emulation", filepath.Join("..", "configs", "clusters", "gb200-nvl72.yaml")}, &stdout, &stderr)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr.String(), "gb200-nvl72.yaml: not an emulated partition")
}

// TestLaunchableEmulatedFleet: on the shared data, the emulated stand-in of
// each rack launches exactly the keys the rack's own profile launches
// (TestLaunchableInferenceX pins those counts), so scripts/fleet.sh runs the
// rack's whole fleet.
func TestLaunchableEmulatedFleet(t *testing.T) {
	ixData, ix, srt := ixCheckouts(t)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	for _, want := range launchableInferenceX {
		t.Run(want.profile, func(t *testing.T) {
			emulated, _ := emulateRack(t, want.profile)
			launchable := map[string][]string{}
			for _, profile := range []string{filepath.Join(repo, "configs", "clusters", want.profile+".yaml"), emulated} {
				res := starterIn(t, repo, "plan", "--config-files", filepath.Join(ixData, "nvidia-master.yaml"), "--runner-config", filepath.Join(ixData, "runners.yaml"),
					"--config-keys", "*", "--inferencex", ix, "--srt-slurm", srt, "--cluster", profile, "--launchable", "--json")
				require.Equal(t, 0, res.code, res.stderr)
				var rep launchcheck.Report
				require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
				for _, k := range rep.Keys {
					if k.Launchable {
						launchable[profile] = append(launchable[profile], k.Key)
					}
				}
			}
			rackKeys := launchable[filepath.Join(repo, "configs", "clusters", want.profile+".yaml")]
			assert.Len(t, rackKeys, want.launchable)
			assert.Equal(t, rackKeys, launchable[emulated], "the emulation launches what the rack launches")
			t.Logf("%s: %d keys launch on the emulated stand-in: %s", want.profile, len(launchable[emulated]), strings.Join(launchable[emulated], " "))
		})
	}
}
