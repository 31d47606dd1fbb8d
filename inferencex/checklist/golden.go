package checklist

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/goldenal"
)

// goldenSet is one golden AL file or a directory of them (InferenceX keeps
// one file per model and draft method: dsv4_mtp.yaml, glm5.2_mtp.yaml,
// dsv4-pro-0813-dspark.yaml).
type goldenSet struct {
	files []goldenFile
}

type goldenFile struct {
	name  string // base name without .yaml
	path  string
	table goldenal.Table
}

func loadGolden(p string) (*goldenSet, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("golden AL: %w", err)
	}
	paths := []string{p}
	if st.IsDir() {
		paths, _ = filepath.Glob(filepath.Join(p, "*.yaml"))
		sort.Strings(paths)
		if len(paths) == 0 {
			return nil, fmt.Errorf("golden AL: no *.yaml files in %s", strictyaml.DisplayPath(p))
		}
	}
	g := &goldenSet{}
	for _, f := range paths {
		t, err := goldenal.Load(f)
		if err != nil {
			return nil, err
		}
		g.files = append(g.files, goldenFile{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), path: f, table: t})
	}
	return g, nil
}

// method is the golden file's naming of a draft algorithm.
func method(algorithm string) string {
	a := strings.ToLower(algorithm)
	switch {
	case strings.Contains(a, "dspark"):
		return "dspark"
	case strings.Contains(a, "eagle3"):
		return "eagle3"
	}
	return "mtp" // SGLang's EAGLE/NEXTN on a model's own MTP head
}

// lookup finds the golden AL for a model (Hugging Face id), model prefix,
// draft algorithm, thinking mode and draft length. The model's own name is
// tried first; a table named after the model prefix and method (glm5.2_mtp)
// serves a checkpoint variant it does not list (GLM-5.2-NVFP4).
func (g *goldenSet) lookup(model, prefix, algorithm string, thinking bool, tokens int) (float64, string, error) {
	key := strings.ToLower(path.Base(model))
	var cands []goldenFile
	for _, f := range g.files {
		if _, ok := f.table[key]; ok {
			cands = append(cands, f)
		}
	}
	modelKey := key
	if len(cands) == 0 {
		for _, f := range g.files {
			if strings.HasPrefix(f.name, prefix+"_") || strings.HasPrefix(f.name, prefix+"-") {
				cands = append(cands, f)
			}
		}
		if len(cands) > 1 {
			var m []goldenFile
			for _, f := range cands {
				if strings.Contains(f.name, method(algorithm)) {
					m = append(m, f)
				}
			}
			cands = m
		}
		if len(cands) != 1 || len(cands[0].table) != 1 {
			return 0, "", fmt.Errorf("no committed golden AL curve for %s (%s, %s)", model, prefix, method(algorithm))
		}
		for k := range cands[0].table {
			modelKey = k
		}
	}
	f := cands[0]
	al, err := f.table.Lookup(modelKey, thinking, tokens)
	if err != nil {
		return 0, "", err
	}
	return al, strictyaml.DisplayPath(f.path), nil
}
