package srtlaunch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// referenceAL is the golden AL the perf references were rendered with.
const referenceAL = 3.77

// TestReferenceRenders renders every recipe that srt-slurm's orchestrator
// rendered (SWEEPFLOW_SRT_SLURM/rendered, eval; rendered-perf, after the
// golden-AL rewrite) and compares them field by field. bash_preamble is
// srt-slurm's own script text, which we do not reproduce: it is swapped into
// our `bash -c` payload so everything around it is still compared.
func TestReferenceRenders(t *testing.T) {
	dir := reftest.SrtSlurm(t, "rendered", "rendered-perf")
	recipes := recipeIndex(t)
	n := 0
	for _, sub := range []string{"rendered", "rendered-perf"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "no reference renders in %s", sub)
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			n++
			t.Run(sub+"/"+name, func(t *testing.T) {
				recipe, ok := recipes[name]
				require.True(t, ok, "no recipe %s.yaml under configs/recipes", name)
				opt := Options{Paths: PlaceholderPaths(modelName(t, recipe)), JobID: "4242"}
				if sub == "rendered-perf" {
					opt.SyntheticAL = referenceAL
				}
				fp, err := recipe.Footprint(0)
				require.NoError(t, err)
				got, err := Render(recipe, PlaceholderAllocation(recipe, fp.Nodes), opt)
				require.NoError(t, err)
				compareReference(t, sub+"/"+name+".json", f, got.Processes)
			})
		}
	}
	t.Logf("compared %d reference renders", n)
}

// TestSchema2SeedReferences renders the nine recipes of the seed and
// backends sweeps as srt-slurm 2.x's migration converted them
// (SWEEPFLOW_SRT_SLURM/schema2-seed/*.recipe.v2.yaml): each launches
// exactly what its schema-1 original launches, in eval and in perf mode
// (every process, argv and file), and the six seed recipes what
// srt-slurm's renders record (rendered/, rendered-perf/).
func TestSchema2SeedReferences(t *testing.T) {
	dir := reftest.SrtSlurm(t, "schema2-seed", "rendered", "rendered-perf")
	v2s, err := filepath.Glob(filepath.Join(dir, "schema2-seed", "*.recipe.v2.yaml"))
	require.NoError(t, err)
	require.Len(t, v2s, 9, "the seed's six recipes and the backends sweep's three")
	withRefs := 0
	for _, f := range v2s {
		name := strings.TrimSuffix(filepath.Base(f), ".recipe.v2.yaml")
		t.Run(name, func(t *testing.T) {
			v1, err := config.LoadRecipe(filepath.Dir(f), name+".recipe.yaml")
			require.NoError(t, err)
			v2, err := config.LoadRecipe(filepath.Dir(f), filepath.Base(f))
			require.NoError(t, err)
			require.Equal(t, config.SchemaV2, v2.Schema)
			fp, err := v2.Footprint(0)
			require.NoError(t, err)
			for _, al := range []float64{0, referenceAL} {
				if al > 0 && v2.Engine.Type == "trtllm" {
					continue // no draft model: perf renders as eval
				}
				opt := Options{Paths: PlaceholderPaths(modelName(t, v2)), JobID: "4242", SyntheticAL: al}
				a, err := Render(v1, PlaceholderAllocation(v1, fp.Nodes), opt)
				require.NoError(t, err)
				b, err := Render(v2, PlaceholderAllocation(v2, fp.Nodes), opt)
				require.NoError(t, err)
				ja, err := json.Marshal(a)
				require.NoError(t, err)
				jb, err := json.Marshal(b)
				require.NoError(t, err)
				firstDiff(t, fmt.Sprintf("%s (synthetic AL %g)", name, opt.SyntheticAL), "render of the schema-2 conversion vs its original", string(ja), string(jb))
				sub := "rendered"
				if al > 0 {
					sub = "rendered-perf"
				}
				if ref := filepath.Join(dir, sub, name+".json"); fileExists(ref) {
					compareReference(t, sub+"/"+name+".json (schema 2)", ref, b.Processes)
					withRefs++
				}
			}
		})
	}
	require.Equal(t, 12, withRefs, "the six seed recipes' eval and perf renders")
}

// TestInferenceXSchema2ExamplesRender renders the schema-2 recipes
// InferenceX committed (SWEEPFLOW_INFERENCEX/schema2-examples), every variant
// of its override file included: each renders on the allocation it needs,
// or is refused with one line that names what is not rendered. The two
// DeepSeek-V4-Pro-0813 AgentX recipes render their topologies.
func TestInferenceXSchema2ExamplesRender(t *testing.T) {
	dir := filepath.Join(reftest.InferenceX(t, "schema2-examples"), "schema2-examples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 4)
	rendered := map[string]*Rendered{}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		sels, err := config.RecipeVariants(f, data)
		require.NoError(t, err)
		if sels == nil {
			sels = []string{""}
		}
		for _, sel := range sels {
			ref := filepath.Base(f)
			if sel != "" {
				ref += ":" + sel
			}
			r, err := config.LoadRecipe(dir, ref)
			require.NoError(t, err, ref)
			fp, err := r.Footprint(0)
			require.NoError(t, err)
			got, err := Render(r, PlaceholderAllocation(r, fp.Nodes), Options{Paths: PlaceholderPaths(placeholderModelName(r)), JobID: "4242"})
			if err != nil {
				assert.Contains(t, err.Error(), "not supported by the engine launcher yet", "%s:%s", filepath.Base(f), sel)
				assert.NotContains(t, err.Error(), "\n")
				t.Logf("%s:%s refused: %v", filepath.Base(f), sel, err)
				continue
			}
			rendered[r.Name] = got
			n++
		}
	}
	t.Logf("%d of 14 recipes and variants render", n)
	agg, dis := rendered["agg-gb200-tp8-c1-mtp-hicache"], rendered["disagg-gb200-1p1d-dep8-dep16-c64-mtp-kvoffload"]
	require.NotNil(t, agg)
	require.NotNil(t, dis)
	var aggOut, disOut []string
	for _, p := range agg.Processes {
		aggOut = append(aggOut, filepath.Base(p.Output))
	}
	for _, p := range dis.Processes {
		disOut = append(disOut, filepath.Base(p.Output))
	}
	assert.Equal(t, []string{"infra.out", "gb200-01_agg_w0.out", "gb200-02_agg_w0.out", "gb200-01_frontend_0.out", "benchmark.out"}, aggOut,
		"TP8 over two nodes, etcd/NATS and the one frontend on the head")
	assert.Equal(t, []string{"infra.out", "gb200-02_prefill_w0.out", "gb200-03_prefill_w0.out", "gb200-04_decode_w0.out", "gb200-05_decode_w0.out",
		"gb200-06_decode_w0.out", "gb200-07_decode_w0.out", "gb200-02_nginx.out", "gb200-03_frontend_0.out", "gb200-04_frontend_1.out",
		"gb200-05_frontend_2.out", "gb200-06_frontend_3.out", "gb200-07_frontend_4.out", "benchmark.out"}, disOut,
		"etcd/NATS on a node of their own, DEP8 prefill on two nodes, DEP16 decode on four, nginx before five frontends")
	assert.Equal(t, []string{"python3", "/tmp/setup_head.py", "--name", "disagg-gb200-1p1d-dep8-dep16-c64-mtp-kvoffload", "--log-dir", "{LOG_DIR}",
		"--nats-max-payload-mb", "32"}, dis.Processes[0].Command)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// recipeIndex maps recipe base names to the repo's recipes.
func recipeIndex(t *testing.T) map[string]*config.Recipe {
	root := filepath.Join("..", "..", "..", "configs", "recipes")
	out := map[string]*config.Recipe{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".yaml" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		r, err := config.LoadRecipe(root, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = r
		return nil
	})
	require.NoError(t, err)
	return out
}

// modelName resolves the recipe's model alias through the GB200 cluster
// profile, as a real run would, and keeps the directory's base name.
func modelName(t *testing.T, r *config.Recipe) string {
	c, err := config.LoadCluster(filepath.Join("..", "..", "..", "configs", "clusters", "gb200-nvl72.yaml"))
	require.NoError(t, err)
	m, ok := c.Models[r.Model.Path]
	require.True(t, ok, "gb200-nvl72 profile has no model %q", r.Model.Path)
	return filepath.Base(m.Path)
}

func compareReference(t *testing.T, label, file string, got []*Process) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var want []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &want))
	var gotRaw []map[string]json.RawMessage
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &gotRaw))

	for i := 0; i < min(len(want), len(got)); i++ {
		w, g := want[i], gotRaw[i]
		where := fmt.Sprintf("%s process %d (%s)", label, i, canon(t, w["output"]))
		require.Equal(t, sortedKeys(w), sortedKeys(g), "%s: field names differ", where)
		for _, k := range sortedKeys(w) {
			switch k {
			case "bash_preamble":
				continue
			case "argv":
				var wa []string
				require.NoError(t, json.Unmarshal(w[k], &wa))
				ga := got[i].Argv
				require.NotEmpty(t, wa)
				if !got[i].wrap {
					firstDiff(t, where, k, canonJSON(t, wa), canonJSON(t, ga))
					continue
				}
				firstDiff(t, where, "argv (srun options)", canonJSON(t, wa[:len(wa)-1]), canonJSON(t, ga[:len(ga)-1]))
				var pre *string
				require.NoError(t, json.Unmarshal(w["bash_preamble"], &pre))
				firstDiff(t, where, "argv (bash -c payload, their preamble swapped in)", wa[len(wa)-1], got[i].Payload(pre))
			default:
				firstDiff(t, where, k, canon(t, w[k]), canon(t, g[k]))
			}
		}
	}
	if len(want) != len(got) {
		var names []string
		for _, p := range got {
			names = append(names, p.Output)
		}
		t.Fatalf("%s: want %d processes, got %d: %v", label, len(want), len(got), names)
	}
}

// firstDiff fails with the first differing position and its surroundings.
func firstDiff(t *testing.T, where, field, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-60)
	clip := func(s string) string { return s[min(lo, len(s)):min(i+60, len(s))] }
	t.Fatalf("%s: field %s differs at byte %d\n want: …%s…\n  got: …%s…", where, field, i, clip(want), clip(got))
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return ks
}

func canonJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return canon(t, b)
}

// canon re-encodes JSON keeping object key order, so that Python's and Go's
// escaping choices do not matter but order does.
func canon(t *testing.T, raw []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				b.WriteByte('{')
				for first := true; dec.More(); first = false {
					if !first {
						b.WriteByte(',')
					}
					k, err := dec.Token()
					if err != nil {
						return err
					}
					b.WriteString(strconv.Quote(k.(string)) + ":")
					if err := walk(); err != nil {
						return err
					}
				}
				b.WriteByte('}')
			case '[':
				b.WriteByte('[')
				for first := true; dec.More(); first = false {
					if !first {
						b.WriteByte(',')
					}
					if err := walk(); err != nil {
						return err
					}
				}
				b.WriteByte(']')
			}
			_, err := dec.Token() // closing delimiter
			return err
		case string:
			b.WriteString(strconv.Quote(v))
		case nil:
			b.WriteString("null")
		default:
			fmt.Fprint(&b, v)
		}
		return nil
	}
	if err := walk(); err != nil && err != io.EOF {
		t.Fatalf("bad JSON %s: %v", raw, err)
	}
	return b.String()
}
