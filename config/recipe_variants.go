package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// RecipeVariants lists the selectors of an override file's variants in the
// order srtctl apply submits them (override_* then zip_override_*[i], each
// sorted; base is not one of them); nil for a plain recipe.
func RecipeVariants(display string, data []byte) ([]string, error) {
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	if mapGet(root, "base") == nil {
		return nil, nil
	}
	var errs strictyaml.Errors
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	m := d.Mapping(root, "", nil)
	if m == nil {
		return nil, errs.Err()
	}
	return d.variants(m)
}

// variants lists the selectors of the override file m in the order srtctl
// apply submits them.
func (d *decoder) variants(m *strictyaml.Mapping) ([]string, error) {
	var overrides, zips, out []string
	for _, k := range m.Keys {
		switch {
		case strings.HasPrefix(k, "override_"):
			overrides = append(overrides, k)
		case strings.HasPrefix(k, "zip_override_"):
			zips = append(zips, k)
		}
	}
	slices.Sort(overrides)
	slices.Sort(zips)
	out = overrides
	for _, k := range zips {
		n, err := zipLength(strictyaml.Deref(m.Values[k]))
		if err != nil {
			return nil, &strictyaml.Error{Pos: d.Pos(m.Values[k]), Field: k, Msg: err.Error()}
		}
		for i := range n {
			out = append(out, fmt.Sprintf("%s[%d]", k, i))
		}
	}
	return out, nil
}
