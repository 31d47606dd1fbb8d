package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/config"
)

func init() {
	register("recipe migrate", newRecipeMigrateCmd)
}

// newRecipeMigrateCmd writes a schema-1 srt-slurm recipe in schema 2, or
// checks that two recipe files resolve to one recipe.
func newRecipeMigrateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate FILE | migrate --check A B",
		Short: "write an srt-slurm recipe in schema 2 (srt-slurm 2.x), or check that two recipes resolve alike",
		Long: "Prints FILE (a plain recipe or an override file) in srt-slurm's schema 2, as srtctl migrate rewrites it;\n" +
			"comments do not survive. With --check, A and B (each FILE or FILE:<variant>) are resolved as a launch\n" +
			"resolves them; an override file named without a variant compares every variant. Exit 0 when they\n" +
			"resolve alike, 1 when they do not.",
		Example: "  starter recipe migrate recipes/x.yaml > recipes/x.v2.yaml\n" +
			"  starter recipe migrate --check recipes/x.yaml recipes/x.v2.yaml",
	}
	check := c.Flags().Bool("check", false, "compare two recipes (A B) instead of migrating one")
	inPlace := c.Flags().Bool("in-place", false, "rewrite FILE instead of printing it")
	c.Args = func(c *cobra.Command, args []string) error {
		if *check && len(args) != 2 || !*check && len(args) != 1 {
			return usageError("usage: starter recipe %s", c.Use)
		}
		if *check && *inPlace {
			return usageError("--in-place migrates one file; --check compares two")
		}
		return nil
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		if *check {
			return recipeCheck(c.OutOrStdout(), args[0], args[1])
		}
		return recipeMigrate(c.OutOrStdout(), args[0], *inPlace)
	}
	return c
}

func recipeMigrate(stdout io.Writer, file string, inPlace bool) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := config.MigrateRecipe(file, data)
	if err != nil {
		return err
	}
	if inPlace {
		return os.WriteFile(file, out, 0o644)
	}
	_, err = stdout.Write(out)
	return err
}

// resolvedVariants resolves ref (FILE or FILE:selector): one recipe, or
// every variant of an override file named without one.
func resolvedVariants(ref string) ([]string, []*config.Recipe, error) {
	file, sel := config.SplitRecipeRef(ref)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	sels := []string{sel}
	if sel == "" {
		vs, err := config.RecipeVariants(file, data)
		if err != nil {
			return nil, nil, err
		}
		if vs != nil {
			sels = append([]string{"base"}, vs...)
		}
	}
	var out []*config.Recipe
	for _, s := range sels {
		r, err := config.ParseRecipe(filepath.Clean(file), data, s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, r)
	}
	return sels, out, nil
}

func recipeCheck(stdout io.Writer, a, b string) error {
	sa, ra, err := resolvedVariants(a)
	if err != nil {
		return err
	}
	sb, rb, err := resolvedVariants(b)
	if err != nil {
		return err
	}
	if len(sa) != len(sb) {
		return &exitError{code: 1, msg: fmt.Sprintf("differ: %s has %d variants, %s has %d", a, len(sa), b, len(sb))}
	}
	same := true
	for i := range ra {
		name := func(ref, sel string) string {
			if sel == "" || len(sa) == 1 {
				return ref
			}
			return ref + ":" + sel
		}
		if d := config.RecipeDiff(ra[i], rb[i]); d != "" {
			same = false
			fmt.Fprintf(stdout, "differ: %s and %s: %s\n", name(a, sa[i]), name(b, sb[i]), d)
			continue
		}
		fmt.Fprintf(stdout, "same: %s and %s resolve to one recipe (sha256 %.12s)\n", name(a, sa[i]), name(b, sb[i]), ra[i].ResolvedDigest())
	}
	if !same {
		return &exitError{code: 1}
	}
	return nil
}
