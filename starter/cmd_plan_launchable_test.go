package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
	"github.com/sweepflow/sweepflow/plan/launchcheck"
)

// launchableArgs runs --launchable over testdata/launchable: a good SGLang
// recipe, two that no launcher knows (backend, frontend), a missing recipe file, a
// model alias the profile lacks, and a key on a runner it does not serve.
func launchableArgs(extra ...string) []string {
	return append([]string{"plan", "--config-files", "master.yaml", "--runner-config", "runners.yaml",
		"--recipes-root", ".", "--cluster", "cluster.yaml", "--launchable"}, extra...)
}

func TestLaunchableTable(t *testing.T) {
	dir := filepath.Join("testdata", "launchable")
	res := starterIn(t, dir, launchableArgs("--config-keys", "lx-*")...)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 10, res.stdout)
	assert.Equal(t, []string{
		"launch check on lx-gb200, recipes under .",
		"",
		"CONFIG-KEY  PLANS  RECIPES  RENDERS  REASON",
		"lx-good     yes    1/1      yes",
	}, lines[:4])
	// The engine's own wording may change; ours may not.
	assert.True(t, strings.HasPrefix(lines[4], `lx-refused  yes    3/3      no       recipe recipes/refused.yaml: `), lines[4])
	assert.Contains(t, lines[4], `"mocker"`)
	assert.True(t, strings.HasSuffix(lines[4], " (1 more recipe does not render)"), lines[4])
	assert.Equal(t, []string{
		"lx-missing  no     0/1      -        recipe recipes/missing.yaml not found",
		`lx-alias    yes    1/1      yes      model.path "not-in-profile" is not in cluster profile lx-gb200's models`,
		"",
		"not listed: 1 key on runners lx-gb200 does not serve",
		"1 of 4 keys launchable on lx-gb200",
	}, lines[5:])

	// A key named exactly is listed even when the profile does not serve it.
	res = starterIn(t, dir, launchableArgs("--config-keys", "lx-good", "lx-elsewhere")...)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, "launch check on lx-gb200, recipes under .\n\n"+
		"CONFIG-KEY    PLANS  RECIPES  RENDERS  REASON\n"+
		"lx-good       yes    1/1      yes\n"+
		"lx-elsewhere  no     -        -        runner cluster:gb300-nv is not served by lx-gb200 (it serves cluster:gb200-nv)\n"+
		"\n1 of 2 keys launchable on lx-gb200\n", res.stdout)
}

func TestLaunchableJSON(t *testing.T) {
	dir := filepath.Join("testdata", "launchable")
	res := starterIn(t, dir, launchableArgs("--config-keys", "lx-*", "--json")...)
	require.Equal(t, 0, res.code, res.stderr)
	var rep launchcheck.Report
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	assert.Equal(t, "lx-gb200", rep.Cluster)
	assert.Equal(t, abs, rep.RecipesRoot)
	assert.Equal(t, 4, rep.Listed)
	assert.Equal(t, 1, rep.Launchable)
	assert.Equal(t, []string{"lx-elsewhere"}, rep.NotServed)
	require.Len(t, rep.Keys, 4)
	refused := rep.Keys[1]
	assert.NotEmpty(t, refused.Reason)
	refused.Reason = ""
	assert.Equal(t, []launchcheck.Key{
		{Key: "lx-good", Runner: "cluster:gb200-nv", Served: true, Plans: true, Points: 2, Recipes: 1, Found: 1, Rendered: 1, Renders: true, Launchable: true},
		{Key: "lx-refused", Runner: "cluster:gb200-nv", Served: true, Plans: true, Points: 3, Recipes: 3, Found: 3, Rendered: 1},
		{Key: "lx-missing", Runner: "cluster:gb200-nv", Served: true, Recipes: 1, Missing: []string{"recipes/missing.yaml"},
			Reason: "recipe recipes/missing.yaml not found"},
		{Key: "lx-alias", Runner: "cluster:gb200-nv", Served: true, Plans: true, Points: 1, Recipes: 1, Found: 1, Rendered: 1, Renders: true,
			UnknownModels: []string{"not-in-profile"}, Reason: `model.path "not-in-profile" is not in cluster profile lx-gb200's models`},
	}, append([]launchcheck.Key{rep.Keys[0], refused}, rep.Keys[2:]...))
}

// TestLaunchableBadInput: inputs that would make every line wrong are one
// line on stderr before any key is checked.
func TestLaunchableBadInput(t *testing.T) {
	dir := filepath.Join("testdata", "launchable")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"recipes root missing", []string{"plan", "--config-files", "master.yaml", "--runner-config", "runners.yaml", "--config-keys", "lx-good",
			"--recipes-root", "no-such-dir", "--cluster", "cluster.yaml", "--launchable"}, 1,
			"--recipes-root: recipes root no-such-dir is not a directory on this machine"},
		{"profile's recipes root missing", []string{"plan", "--config-files", "master.yaml", "--runner-config", "runners.yaml", "--config-keys", "lx-good",
			"--cluster", "cluster.yaml", "--launchable"}, 1,
			"cluster.yaml: recipes-root: recipes root"},
		{"no cluster", []string{"plan", "--config-files", "master.yaml", "--runner-config", "runners.yaml", "--config-keys", "lx-good",
			"--recipes-root", ".", "--launchable"}, 2, "--launchable needs a cluster profile"},
		{"unknown key", launchableArgs("--config-keys", "lx-nope"), 1, `config key "lx-nope" not found in master.yaml`},
		{"with ix-json", launchableArgs("--config-keys", "lx-good", "--format", "ix-json"), 2, "--launchable checks whole config keys"},
		{"bad master", []string{"plan", "--config-files", "recipes/good.yaml", "--runner-config", "runners.yaml", "--config-keys", "lx-good",
			"--recipes-root", ".", "--cluster", "cluster.yaml", "--launchable"}, 1, "recipes/good.yaml:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := starterIn(t, dir, tc.args...)
			assert.Equal(t, tc.code, res.code, res.stderr)
			assert.Empty(t, res.stdout)
			assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "exactly one line: %q", res.stderr)
			assert.Contains(t, res.stderr, tc.want)
		})
	}
}

// launchableInferenceX pins what `plan --launchable` launches of
// InferenceX's GB200 and GB300 keys (nvidia-master.yaml of $SWEEPFLOW_INFERENCEX,
// its srt-slurm-recipes laid over srt-slurm v1.0.68's recipes/ as its
// launchers lay them, the shipped profiles), and the reason of each key that
// stays out for an InferenceX data problem. Update the figures here.
var launchableInferenceX = []struct {
	profile            string
	launchable, listed int
	// dataProblems: keys that do not launch, with a part of their reason.
	dataProblems map[string]string
}{
	{"gb200-nvl72", 25, 27, map[string]string{
		"dsv4-fp4-gb200-llmd-vllm":     "a shell launcher, not an srt-slurm recipe",
		"dsr1-fp8-gb200-dynamo-sglang": "override-format recipe named without a variant: srtctl apply would submit all 3",
	}},
	{"gb300-nvl72", 28, 31, map[string]string{
		"dsv4-fp4-gb300-dynamo-vllm-agentic": "is not in InferenceX's tree",
		"dsv4-fp4-gb300-dynamo-trt":          "runs this key (dynamo-trt dsv4) on srt-slurm sa-submission-q2-2026",
		"dsv4-fp4-gb300-dynamo-trt-mtp":      "runs this key (dynamo-trt dsv4) on srt-slurm sa-submission-q2-2026",
	}},
}

// ixCheckouts lays the shared InferenceX and srt-slurm v1.0.68 copies out
// as checkouts are (they are trees, not checkouts) and returns the shared
// InferenceX directory and the two checkouts.
func ixCheckouts(t *testing.T) (ixData, ix, srt string) {
	t.Helper()
	ixData = reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "srt-slurm-recipes")
	srtData := reftest.SrtSlurm(t, "recipes-v1.0.68")
	dir := t.TempDir()
	ix, srt = filepath.Join(dir, "InferenceX"), filepath.Join(dir, "srt-slurm")
	require.NoError(t, os.MkdirAll(filepath.Join(ix, "benchmarks", "multi_node"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(ixData, "srt-slurm-recipes"), filepath.Join(ix, "benchmarks", "multi_node", "srt-slurm-recipes")))
	require.NoError(t, os.MkdirAll(srt, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(srtData, "recipes-v1.0.68"), filepath.Join(srt, "recipes")))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	return ixData, ix, srt
}

// TestLaunchableInferenceX composes the recipes root from InferenceX's tree
// and srt-slurm's, as a user with both checkouts does (--inferencex,
// --srt-slurm), and pins the launchable counts of launchableInferenceX. The
// shared copies are not checkouts: the test lays them out as checkouts are.
func TestLaunchableInferenceX(t *testing.T) {
	ixData, ix, srt := ixCheckouts(t)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	master, err := ixconfig.LoadMaster(filepath.Join(ixData, "nvidia-master.yaml"))
	require.NoError(t, err)

	for _, want := range launchableInferenceX {
		t.Run(want.profile, func(t *testing.T) {
			profile := filepath.Join(repo, "configs", "clusters", want.profile+".yaml")
			c, err := config.LoadCluster(profile)
			require.NoError(t, err)
			served := 0
			for _, e := range master.Entries {
				if e.Multinode && c.ServesRunner(e.Runner) {
					served++
				}
			}
			assert.Equal(t, want.listed, served, "multinode keys on runners %s serves", want.profile)
			args := []string{"plan", "--config-files", filepath.Join(ixData, "nvidia-master.yaml"), "--runner-config", filepath.Join(ixData, "runners.yaml"),
				"--config-keys", "*", "--inferencex", ix, "--srt-slurm", srt, "--cluster", profile, "--launchable"}
			res := starterIn(t, repo, append(args, "--json")...)
			require.Equal(t, 0, res.code, res.stderr)
			var rep launchcheck.Report
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
			require.NotNil(t, rep.Composed, "the root is composed from the checkouts")
			assert.Equal(t, ix, rep.Composed.InferenceX)
			var out []string
			for _, k := range rep.Keys {
				if k.Launchable {
					assert.Empty(t, k.Reason, k.Key)
					continue
				}
				assert.NotEmpty(t, k.Reason, "%s cannot launch but gives no reason", k.Key)
				assert.NotContains(t, k.Reason, "\n", k.Key)
				assert.NotContains(t, k.Reason, rep.RecipesRoot, "%s: the cache directory means nothing to the user", k.Key)
				out = append(out, k.Key+": "+k.Reason)
				if part, ok := want.dataProblems[k.Key]; ok {
					assert.Contains(t, k.Reason, part, k.Key)
				}
			}
			for key := range want.dataProblems {
				assert.True(t, slices.ContainsFunc(rep.Keys, func(k launchcheck.Key) bool { return k.Key == key && !k.Launchable }), "%s launches", key)
			}
			t.Logf("%d of %d keys launchable on %s; the others:\n%s", rep.Launchable, rep.Listed, want.profile, strings.Join(out, "\n"))
			assert.Equal(t, want.listed, rep.Listed)
			assert.Equal(t, want.launchable, rep.Launchable, "launchable keys (update launchableInferenceX when this moves up)")

			// The table says the same and ends with the count.
			res = starterIn(t, repo, args...)
			require.Equal(t, 0, res.code, res.stderr)
			lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
			assert.Equal(t, fmt.Sprintf("%d of %d keys launchable on %s", want.launchable, want.listed, want.profile), lines[len(lines)-1])
		})
	}
}
