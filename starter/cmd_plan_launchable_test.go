package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// TestLaunchableReference runs --launchable over InferenceX's
// nvidia-master.yaml with the GB200 profile. srt-slurm's recipe tree is not
// part of the reference data, so the recipes root is a partial one: the
// srt-slurm recipes that rendered-fleet holds, put at the CONFIG_FILE paths
// they came from. Every GB200 key must get exactly one line, each recipe
// count must match the master config, and every key that cannot launch
// must say why.
func TestLaunchableReference(t *testing.T) {
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml")
	fleet := filepath.Join(reftest.SrtSlurm(t, "rendered-fleet"), "rendered-fleet")
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	profile, err := config.LoadCluster(filepath.Join(repo, "configs", "clusters", "gb200-nvl72.yaml"))
	require.NoError(t, err)
	master, err := ixconfig.LoadMaster(filepath.Join(ix, "nvidia-master.yaml"))
	require.NoError(t, err)

	// rendered-fleet names a recipe by its srt-slurm path below recipes/,
	// "/" -> "_": recipes/trtllm/gb200-fp4/x.yaml is trtllm_gb200-fp4_x.recipe.yaml.
	root := t.TempDir()
	refRe := regexp.MustCompile(`^CONFIG_FILE=(.+)$`)
	refsOf := func(e *ixconfig.Entry) []string {
		var refs []string
		seen := map[string]bool{}
		var search []*ixconfig.SearchEntry
		for _, f := range e.Fixed {
			search = append(search, f.SearchSpace...)
		}
		for _, a := range e.Agentic {
			search = append(search, a.SearchSpace...)
		}
		for _, s := range search {
			for _, w := range []*ixconfig.Worker{s.Prefill, s.Decode} {
				if w == nil {
					continue
				}
				for _, set := range w.AdditionalSettings {
					if m := refRe.FindStringSubmatch(strings.TrimSpace(set)); m != nil && !seen[m[1]] {
						seen[m[1]] = true
						refs = append(refs, m[1])
					}
				}
			}
		}
		return refs
	}
	type want struct{ recipes, found int }
	wants := map[string]want{}
	placed := 0
	for _, e := range master.Entries {
		if !profile.ServesRunner(e.Runner) {
			continue
		}
		w := want{}
		for _, ref := range refsOf(e) {
			w.recipes++
			file, _ := config.SplitRecipeRef(ref)
			flat := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(file, "recipes/"), ".yaml"), "/", "_")
			data, err := os.ReadFile(filepath.Join(fleet, flat+".recipe.yaml"))
			if err != nil {
				continue
			}
			dst := filepath.Join(root, filepath.FromSlash(file))
			require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
			require.NoError(t, os.WriteFile(dst, data, 0o644))
			w.found++
			placed++
		}
		wants[e.Key] = w
	}
	require.NotEmpty(t, wants, "no config key in nvidia-master.yaml runs on a runner gb200-nvl72 serves")
	require.Positive(t, placed, "no rendered-fleet recipe matches a GB200 CONFIG_FILE")

	args := []string{"plan", "--config-files", filepath.Join(ix, "nvidia-master.yaml"), "--runner-config", filepath.Join(ix, "runners.yaml"),
		"--config-keys", "*", "--recipes-root", root, "--cluster", filepath.Join(repo, "configs", "clusters", "gb200-nvl72.yaml"), "--launchable"}
	res := starterIn(t, repo, append(args, "--json")...)
	require.Equal(t, 0, res.code, res.stderr)
	var rep launchcheck.Report
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	assert.Equal(t, len(wants), rep.Listed)
	assert.Equal(t, len(master.Entries)-len(wants), len(rep.NotServed))
	launchable := 0
	for _, k := range rep.Keys {
		w, ok := wants[k.Key]
		if !assert.True(t, ok, "%s is listed but its runner %s is not served", k.Key, k.Runner) {
			continue
		}
		delete(wants, k.Key)
		assert.Equal(t, w.recipes, k.Recipes, "%s: recipes", k.Key)
		assert.Equal(t, w.found, k.Found, "%s: recipes found", k.Key)
		assert.Equal(t, k.Plans && k.Renders && k.Found == k.Recipes && len(k.UnknownModels) == 0, k.Launchable, k.Key)
		if k.Launchable {
			launchable++
			assert.Empty(t, k.Reason, k.Key)
			continue
		}
		assert.NotEmpty(t, k.Reason, "%s cannot launch but gives no reason", k.Key)
		assert.NotContains(t, k.Reason, "\n")
		if k.Found < k.Recipes {
			assert.Regexp(t, `^recipe \S+ not found`, k.Reason, k.Key)
		}
	}
	assert.Empty(t, wants, "GB200 keys without a line")
	assert.Equal(t, launchable, rep.Launchable)
	t.Logf("%d GB200 keys, %d rendered-fleet recipes placed, %d keys launchable", rep.Listed, placed, rep.Launchable)

	// The table says the same, one line per key, and ends with the count.
	res = starterIn(t, repo, args...)
	require.Equal(t, 0, res.code, res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	for _, k := range rep.Keys {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, k.Key+" ") {
				n++
				assert.True(t, strings.HasSuffix(l, k.Reason), "%q does not end with the reason %q", l, k.Reason)
			}
		}
		assert.Equal(t, 1, n, "%s: one line", k.Key)
	}
	assert.Equal(t, fmt.Sprintf("%d of %d keys launchable on gb200-nvl72", rep.Launchable, rep.Listed), lines[len(lines)-1])
}
