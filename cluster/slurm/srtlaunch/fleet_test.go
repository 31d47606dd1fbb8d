package srtlaunch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// envSrtSlurmSrc names an srt-slurm checkout (v1.0.68) whose recipes/ tree
// TestSrtSlurmGB200RecipesRender renders (not reference data CI has).
const envSrtSlurmSrc = "SWEEPFLOW_SRT_SLURM_SRC"

var (
	modelDirRe = regexp.MustCompile(`\{MODEL_DIR:[^}]*\}`)
	// srt-slurm draws TRTLLM_EPLB_SHM_NAME from uuid4 per worker; ours is a
	// deterministic value of the same shape (eplbShmName), so both sides
	// are normalised.
	eplbRe = regexp.MustCompile(`moe_shared_[0-9a-f]{32}`)
)

func normRef(v any) any {
	switch x := v.(type) {
	case string:
		return eplbRe.ReplaceAllString(modelDirRe.ReplaceAllString(x, "{MODEL_DIR}"), "moe_shared_X")
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normRef(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[normRef(k).(string)] = normRef(e)
		}
		return out
	}
	return v
}

// fleetRows is compare.py's view of a process list: the log file name and
// the compared fields, normalised, empty values as nil. env_to_set and the
// mounts keep their order (compared as ordered pairs).
func fleetRows(t *testing.T, raw []json.RawMessage) []map[string]any {
	var out []map[string]any
	for _, r := range raw {
		var p map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r, &p))
		var output string
		_ = json.Unmarshal(p["output"], &output)
		row := map[string]any{"name": filepath.Base(output)}
		for _, f := range []string{"nodelist", "command", "env_to_set", "container_mounts", "srun_options", "mpi"} {
			var v any
			if len(p[f]) > 0 {
				require.NoError(t, json.Unmarshal(p[f], &v))
			}
			if f == "env_to_set" || f == "container_mounts" || f == "srun_options" {
				v = orderedPairs(t, p[f])
			}
			v = normRef(v)
			switch x := v.(type) {
			case []any:
				if len(x) == 0 {
					v = nil
				}
			case map[string]any:
				if len(x) == 0 {
					v = nil
				}
			}
			row[f] = v
		}
		out = append(out, row)
	}
	return out
}

// orderedPairs reads a JSON object as [k, v, k, v, ...] so that order counts.
func orderedPairs(t *testing.T, raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	c := canon(t, raw)
	var keys []string
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	dec := json.NewDecoder(strings.NewReader(c))
	_, _ = dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip any
		_ = dec.Decode(&skip)
	}
	out := []any{}
	for _, k := range keys {
		out = append(out, k, m[k])
	}
	return out
}

// fleetCompare is compare.py: the first difference, or "".
func fleetCompare(t *testing.T, want, got []byte) string {
	type doc struct {
		Processes []json.RawMessage `json:"processes"`
		Files     map[string]string `json:"files"`
	}
	var w, g doc
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	wr, gr := fleetRows(t, w.Processes), fleetRows(t, g.Processes)
	if len(wr) != len(gr) {
		var names, ours []string
		for _, r := range wr {
			names = append(names, r["name"].(string))
		}
		for _, r := range gr {
			ours = append(ours, r["name"].(string))
		}
		return fmt.Sprintf("%d processes, srt-slurm launches %d: %v; ours %v", len(gr), len(wr), names, ours)
	}
	for i := range wr {
		for _, k := range []string{"name", "nodelist", "command", "env_to_set", "container_mounts", "srun_options", "mpi"} {
			if !reflect.DeepEqual(wr[i][k], gr[i][k]) {
				return fmt.Sprintf("%s: %s: srt-slurm %.300v vs ours %.300v", wr[i]["name"], k, wr[i][k], gr[i][k])
			}
		}
	}
	for name, body := range w.Files {
		ours, ok := g.Files[name]
		if !ok {
			return "file " + name + ": srt-slurm writes it, ours does not"
		}
		a := strings.Split(strings.TrimSpace(normRef(body).(string)), "\n")
		b := strings.Split(strings.TrimSpace(normRef(ours).(string)), "\n")
		for i := 0; i < max(len(a), len(b)); i++ {
			if i >= len(a) || i >= len(b) || a[i] != b[i] {
				at := func(xs []string) string {
					if i < len(xs) {
						return xs[i]
					}
					return "<end>"
				}
				return fmt.Sprintf("file %s line %d: srt-slurm %q vs ours %q", name, i+1, at(a), at(b))
			}
		}
	}
	return ""
}

// placeholderModelName names {MODEL_DIR:...} for a recipe as the fleet
// references do: the directory's base name, or srt-slurm's alias as is.
func placeholderModelName(r *config.Recipe) string {
	return filepath.Base(strings.TrimPrefix(r.Model.Path, "hf:"))
}

// TestFleetReferences renders srt-slurm's own GB200 recipes
// (SWEEPFLOW_SRT_SLURM/rendered-fleet) and compares processes and files the
// way compare.py does (bash_preamble is not compared; {MODEL_DIR:x} equal
// whatever x; moe_shared_<hex> normalised). Each recipe's schema-2
// conversion (<name>.recipe.v2.yaml, srt-slurm 2.x's `srtctl migrate`) must
// render what its schema-1 original records.
func TestFleetReferences(t *testing.T) {
	compareRenderedDir(t, "rendered-fleet", placeholderModelName)
}

// ixModelDirs are the model directories rendered-ix's README maps
// InferenceX's aliases to (as InferenceX's launchers map them); any other
// alias names a directory of its own base name.
var ixModelDirs = map[string]string{
	"deepseek-v4-pro":             "DeepSeek-V4-Pro",
	"deepseek-ai/DeepSeek-V4-Pro": "DeepSeek-V4-Pro",
	"glm-5.2-fp4":                 "GLM-5.2-NVFP4",
}

// TestInferenceXReferences renders InferenceX's GB200 and GB300 recipes as
// srt-slurm v1.0.68 rendered them (SWEEPFLOW_SRT_SLURM/rendered-ix), each on
// nodes named by the recipe's platform, and compares them as compare.py does.
func TestInferenceXReferences(t *testing.T) {
	compareRenderedDir(t, "rendered-ix", func(r *config.Recipe) string {
		if d, ok := ixModelDirs[r.Model.Path]; ok {
			return d
		}
		return placeholderModelName(r)
	})
}

// compareRenderedDir renders every <case>.recipe.yaml of the reference
// directory sub, and its schema-2 conversion <case>.recipe.v2.yaml where
// there is one, on the smallest allocation it needs and compares it with
// <case>.json; a refusal counts apart from a wrong render, both fail.
func compareRenderedDir(t *testing.T, sub string, modelName func(*config.Recipe) string) {
	dir := filepath.Join(reftest.SrtSlurm(t, sub), sub)
	cases, err := filepath.Glob(filepath.Join(dir, "*.recipe.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	ok, refused, v2s := 0, 0, 0
	for _, f := range cases {
		name := strings.TrimSuffix(filepath.Base(f), ".recipe.yaml")
		files := []string{filepath.Base(f)}
		if _, err := os.Stat(filepath.Join(dir, name+".recipe.v2.yaml")); err == nil {
			files = append(files, name+".recipe.v2.yaml")
			v2s++
		}
		for _, file := range files {
			t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(dir, name+".json"))
				require.NoError(t, err)
				r, err := config.LoadRecipe(dir, file)
				require.NoError(t, err)
				require.Equal(t, strings.HasSuffix(file, ".v2.yaml"), r.Schema == config.SchemaV2, "the file's spelling")
				fp, err := r.Footprint(0)
				require.NoError(t, err)
				got, err := Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(modelName(r)), JobID: "4242"})
				if err != nil && strings.Contains(err.Error(), "not supported by the engine launcher") {
					refused++ // srt-slurm launches it, so a refusal is a gap, counted apart from wrong renders
				}
				require.NoError(t, err)
				b, err := json.Marshal(got)
				require.NoError(t, err)
				if d := fleetCompare(t, want, b); d != "" {
					t.Fatal(d)
				}
				ok++
			})
		}
	}
	t.Logf("%s: %d of %d renders compare ok (%d schema-1 recipes, %d schema-2 conversions), %d refused as not supported",
		sub, ok, len(cases)+v2s, len(cases), v2s, refused)
}

// TestSrtSlurmGB200RecipesRender renders every GB200 recipe of the srt-slurm
// checkout in SWEEPFLOW_SRT_SLURM_SRC (recipes/ with gb200 in the path) on
// the allocation it needs: each renders, or is refused with a one-line
// "not supported" naming the feature; anything else fails.
func TestSrtSlurmGB200RecipesRender(t *testing.T) {
	src := os.Getenv(envSrtSlurmSrc)
	if src == "" {
		t.Skipf("set %s to an srt-slurm checkout with recipes/", envSrtSlurmSrc)
	}
	root := filepath.Join(src, "recipes")
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(strings.ToLower(p), "gb200") && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	// An override-format recipe is one recipe per variant (what srtctl
	// apply submits; its base alone when it has none).
	var refs []string
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		variants, err := config.RecipeVariants(rel, data)
		switch {
		case err != nil || variants == nil:
			refs = append(refs, rel) // not an override file (or a broken one: reported below)
		case len(variants) == 0:
			refs = append(refs, rel+":base")
		}
		for _, v := range variants {
			refs = append(refs, rel+":"+v)
		}
	}
	ok := 0
	refused := map[string]int{}
	for _, rel := range refs {
		r, err := config.LoadRecipe(root, rel)
		if err == nil {
			var fp config.Footprint
			if fp, err = r.Footprint(0); err == nil {
				_, err = Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(placeholderModelName(r)), JobID: "4242"})
			}
		}
		switch {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "not supported by the engine launcher"):
			_, why, _ := strings.Cut(err.Error(), ": ")
			refused[why]++
		default:
			t.Errorf("%s: %v", rel, err)
		}
	}
	for why, n := range refused {
		t.Logf("refused %d: %s", n, why)
	}
	t.Logf("%d of %d srt-slurm GB200 recipes render (%d files, override variants expanded)", ok, len(refs), len(files))
}
