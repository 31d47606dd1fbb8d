package checklist

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

var today = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// fixture checks testdata/<dir> with the shared runners, golden table and
// MODELS.md; the case directory is its own recipes root.
func fixture(dir string) Options {
	d := filepath.Join("testdata", dir)
	return Options{
		ConfigFiles:  []string{filepath.Join(d, "master.yaml")},
		RunnerConfig: "testdata/shared/runners.yaml",
		ConfigKeys:   []string{"orca2*"},
		RecipesRoot:  d,
		GoldenAL:     "testdata/shared/golden",
		Thinking:     true,
		Models:       "testdata/shared/models.md",
		Today:        today,
	}
}

func ruleSet(r *Report) []string {
	var ids []string
	for _, f := range r.Findings {
		if !slices.Contains(ids, f.Rule) {
			ids = append(ids, f.Rule)
		}
	}
	slices.Sort(ids)
	return ids
}

func TestCheckFixtures(t *testing.T) {
	cases := []struct {
		dir  string
		opts func(*Options)
		want []string // the exact set of rule ids found
		// got/want fragments of the first finding: the one-line message
		// must name the offending and the expected value.
		got, expect string
	}{
		{dir: "ok"},
		{dir: "upstream-image", want: []string{RuleUpstreamImage}, got: "ghcr.io#acme/sglang-fork", expect: "lmsysorg/sglang"},
		{dir: "engine-first", want: []string{RuleEngineFirst}, got: "dynamo-trt for orca2 on gb200", expect: "vllm or sglang entry"},
		{dir: "deprecated", want: []string{RuleDeprecated}, got: "orca2 Single-turn 1k1k", expect: "since 2026-05-01"},
		{dir: "arch-override", want: []string{RuleArchOverride}, got: `num_hidden_layers": 30`, expect: "native architecture"},
		{dir: "spec-chat-endpoint", want: []string{RuleSpecChat}, got: "use_chat_template: false", expect: "use_chat_template: true"},
		{dir: "engine-patch", want: []string{RuleEnginePatch}, got: "git apply /configs/scheduler-fix.patch", expect: "as shipped"},
		{dir: "agentic-golden-al", want: []string{RuleAgenticGoldenAL}, got: "SGLANG_SIMULATE_ACC_LEN=2.6", expect: "SGLANG_SIMULATE_ACC_LEN=2.4 "},
		{dir: "agentic-golden-al-missing", want: []string{RuleAgenticGoldenAL}, got: "real (unsimulated) acceptance", expect: "SGLANG_SIMULATE_ACC_LEN=2.4"},
		// A sweepflow sweep injects the golden AL from its table: nothing to add.
		{dir: "agentic-golden-al-missing", opts: func(o *Options) { o.Inject = "testdata/shared/golden/orca2_mtp.yaml" }},
		// ...but an injected table that drifted from the reference curve fails.
		{dir: "agentic-golden-al-missing", opts: func(o *Options) { o.Inject = "testdata/shared/golden-stale.yaml" },
			want: []string{RuleAgenticGoldenAL}, got: "injects SGLANG_SIMULATE_ACC_LEN=2.55", expect: "SGLANG_SIMULATE_ACC_LEN=2.4 "},
		// Thinking off has its own golden value (2 tokens -> 2.60).
		{dir: "ok", opts: func(o *Options) { o.Thinking = false },
			want: []string{RuleAgenticGoldenAL}, got: "SGLANG_SIMULATE_ACC_LEN=2.40", expect: "SGLANG_SIMULATE_ACC_LEN=2.6 "},
		{dir: "non-agentic-sim-al", want: []string{RuleNonAgenticSimAL}, got: "SYNTHETIC_ACCEPTANCE_LENGTH=2.40", expect: "real acceptance"},
		{dir: "recipe-row", want: []string{RuleRecipeRow}, got: "", expect: "recipe "},
		{dir: "append-only", opts: func(o *Options) { o.Base = "testdata/append-only/base" },
			want: []string{RuleAppendOnly}, got: "conc 2", expect: "every base point kept unchanged"},
		// Without a base the append-only fixture is a valid sweep.
		{dir: "append-only"},
	}
	for _, tc := range cases {
		name := tc.dir
		if tc.opts != nil {
			name += "/variant"
		}
		t.Run(name, func(t *testing.T) {
			o := fixture(tc.dir)
			if tc.opts != nil {
				tc.opts(&o)
			}
			r, err := Check(o)
			require.NoError(t, err)
			var lines []string
			for _, f := range r.Findings {
				lines = append(lines, f.String())
			}
			assert.Equal(t, tc.want, ruleSet(r), "findings:\n%s", strings.Join(lines, "\n"))
			if len(tc.want) == 0 {
				return
			}
			require.NotEmpty(t, r.Findings)
			f := r.Findings[0]
			assert.Contains(t, f.Got, tc.got)
			assert.Contains(t, f.Want+" ", tc.expect)
			assert.NotEmpty(t, f.Pos.File)
			assert.Positive(t, f.Pos.Line, "finding %s has no line", f)
			assert.Equal(t, 1, strings.Count(f.String(), "\n")+1, "one line per finding")
			assert.Equal(t, r.Failures(), len(r.Findings))
		})
	}
}

func TestCheckRecipeRowDetails(t *testing.T) {
	r, err := Check(fixture("recipe-row"))
	require.NoError(t, err)
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Field+": "+f.Got+" -> "+f.Want)
	}
	joined := strings.Join(got, "\n")
	assert.Contains(t, joined, "conc-list: conc 8 -> conc 4 at the top of the row")
	assert.Contains(t, joined, "prefill.dp-attn: false -> true (enable-dp-attention) (recipe testdata/recipe-row/recipes/agg-tp8-c4-mtp.yaml:")
}

func TestCheckAllow(t *testing.T) {
	r, err := Check(fixture("upstream-image"))
	require.NoError(t, err)
	require.Equal(t, 1, r.Failures())
	r.Allow([]string{RuleUpstreamImage})
	assert.Zero(t, r.Failures())
	assert.True(t, r.Findings[0].Allowed)
	assert.Contains(t, r.Findings[0].String(), "(allowed)")
}

func TestCheckSkipsWithoutInputs(t *testing.T) {
	o := fixture("deprecated")
	o.Models, o.RecipesRoot, o.GoldenAL = "", "", ""
	r, err := Check(o)
	require.NoError(t, err)
	assert.Empty(t, r.Findings)
	assert.NotContains(t, r.Rules, RuleDeprecated)
	notes := strings.Join(r.Notes, "\n")
	assert.Contains(t, notes, "no MODELS.md given")
	assert.Contains(t, notes, "no recipes root")
}

func TestCheckMissingRecipe(t *testing.T) {
	o := fixture("ok")
	o.RecipesRoot = "testdata/shared"
	r, err := Check(o)
	require.NoError(t, err)
	assert.Equal(t, []string{RuleRecipeRow}, ruleSet(r))
	assert.Contains(t, r.Findings[0].Got, "CONFIG_FILE=recipes/agg-tp8-c4-mtp.yaml")
}

func TestParseModels(t *testing.T) {
	m, err := LoadModels("testdata/shared/models.md")
	require.NoError(t, err)
	require.Len(t, m.Scenarios, 3)
	assert.True(t, m.Scenarios[2].Deprecated)
	assert.Equal(t, "2026-05-01", m.Scenarios[2].Since.Format(time.DateOnly))
	assert.Equal(t, 1024, m.Scenarios[2].ISL)
	require.Len(t, m.Models, 3)
	assert.Equal(t, []string{"orca2"}, m.Models[0].Prefixes)
	require.Len(t, m.Models[0].Deprec, 2)
	assert.Equal(t, "bf16", m.Models[0].Deprec[1].Precision)
	assert.True(t, m.Models[1].Retired)
	assert.Equal(t, "2026-03-01", m.Models[1].Since.Format(time.DateOnly))
	squid := m.Models[2]
	require.Len(t, squid.Deprec, 2)
	assert.True(t, squid.Deprec[0].NonSpecArm)
	assert.Equal(t, "Agentic coding", squid.Deprec[0].Scenario)
	// A deprecation scheduled after the review date does not apply yet.
	assert.False(t, effective(squid.Deprec[1].Since, today))
	assert.True(t, effective(squid.Deprec[1].Since, squid.Deprec[1].Since))

	_, err = ParseModels("x.md", "# nothing here\n")
	assert.ErrorContains(t, err, "no Scenarios table")
}

func TestImageRepoAndSKU(t *testing.T) {
	for in, want := range map[string]string{
		"lmsysorg/sglang:v0.5.5":                       "lmsysorg/sglang",
		"docker.io/vllm/vllm-openai:v0.20.1":           "vllm/vllm-openai",
		"nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2": "nvcr.io/nvidia/tensorrt-llm/release",
		"lmsysorg/sglang@sha256:abcd":                  "lmsysorg/sglang",
		"localhost:5000/lmsysorg/sglang:tag":           "localhost:5000/lmsysorg/sglang",
	} {
		assert.Equal(t, want, imageRepo(in), in)
	}
	for in, want := range map[string]string{"cluster:gb200-nv": "gb200", "b200-dgxc": "b200", "mi355x": "mi355x", "mi455x-ualoe72": "", "h100-cw": "h100"} {
		assert.Equal(t, want, sku(in), in)
	}
}

// TestCheckRecipeRowGPUs: a row whose tp gives a worker other GPUs than its
// recipe plans and launches the recipe's; check is where the disagreement
// shows, with the row's file and line, the recipe's, and both counts.
func TestCheckRecipeRowGPUs(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "recipe-row")
	data, err := os.ReadFile(filepath.Join(src, "master.yaml"))
	require.NoError(t, err)
	master := strings.Replace(string(data), "          tp: 8\n          ep: 1\n          dp-attn: false\n          additional-settings:", "          tp: 4\n          ep: 1\n          dp-attn: false\n          additional-settings:", 1)
	require.NotEqual(t, string(data), master)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "master.yaml"), []byte(master), 0o644))
	abs, err := filepath.Abs(filepath.Join(src, "recipes"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, "recipes")))
	o := fixture("recipe-row")
	o.ConfigFiles, o.RecipesRoot = []string{filepath.Join(dir, "master.yaml")}, dir
	r, err := Check(o)
	require.NoError(t, err)
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.String())
	}
	assert.Contains(t, got, "recipe-row "+filepath.Join(dir, "master.yaml")+":19: orca2-fp8-gb200-dynamo-sglang-agentic-mtp.scenarios.agentic-coding[0].search-space[0].prefill.tp: "+
		"got 4 GPUs per worker; want 8 GPUs per worker (recipe "+filepath.Join(dir, "recipes", "agg-tp8-c4-mtp.yaml")+":9)")
}

// TestCheckReferenceInferenceX runs the checks over InferenceX's own master
// config, golden AL tables and MODELS.md. The seed keys are checked when the
// checkout has them; otherwise the GB200/GB300 Dynamo+SGLang agentic keys
// whose srt-slurm recipes the checkout holds. Recipes sit flat in recipes/;
// they are linked into a temporary root at the paths CONFIG_FILE names.
func TestCheckReferenceInferenceX(t *testing.T) {
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "golden_al_distribution", "recipes")
	masterFile := filepath.Join(ix, "nvidia-master.yaml")
	master, err := ixconfig.LoadMaster(masterFile)
	require.NoError(t, err)

	keys := []string{"dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg", "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg"}
	if master.Entry(keys[0]) == nil {
		t.Logf("seed keys are not in this InferenceX checkout; checking the agentic keys whose recipes it holds")
		keys = []string{"dsv4-fp4-gb300-dynamo-sglang-agentic-agg", "glm5.2-fp4-gb200-dynamo-sglang-agentic-mtp",
			"glm5.2-fp4-gb200-dynamo-sglang-agentic-mtp-agg"}
	}
	root := t.TempDir()
	data, err := os.ReadFile(masterFile)
	require.NoError(t, err)
	held := map[string]bool{} // CONFIG_FILE refs whose recipe is in the checkout
	for _, m := range regexp.MustCompile(`CONFIG_FILE=(recipes/[^\s"':]+)`).FindAllStringSubmatch(string(data), -1) {
		src := filepath.Join(ix, "recipes", filepath.Base(m[1]))
		dst := filepath.Join(root, filepath.FromSlash(m[1]))
		if _, err := os.Stat(src); err != nil || held[m[1]] {
			continue
		}
		held[m[1]] = true
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.Symlink(src, dst))
	}
	require.NotEmpty(t, held, "no recipe of the checkout is named by nvidia-master.yaml")

	models := filepath.Join(ix, "MODELS.md")
	if _, err := os.Stat(models); err != nil {
		models = filepath.Join(ix, "review", "MODELS.md")
	}
	r, err := Check(Options{
		ConfigFiles: []string{masterFile}, RunnerConfig: filepath.Join(ix, "runners.yaml"), ConfigKeys: keys,
		RecipesRoot: root, GoldenAL: filepath.Join(ix, "golden_al_distribution"), Thinking: true,
		Models: models, Today: today,
	})
	require.NoError(t, err)
	for _, f := range r.Findings {
		t.Logf("finding: %s", f)
	}
	for _, n := range r.Notes {
		t.Logf("note: %s", n)
	}
	t.Logf("%d rows, %d recipes (%d held), %d findings", r.Rows, r.Recipes, len(held), len(r.Findings))
	require.Positive(t, r.Rows)
	assert.Contains(t, r.Rules, RuleDeprecated)
	assert.Contains(t, r.Rules, RuleRecipeRow)

	assert.GreaterOrEqual(t, r.GoldenCompared, 3, "the held recipes' SGLANG_SIMULATE_ACC_LEN values were not compared with the golden curves")
	// The recipes InferenceX holds pin SGLANG_SIMULATE_ACC_LEN at the golden
	// value for their decode draft length (dsv4 MTP 3 -> 2.49, glm5.2 MTP
	// 4 -> 3.33 and 2 -> 2.50): a golden-AL finding would be our bug.
	for _, f := range r.Findings {
		switch f.Rule {
		case RuleRecipeRow:
			// Allowed only for rows whose recipe the checkout does not hold.
			if slices.ContainsFunc(keysOfHeld(held), func(ref string) bool { return containsStr(f.Got, ref) }) {
				t.Errorf("recipe-row finding on a held recipe: %s", f)
			}
		default:
			t.Errorf("unexpected finding on InferenceX's merged agentic keys: %s", f)
		}
	}

	// A fixed-seq-len key that simulates acceptance is the rule's own example.
	const fixedKey = "dsv4-fp4-gb200-dynamo-vllm-mtp2"
	if master.Entry(fixedKey) != nil {
		r, err := Check(Options{ConfigFiles: []string{masterFile}, ConfigKeys: []string{fixedKey}, Thinking: true, Today: today})
		require.NoError(t, err)
		assert.Equal(t, []string{RuleNonAgenticSimAL}, ruleSet(r))
		t.Logf("%s: %d %s findings, e.g. %s", fixedKey, len(r.Findings), RuleNonAgenticSimAL, r.Findings[0])
	}
}

func keysOfHeld(held map[string]bool) []string {
	var out []string
	for k := range held {
		out = append(out, k)
	}
	return out
}

func containsStr(s, sub string) bool { return regexp.MustCompile(regexp.QuoteMeta(sub)).MatchString(s) }
