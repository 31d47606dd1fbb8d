package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/control"
	"github.com/sweepflow/sweepflow/internal/reftest"
)

// TestPlanHelperProcess is not a test: TestPlanCommand re-executes the test
// binary with SWEEPFLOW_PLAN_HELPER=1 so each case runs `starter` exactly as
// a user would (real argv, exit status, stdout and stderr).
func TestPlanHelperProcess(t *testing.T) {
	if os.Getenv("SWEEPFLOW_PLAN_HELPER") != "1" {
		t.Skip("helper process for TestPlanCommand")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args))
}

type planResult struct {
	code           int
	stdout, stderr string
}

// starterIn runs `starter args...` in dir.
func starterIn(t *testing.T, dir string, args ...string) planResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestPlanHelperProcess$", "--"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SWEEPFLOW_PLAN_HELPER=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return planResult{code, stdout.String(), stderr.String()}
}

// seedCopy copies configs/ to a temp dir (as <tmp>/configs) and returns <tmp>.
func seedCopy(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "configs"))
	require.NoError(t, err)
	root := t.TempDir()
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(root, "configs", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	require.NoError(t, err)
	return root
}

var tableRow = regexp.MustCompile(`(?m)^(\d+)\s+(\S+)\s+(TP\d+ agg|\dP\dD \S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(yes|no)\s+B(\d+)\s+(\S+\.yaml)$`)

func TestPlanSeedTable(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	res := starterIn(t, repo, "plan", "--sweep", "configs/sweeps/dsv4-gb200-agentx.yaml")
	require.Equal(t, 0, res.code, res.stderr)
	require.Empty(t, res.stderr)
	rows := tableRow.FindAllStringSubmatch(res.stdout, -1)
	require.Len(t, rows, 8, res.stdout)
	var nodes, gpus, concs []int
	var evals []string
	for _, r := range rows {
		n, _ := strconv.Atoi(r[5])
		g, _ := strconv.Atoi(r[6])
		c, _ := strconv.Atoi(r[4])
		nodes, gpus, concs, evals = append(nodes, n), append(gpus, g), append(concs, c), append(evals, r[7])
	}
	assert.Equal(t, []int{2, 2, 6, 6, 12, 16, 16, 16}, nodes)
	assert.Equal(t, []int{8, 8, 24, 24, 48, 64, 64, 64}, gpus)
	assert.Equal(t, []int{1, 4, 64, 128, 256, 768, 1024, 1280}, concs)
	assert.Equal(t, []string{"no", "no", "yes", "yes", "yes", "no", "no", "yes"}, evals)
	assert.Equal(t, "dsv4_p1x8_d0x8_conc1_kvdram-hicache", rows[0][2])
	assert.Equal(t, "1P1D DEP8/DEP16", rows[2][3])
	assert.Equal(t, "2P1D DEP16/DEP32", rows[7][3])
	var groups []string
	for _, r := range rows {
		groups = append(groups, r[8])
	}
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6", "6", "6"}, groups, "the 2P1D concurrencies share one bring-up")
	assert.Contains(t, res.stdout, "8 points, 44 node-allocations, 4 with eval; largest point needs 16 of 18 nodes")
	assert.Contains(t, res.stdout, "6 bring-ups (one per deployment")
	assert.Contains(t, res.stdout, "4 eval restarts")
	assert.Contains(t, res.stdout, "B6 2P1D DEP16/DEP32: c768, c1024, c1280 on one 16-node allocation")

	// --json for machines, and --cluster switches the profile.
	res = starterIn(t, repo, "plan", "--sweep", "configs/sweeps/dsv4-gb200-agentx.yaml", "--cluster", "configs/clusters/local-sim.yaml", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var out struct {
		Sweep   string `json:"sweep"`
		Cluster struct {
			Name    string `json:"name"`
			Backend string `json:"backend"`
		} `json:"cluster"`
		BringUps []struct {
			Group  int   `json:"group"`
			Nodes  int   `json:"nodes"`
			Points []int `json:"points"`
			Evals  int   `json:"evals"`
		} `json:"bring-ups"`
		EvalRestarts int `json:"eval-restarts"`
		Points       []struct {
			BringUpGroup int    `json:"bring-up-group"`
			Nodes        int    `json:"nodes"`
			Eval         bool   `json:"eval"`
			ID           string `json:"id"`
			Identity     string `json:"identity"`
			ProfileHash  string `json:"profile-hash"`
			Row          struct {
				ExpName string `json:"exp-name"`
			} `json:"row"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	assert.Equal(t, "dsv4-gb200-agentx", out.Sweep)
	assert.Equal(t, "local-sim", out.Cluster.Name)
	assert.Equal(t, "local", out.Cluster.Backend)
	require.Len(t, out.Points, 8)
	assert.Equal(t, 16, out.Points[7].Nodes)
	assert.Equal(t, "dsv4_p2x16ep16dpa_d1x32ep32dpa_conc1280_kvdram-hicache", out.Points[7].Row.ExpName)
	assert.Regexp(t, `^[0-9a-f]{64}-c1$`, out.Points[0].Identity)
	assert.Len(t, out.Points[0].ProfileHash, 64)
	require.Len(t, out.BringUps, 6)
	assert.Equal(t, []int{5, 6, 7}, out.BringUps[5].Points)
	assert.Equal(t, 16, out.BringUps[5].Nodes)
	assert.Equal(t, 1, out.BringUps[5].Evals)
	assert.Equal(t, 4, out.EvalRestarts)
	assert.Equal(t, 6, out.Points[7].BringUpGroup)

	// What plan --json prints is exactly what the sweep runs with.
	in, _, err := control.Build(control.Request{SweepFile: filepath.Join(repo, "configs/sweeps/dsv4-gb200-agentx.yaml"), ClusterFile: filepath.Join(repo, "configs/clusters/local-sim.yaml")})
	require.NoError(t, err)
	require.Len(t, in.Points, len(out.Points))
	for i, pt := range in.Points {
		assert.Equal(t, out.Points[i].ID, pt.PointID)
		assert.Equal(t, out.Points[i].Identity, pt.Identity)
		assert.Equal(t, out.Points[i].ProfileHash, pt.ProfileHash)
	}
}

// TestPlanErrorsAreOneLine edits one thing in a copy of the seed per case
// and checks the exit status and the single line the user sees.
func TestPlanErrorsAreOneLine(t *testing.T) {
	const (
		master  = "configs/dsv4-gb200-agentx.yaml"
		cluster = "configs/clusters/gb200-nvl72.yaml"
		sweep   = "configs/sweeps/dsv4-gb200-agentx.yaml"
		recipe  = "configs/recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c4-dspark6-hicache.yaml"
	)
	cases := []struct {
		name     string
		file     string
		old, new string
		args     []string
		code     int
		want     []string // substrings of the one stderr line
	}{
		{"malformed YAML", master, "        conc-list: [4]\n", "        conc-list: [4\n", nil, 1,
			[]string{"starter plan: " + master + ":", ": yaml: malformed YAML"}},
		{"unknown field", master, "  precision: fp4\n", "  precison: fp4\n", nil, 1,
			[]string{"starter plan: " + master + ":21: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg.precison: unknown field"}},
		{"conc 0", master, "conc-list: [64]", "conc-list: [0]", nil, 1,
			[]string{"starter plan: " + master + ":91: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg.scenarios.agentic-coding[0].search-space[0].conc-list[0]: concurrency must be > 0, got 0"}},
		{"missing recipe file", master, "agg-gb200-tp8-c4-dspark6-hicache.yaml", "agg-gb200-tp8-c5-dspark6-hicache.yaml", nil, 1,
			[]string{"starter plan: " + master + ":62: ", "search-space[1].prefill.additional-settings[2]: recipe recipes/sglang/deepseek-v4-0813/gb200/agentic/agg-gb200-tp8-c5-dspark6-hicache.yaml not found under recipes root configs"}},
		{"row larger than the cluster", cluster, "nodes: 18", "nodes: 15", nil, 1,
			[]string{"starter plan: " + master + ":147: ", "search-space[3]: 2P1D DEP16/DEP32 needs 16 nodes", "cluster gb200-nvl72 has only 15"}},
		{"bad recipe", recipe, "  agg_workers: 1\n", "  agg_worker: 1\n", nil, 1,
			[]string{"starter plan: " + recipe[len("configs/"):], ": resources.agg_worker: unknown field"}},
		{"unknown field in the sweep file", sweep, "evals: true", "evals: true\nretries: 3", nil, 1,
			[]string{"starter plan: " + sweep + ":19: retries: unknown field"}},
		{"unknown config key", sweep, "  - dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-agg\n", "  - dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-aggr\n", nil, 1,
			[]string{`starter plan: config-keys: config key "dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-aggr" not found`}},
		{"conflicting flags", "", "", "", []string{"--no-evals", "--evals-only"}, 2,
			[]string{"starter plan: --no-evals and --evals-only are mutually exclusive"}},
		{"unknown flag", "", "", "", []string{"--nodes", "3"}, 2,
			[]string{"starter plan: unknown flag: --nodes (see starter plan --help)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := seedCopy(t)
			if tc.file != "" {
				p := filepath.Join(dir, tc.file)
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				require.Contains(t, string(data), tc.old)
				require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(data), tc.old, tc.new, 1)), 0o644))
			}
			args := append([]string{"plan", "--sweep", sweep}, tc.args...)
			if tc.name == "bad recipe" {
				// Recipe problems are reported in the recipe: run from configs/.
				args = []string{"plan", "--sweep", "sweeps/dsv4-gb200-agentx.yaml"}
				dir = filepath.Join(dir, "configs")
			}
			res := starterIn(t, dir, args...)
			assert.Equal(t, tc.code, res.code, res.stderr)
			assert.Empty(t, res.stdout, "nothing is planned when anything is invalid")
			require.True(t, strings.HasSuffix(res.stderr, "\n"), "%q", res.stderr)
			assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "exactly one line: %q", res.stderr)
			for _, w := range tc.want {
				assert.Contains(t, res.stderr, w)
			}
			assert.NotContains(t, res.stderr, "goroutine")
			assert.NotContains(t, res.stderr, "panic")
		})
	}
}

// TestPlanIXJSONParity runs the InferenceX-compatible interface against the
// reference outputs: space-separated lists after flags, globs, both modes.
func TestPlanIXJSONParity(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "expected-matrix")

	keys := []string{"dsv4-fp4-gb300-dynamo-sglang-agentic-agg", "dsr1-fp4-b200-dynamo-trt"}
	for _, mode := range []struct{ flag, suffix string }{{"--no-evals", ".json"}, {"--evals-only", ".evals.json"}} {
		res := starterIn(t, repo, append(append([]string{"plan", "--config-files", filepath.Join(ix, "nvidia-master.yaml"),
			"--runner-config", filepath.Join(ix, "runners.yaml"), "--config-keys"}, keys...), mode.flag, "--format", "ix-json")...)
		require.Equal(t, 0, res.code, res.stderr)
		require.Equal(t, 1, strings.Count(res.stdout, "\n"), "one line, as InferenceX prints it")
		var got []any
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
		var want []any
		for _, k := range keys {
			data, err := os.ReadFile(filepath.Join(ix, "expected-matrix", k+mode.suffix))
			require.NoError(t, err)
			var rows []any
			require.NoError(t, json.Unmarshal(data, &rows))
			want = append(want, rows...)
		}
		require.Equal(t, want, got, mode.flag)
	}

	// A glob resolves in file order; the seed's own rows come out too.
	res := starterIn(t, repo, "plan", "--config-files", "configs/dsv4-gb200-agentx.yaml", "--runner-config", "configs/runners.yaml",
		"--config-keys", "dsv4-*", "--evals-only", "--format", "ix-json")
	require.Equal(t, 0, res.code, res.stderr)
	var evals []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &evals))
	require.Len(t, evals, 4)
	for i, c := range []float64{64, 128, 256, 1280} {
		assert.Equal(t, c, evals[i]["eval-conc"])
		assert.Equal(t, true, evals[i]["eval-only"])
	}
}

// TestPlanIXJSONSingleNode: `plan --format ix-json` on single-node keys
// (fixed-seq-len and agentic) prints exactly what InferenceX's generator
// printed into expected-matrix-single, byte for byte, in both modes.
func TestPlanIXJSONSingleNode(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	ix := reftest.InferenceX(t, "nvidia-master.yaml", "runners.yaml", "expected-matrix-single")
	for _, key := range []string{"dsr1-fp4-b200-sglang", "qwen3.5-fp8-h200-sglang-agentic-hicache-mtp"} {
		for _, mode := range []struct{ flag, suffix string }{{"--no-evals", ".json"}, {"--evals-only", ".evals.json"}} {
			want, err := os.ReadFile(filepath.Join(ix, "expected-matrix-single", key+mode.suffix))
			require.NoError(t, err)
			res := starterIn(t, repo, "plan", "--config-files", filepath.Join(ix, "nvidia-master.yaml"),
				"--runner-config", filepath.Join(ix, "runners.yaml"), "--config-keys", key, mode.flag, "--format", "ix-json")
			require.Equal(t, 0, res.code, res.stderr)
			require.Equal(t, string(want), res.stdout, "%s %s", key, mode.flag)
		}
	}
}

// TestPlanSingleNodeKeys uses sweepflow's own single-node fixture: ix-json
// expands it (no reference data needed), while a point plan refuses it with
// one line that says what to do instead.
func TestPlanSingleNodeKeys(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	master := filepath.Join(repo, "inferencex", "matrix", "testdata", "single-fixed.yaml")

	res := starterIn(t, repo, "plan", "--config-files", master, "--runner-config", "configs/runners.yaml",
		"--config-keys", "sn-fixed*", "--evals-only", "--format", "ix-json")
	require.Equal(t, 0, res.code, res.stderr)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rows))
	var got []string
	for _, r := range rows {
		assert.Equal(t, true, r["eval-only"])
		assert.NotContains(t, r, "eval-conc")
		got = append(got, r["exp-name"].(string)+"/"+strconv.Itoa(int(r["tp"].(float64)))+"/"+strconv.Itoa(int(r["conc"].(float64))))
	}
	// sn-fixed, then sn-fixed-odd and its twin as one group ({20,40,80,160}).
	assert.Equal(t, []string{"ma_8k1k/2/64", "ma_8k1k/4/64", "ma_8k1k/4/128", "ma_8k1k/8/64", "ma_8k1k/8/256", "ma_8k1k/4/16",
		"mb_8k1k/2/80", "mb_8k1k/4/160"}, got)

	res = starterIn(t, repo, "plan", "--cluster", "configs/clusters/gb200-nvl72.yaml", "--config-files", master,
		"--runner-config", "configs/runners.yaml", "--config-keys", "sn-fixed")
	assert.Equal(t, 1, res.code)
	assert.Empty(t, res.stdout)
	assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "exactly one line: %q", res.stderr)
	assert.Contains(t, res.stderr, "single-fixed.yaml:")
	assert.Contains(t, res.stderr, "sn-fixed.multinode: single-node config key")
	assert.Contains(t, res.stderr, "--format ix-json")
}

// A sweep file's adaptive requests are named under the plan: their points
// are decided while the sweep runs.
func TestPlanNamesAdaptiveRequests(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	seed, err := os.ReadFile(filepath.Join(repo, "configs/sweeps/dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	configs := filepath.Join(repo, "configs")
	body := strings.ReplaceAll(strings.ReplaceAll(string(seed), "recipes-root: ..", "recipes-root: "+configs), "../", configs+"/")
	file := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(file, []byte(body+"adaptive:\n  - {config-key: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg, mode: fill, max-points: 2}\n"), 0o644))
	res := starterIn(t, repo, "plan", "--sweep", file)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "\nadaptive: dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg: fill gaps wider than x2, up to 2 added points (points decided while the sweep runs; starter forecast shows the worst case)\n")
}

const (
	seedSweep  = "../configs/sweeps/dsv4-gb200-agentx.yaml"
	clFixture  = "../control/testdata/changelog/perf-changelog.yaml"
	clBadEntry = "../control/testdata/changelog/bad-entries.yaml"
)

func TestPlanChangelogDryRun(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: control.ChangelogRef{Path: clFixture, Entry: 1}}))
	assert.Regexp(t, `changelog entry 1 \(\S*control/testdata/changelog/perf-changelog\.yaml:5\)`, stdout.String())
	assert.Contains(t, stdout.String(), "8 points, 44 node-allocations, 4 with eval")
}

// TestPlanChangelogEvalOnly: plan shows an evals-only entry's points as
// eval-only.
func TestPlanChangelogEvalOnly(t *testing.T) {
	const clEvals = "../control/testdata/changelog/evals.yaml"
	var stdout bytes.Buffer
	require.NoError(t, runPlanTo(&stdout, &planFlags{sweep: seedSweep, format: "table", changelog: control.ChangelogRef{Path: clEvals, Entry: 1}}))
	assert.Contains(t, stdout.String(), "eval-only  B1")
	assert.Contains(t, stdout.String(), "4 eval-only points")
}

// TestPlanChangelogIXJSON: --changelog with --format ix-json prints the
// entries' matrix in InferenceX's changelog buckets; the seed entry's
// buckets hold exactly the generator's --no-evals and --evals-only rows of
// the seed keys, and an evals-only entry adds no throughput row.
func TestPlanChangelogIXJSON(t *testing.T) {
	type bucketed struct {
		MultiNode         map[string][]json.RawMessage `json:"multi_node"`
		SingleNode        map[string][]json.RawMessage `json:"single_node"`
		MultinodeAgentic  []json.RawMessage            `json:"multinode_agentic_evals"`
		Evals             []json.RawMessage            `json:"evals"`
		ChangelogMetadata struct {
			Entries []map[string]any `json:"entries"`
		} `json:"changelog_metadata"`
	}
	plan := func(f *planFlags) []byte {
		var out bytes.Buffer
		require.NoError(t, runPlanTo(&out, f))
		return out.Bytes()
	}
	var got bucketed
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: control.ChangelogRef{Path: clFixture, Entry: 1}}), &got))
	var tput, evals []json.RawMessage
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", noEvals: true}), &tput))
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", evalsOnly: true}), &evals))
	require.Len(t, tput, 8)
	require.Len(t, evals, 4)
	assert.Equal(t, canon(t, tput), canon(t, got.MultiNode["agentic"]))
	assert.Equal(t, canon(t, evals), canon(t, got.MultinodeAgentic))
	assert.Empty(t, got.SingleNode)
	assert.Empty(t, got.Evals)
	require.Len(t, got.ChangelogMetadata.Entries, 1)
	assert.Equal(t, "https://github.com/SemiAnalysisAI/InferenceX/pull/XXX", got.ChangelogMetadata.Entries[0]["pr-link"])

	var eo bucketed
	require.NoError(t, json.Unmarshal(plan(&planFlags{sweep: seedSweep, format: "ix-json", changelog: control.ChangelogRef{Path: clFixture, Entry: 3}}), &eo))
	assert.Empty(t, eo.MultiNode, "evals-only: no throughput rows")
	assert.Len(t, eo.MultinodeAgentic, 4)
	assert.Equal(t, true, eo.ChangelogMetadata.Entries[0]["evals-only"])

	var stdout, stderr bytes.Buffer
	code := runIO([]string{"plan", "--sweep", seedSweep, "--format", "ix-json", "--changelog", clFixture, "--no-evals"}, &stdout, &stderr)
	assert.Equal(t, 2, code, "the entries say which evals run")
}

// canon is rows as sorted canonical JSON, so two row lists compare
// whatever their order.
func canon(t *testing.T, rows []json.RawMessage) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var v any
		require.NoError(t, json.Unmarshal(r, &v))
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
