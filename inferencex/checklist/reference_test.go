package checklist

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

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
