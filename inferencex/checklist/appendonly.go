package checklist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// basePoint is one (row, concurrency) of the base matrix.
type basePoint struct {
	row  *matrix.Row
	conc int
}

// pointKey identifies a point by everything the row says except its
// concurrency and exp-name (which embeds it): image, model, parallelism,
// settings and CONFIG_FILE included.
func pointKey(row *matrix.Row, conc int) string {
	return fmt.Sprintf("%s|%s|%d", row.ConfigKey, matrix.Canonical(row.Fields.Without("conc", "exp-name")), conc)
}

// appendOnly applies check 12: the base matrix of the selected keys must be
// a subset of the head matrix, with the same recipe bytes where the base
// directory holds the recipe too. New keys are out of scope.
func (c *checker) appendOnly() error {
	c.ranRule(RuleAppendOnly)
	var files []string
	for _, f := range c.opts.ConfigFiles {
		b := resolveBase(c.opts.Base, f)
		if !exists(b) {
			c.note("append-only: no base copy of %s in %s (a new file adds points only)", strictyaml.DisplayPath(f), strictyaml.DisplayPath(c.opts.Base))
			continue
		}
		files = append(files, b)
	}
	if len(files) == 0 {
		return nil
	}
	base, err := ixconfig.LoadMaster(files...)
	if err != nil {
		return fmt.Errorf("append-only base: %w", err)
	}
	var keys []string
	headKeys := map[string]bool{}
	for _, r := range c.rows {
		if !headKeys[r.ConfigKey] {
			headKeys[r.ConfigKey] = true
			if base.Entry(r.ConfigKey) != nil {
				keys = append(keys, r.ConfigKey)
			} else {
				c.note("append-only: %s is new (not in the base); out of scope", r.ConfigKey)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	baseRows, err := matrix.Generate(base, c.runners, matrix.Options{Keys: keys})
	if err != nil {
		return fmt.Errorf("append-only base: %w", err)
	}
	head := map[string]*matrix.Row{}
	images := map[string]string{}
	for _, r := range c.rows {
		for _, conc := range r.Conc() {
			head[pointKey(r, conc)] = r
		}
		images[r.ConfigKey] = r.Entry.Image
	}
	for _, br := range baseRows {
		for _, conc := range br.Conc() {
			if head[pointKey(br, conc)] != nil {
				continue
			}
			he := c.master.Entry(br.ConfigKey)
			pos, field := he.Pos, br.ConfigKey
			got := fmt.Sprintf("base point %s conc %d (%s) removed or changed", br.ExpName(), conc, br.Search.Pos)
			if he.Image != br.Entry.Image {
				pos, field = he.FieldPos("image"), br.ConfigKey+".image"
				got = fmt.Sprintf("image %s for base point %s conc %d", he.Image, br.ExpName(), conc)
			}
			c.add(Finding{Rule: RuleAppendOnly, Pos: pos, Field: field, ConfigKey: br.ConfigKey, Got: got,
				Want: fmt.Sprintf("every base point kept unchanged (image %s, same row and recipe)", br.Entry.Image)})
		}
	}
	c.appendOnlyRecipes(baseRows)
	return nil
}

// appendOnlyRecipes compares the bytes of every recipe a base point uses
// with the base directory's copy at the same root-relative path.
func (c *checker) appendOnlyRecipes(baseRows []*matrix.Row) {
	if c.opts.RecipesRoot == "" {
		return
	}
	done := map[string]bool{}
	for _, br := range baseRows {
		ref, pos, field := recipeRef(br)
		if ref == "" || done[ref] {
			continue
		}
		done[ref] = true
		rv := c.recipes[ref]
		if rv == nil {
			continue
		}
		old, err := os.ReadFile(filepath.Join(c.opts.Base, filepath.FromSlash(rv.Path)))
		if err != nil {
			c.note("append-only: no base copy of recipe %s; its bytes were not compared", rv.Path)
			continue
		}
		if !bytes.Equal(old, rv.Raw) {
			c.add(Finding{Rule: RuleAppendOnly, Pos: strictyaml.Pos{File: rv.Display, Line: 1}, Field: field, ConfigKey: br.ConfigKey,
				Got:  fmt.Sprintf("recipe %s changed (used by base point %s, %s)", rv.Path, br.ExpName(), pos),
				Want: "the base recipe unchanged; put new behaviour in a new recipe used only by new points"})
		}
	}
}
