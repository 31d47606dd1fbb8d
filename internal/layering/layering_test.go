// Package layering holds the import rules of sweepflow's package graph as a
// test, so a move that breaks them fails here rather than in review.
package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/sweepflow/sweepflow"

// layers lists every package of the module from the bottom up. A package
// may depend, directly or through others (`go list -deps`), only on
// packages of its own layer or a lower one.
var layers = []struct {
	name     string
	packages []string
}{
	{"leaves", []string{"artifacts", "codec", "config/strictyaml", "energy", "hostlist", "inferencex/goldenal", "loadgen/sse",
		"sim/simenv", "staging", "internal/anynum", "internal/atomicfile", "internal/freeport", "internal/fuzzseed",
		"internal/errtext", "internal/jsonesc", "internal/prereq", "internal/pyjson", "internal/reftest", "internal/replaytest", "internal/treecopy",
		"results/pgtest"}},
	{"failure", []string{"failure"}},
	{"domain", []string{"point", "nodehealth", "temporalx", "internal/testnet", "internal/gsm8kfixture"}},
	{"model", []string{"config", "results", "loadgen", "sim", "cluster", "gsm8k", "cluster/slurm/srtlaunch",
		"inferencex/ixconfig", "inferencex/matrix", "inferencex/changelog", "inferencex/overlay", "inferencex/resultfile"}},
	{"analysis", []string{"adaptive", "accounting", "curvegaps", "forecast", "metrics", "nightly/regress", "plan",
		"plan/budgetcheck", "plan/launchcheck", "report", "inferencex/checklist", "inferencex/export",
		"cluster/slurm/power", "internal/rowrecipe"}},
	{"backends and stages", []string{"cluster/local", "cluster/noop", "cluster/slurm", "activities"}},
	{"workflows", []string{"workflows", "nightly", "chaos", "forecast/runner"}},
	{"drivers", []string{"control", "bench", "worker/workers", "sim/simrole", "cluster/slurm/slurmemu"}},
	{"commands", []string{"starter", "worker"}},
	{"tests", []string{"e2e", "e2e/realgpu", "e2e/realgpu/crosscheck", "deploy", "internal/layering"}},
}

// testsuiteOwners are the only packages that may import the SDK's test
// suite outside tests: the forecast runs the real workflows in its
// time-skipping environment.
var testsuiteOwners = []string{"forecast/runner"}

const testsuite = "go.temporal.io/sdk/testsuite"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string // what `go list -deps` lists for the package
	Error      *struct{ Err string }
}

// listPackages runs go list over the module, with overlay (a go list
// -overlay file) when it is not "".
func listPackages(t *testing.T, overlay string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.Command("go", append(args, module+"/...")...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		require.Nilf(t, p.Error, "go list %s", p.ImportPath)
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func layerOf(p string) int {
	for i, l := range layers {
		if slices.Contains(l.packages, p) {
			return i
		}
	}
	return -1
}

// violations lists every dependency of pkgs that points up the layer
// table, every package the table does not name, and every package that
// links the SDK's test suite without a testsuiteOwner below it.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		lf := layerOf(from)
		if lf < 0 {
			out = append(out, fmt.Sprintf("%s is in no layer of the table", from))
			continue
		}
		if slices.Contains(p.Imports, testsuite) && !slices.Contains(testsuiteOwners, from) {
			out = append(out, fmt.Sprintf("%s imports %s (only %v may)", from, testsuite, testsuiteOwners))
		}
		for _, d := range p.Deps {
			if !strings.HasPrefix(d, module+"/") {
				continue
			}
			to := rel(d)
			if lt := layerOf(to); lt > lf {
				out = append(out, fmt.Sprintf("%s (%s) depends on %s (%s), a higher layer", from, layers[lf].name, to, layers[lt].name))
			}
		}
	}
	return out
}

// TestLayers: every package sits in one layer and depends only on its own
// layer and those below it.
func TestLayers(t *testing.T) {
	require.Empty(t, violations(listPackages(t, "")))
}

// TestLayerTableNamesExistingPackages keeps the table from passing
// vacuously after a rename, and names every package once.
func TestLayerTableNamesExistingPackages(t *testing.T) {
	var have []string
	for _, p := range listPackages(t, "") {
		have = append(have, rel(p.ImportPath))
	}
	seen := map[string]bool{}
	for _, l := range layers {
		for _, p := range l.packages {
			require.Containsf(t, have, p, "layer %s names %s, which does not exist", l.name, p)
			require.Falsef(t, seen[p], "%s is in two layers", p)
			seen[p] = true
		}
	}
}

// TestLayersCatchAnUpwardImport adds an upward import on purpose (a file
// in an overlay, the repository untouched) and requires the rules to name
// it: report importing the forecast runner links the workflows, the
// activities and the test suite, and hostlist importing report is a leaf
// reaching the analysis layer.
func TestLayersCatchAnUpwardImport(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	replace := map[string]string{}
	for _, up := range []struct{ in, imports string }{{"report", "forecast/runner"}, {"hostlist", "report"}} {
		src := filepath.Join(dir, strings.ReplaceAll(up.in, "/", "_")+".go")
		name := filepath.Base(up.in)
		require.NoError(t, os.WriteFile(src, []byte(fmt.Sprintf("package %s\n\nimport _ %q\n", name, module+"/"+up.imports)), 0o644))
		replace[filepath.Join(root, up.in, "zz_upward.go")] = src
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	require.NoError(t, err)
	file := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(file, overlay, 0o644))

	got := strings.Join(violations(listPackages(t, file)), "\n")
	for _, want := range []string{
		"report (analysis) depends on forecast/runner (workflows), a higher layer",
		"report (analysis) depends on workflows (workflows), a higher layer",
		"report (analysis) depends on activities (backends and stages), a higher layer",
		"hostlist (leaves) depends on report (analysis), a higher layer",
		// starter imports both: the rules hold for it, it is above them.
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "starter (commands)")
}
