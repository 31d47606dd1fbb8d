// Package layering holds the import rules of sweepflow's package graph as a
// test, so a move that breaks them fails here rather than in review.
package layering

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/sweepflow/sweepflow"

// workflowPackages hold Temporal workflow code (deterministic, checked by
// workflowcheck); the packages in mayImportWorkflows assemble or drive them.
var (
	workflowPackages   = []string{"workflows", "nightly"}
	mayImportWorkflows = []string{"worker/workers", "control", "bench", "starter", "worker", "e2e", "forecast", "chaos"}
	commands           = []string{"starter", "worker"}
)

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

// TestPlainPackagesDoNotImportWorkflowsOrCommands: the plain packages (the
// domain, backends, loaders, InferenceX rules) sit below the workflows and
// the binaries, never above them.
func TestPlainPackagesDoNotImportWorkflowsOrCommands(t *testing.T) {
	pkgs := listPackages(t)
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		if slices.Contains(workflowPackages, from) || slices.Contains(mayImportWorkflows, from) {
			continue
		}
		for _, imp := range p.Imports {
			to := rel(imp)
			if !strings.HasPrefix(imp, module) {
				continue
			}
			require.Falsef(t, slices.Contains(workflowPackages, to), "%s imports the workflow package %s", from, to)
			require.Falsef(t, slices.Contains(commands, to), "%s imports the command %s", from, to)
		}
	}
}

// TestWorkflowPackagesExist keeps the rule above from passing vacuously
// after a rename.
func TestWorkflowPackagesExist(t *testing.T) {
	var have []string
	for _, p := range listPackages(t) {
		have = append(have, rel(p.ImportPath))
	}
	for _, want := range append(slices.Clone(workflowPackages), mayImportWorkflows...) {
		require.Containsf(t, have, want, "the layering rule names %s, which no longer exists", want)
	}
}

// TestEnergyIsALeaf: package energy (power figures, the power gate and
// InferenceX's definitions) sits below point and every backend, so all of
// them can use one definition; it imports only internal helpers.
func TestEnergyIsALeaf(t *testing.T) {
	for _, p := range listPackages(t) {
		if rel(p.ImportPath) != "energy" {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/") {
				require.Truef(t, strings.HasPrefix(rel(imp), "internal/"), "energy imports %s", rel(imp))
			}
		}
		return
	}
	t.Fatal("package energy not found")
}
