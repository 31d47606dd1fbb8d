package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/point"
)

// verifyRecipe checks the point's recipe before a stage acts on it. The
// worker renders every process set itself from this file (never from argv
// or environment in workflow input), so the file is what must be trusted.
// A point without a recipe (single-node rows) launches nothing from one.
func (a *Activities) verifyRecipe(p point.Spec) error {
	if p.RecipePath == "" || a.RecipesRoot == "" && !a.RequireRecipes {
		return nil
	}
	if err := config.VerifyPlannedRecipe(a.RecipesRoot, p.RecipePath, p.RecipeDigest, p.RecipeSets...); err != nil {
		if errors.Is(err, config.ErrRecipeMissing) && !a.RequireRecipes {
			// A backend that launches no recipe (the simulator) may run a
			// sweep planned against another recipes root; a file that is
			// there must still have the planned bytes.
			return nil
		}
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("point %s: %v", p.PointID, err), string(failure.ErrRecipeMismatch), err)
	}
	return nil
}
