package activities

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// TestRecipeVerifiedBeforeLaunch: a point's recipe is read from the
// profile's recipes root and must have the bytes its identity was planned
// from; otherwise Allocate and BringUp fail, not retryably, before the
// backend is asked for anything.
func TestRecipeVerifiedBeforeLaunch(t *testing.T) {
	root := t.TempDir()
	recipe, err := os.ReadFile(filepath.Join("..", "configs", "recipes", "sglang", "deepseek-v4-0813", "gb200", "agentic", "agg-gb200-tp8-c1-dspark6-hicache.yaml"))
	require.NoError(t, err)
	ref := "recipes/unit.yaml"
	require.NoError(t, os.MkdirAll(filepath.Join(root, "recipes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, ref), recipe, 0o644))
	outside := filepath.Join(t.TempDir(), "evil.yaml")
	require.NoError(t, os.WriteFile(outside, recipe, 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "recipes", "link.yaml")))
	good := config.RecipeDigest(recipe)

	tests := []struct {
		name     string
		path     string
		digest   string
		require  bool
		noRoot   bool
		wantErr  string // "" launches
		launches bool
	}{
		{name: "planned bytes", path: ref, digest: good, launches: true},
		{name: "tampered recipe", path: ref, digest: config.RecipeDigest([]byte("name: other\n")), wantErr: "the file changed since planning"},
		{name: "path outside the root", path: "../../etc/passwd", digest: good, wantErr: "must be relative to the recipes root and stay inside it"},
		{name: "absolute path", path: outside, digest: good, wantErr: "must be relative to the recipes root"},
		{name: "symlink out of the root", path: "recipes/link.yaml", digest: good, wantErr: "outside the recipes root"},
		{name: "no digest", path: ref, digest: "", wantErr: "carries no recipe digest"},
		{name: "missing file on a real cluster", path: "recipes/gone.yaml", digest: good, require: true, wantErr: "not found under recipes root"},
		{name: "missing file on a backend that launches no recipe", path: "recipes/gone.yaml", digest: good, launches: true},
		{name: "no recipe: nothing to verify", path: "", launches: true},
		{name: "no root on a backend that needs none", path: ref, digest: "x", noRoot: true, launches: true},
		{name: "no root on a real cluster", path: ref, digest: good, noRoot: true, require: true, wantErr: "no recipes-root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := &fakeBackend{}
			a := &Activities{Backend: be, RecipesRoot: root, RequireRecipes: tc.require, StateDir: t.TempDir()}
			if tc.noRoot {
				a.RecipesRoot = ""
			}
			p := point.Spec{SweepID: "s", PointID: "p1", Nodes: 1, RecipePath: tc.path, RecipeDigest: tc.digest}
			env := newActivityEnv(a)
			_, allocErr := env.ExecuteActivity(a.Allocate, p)
			_, upErr := env.ExecuteActivity(a.BringUp, StageInput{Point: p, Mode: "perf", Alloc: cluster.Allocation{JobID: "j", Nodes: []string{"n1"}}})
			if tc.launches {
				require.NoError(t, allocErr)
				require.NoError(t, upErr)
				assert.Equal(t, 1, be.allocs)
				assert.Equal(t, 1, be.bringUps)
				return
			}
			for _, err := range []error{allocErr, upErr} {
				app := appError(t, err)
				assert.Equal(t, string(failure.ErrRecipeMismatch), app.Type())
				assert.True(t, app.NonRetryable())
				assert.Contains(t, app.Error(), tc.wantErr)
				assert.Contains(t, app.Error(), "point p1")
			}
			assert.Zero(t, be.allocs, "nothing requested from the cluster")
			assert.Zero(t, be.bringUps, "nothing launched")
		})
	}
}
