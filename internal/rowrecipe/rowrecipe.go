// Package rowrecipe writes the srt-slurm recipe an InferenceX matrix row
// describes, for inputs whose recipes are not at hand: InferenceX's shared
// master config names recipes that live in srt-slurm, not beside it. The
// recipe holds what the row says (workers, GPUs per worker, the nodes they
// fill, the backend its framework runs, sequence lengths) and nothing it
// does not; it stands in for planning and scheduling, never for a launch
// whose figures count. The e2e reference tests and `starter bench forecast
// --sized` use it.
package rowrecipe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/plan"
)

// For renders the recipe a row describes: its workers, GPUs per worker
// (tp x pp x pcp) and the nodes they fill on the cluster, the backend its
// framework runs and its sequence lengths. Workers pack onto nodes as
// srt-slurm packs them; no dedicated etcd, frontend or client node. rel is
// the recipe's root-relative path (its name comes from it).
func For(r *matrix.Row, rel string, cl *config.Cluster) []byte {
	e, s := r.Entry, r.Search
	gpn := cl.GPUsPerNode
	gpus := func(w *ixconfig.Worker) int { return w.TP * max(w.PP, 1) * max(w.PCPSize, 1) }
	nodes := func(w *ixconfig.Worker) int { return (w.NumWorker*gpus(w) + gpn - 1) / gpn }
	backend := e.Framework[strings.LastIndex(e.Framework, "-")+1:]
	if backend == "trt" {
		backend = "trtllm"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by sweepflow (internal/rowrecipe) from %s (%s).\n", s.Path, rel)
	fmt.Fprintf(&b, "name: %q\n", strings.TrimSuffix(filepath.Base(rel), filepath.Ext(rel)))
	fmt.Fprintf(&b, "model:\n  path: %q\n  container: %q\n  precision: %q\n", e.Model, e.Framework, e.Precision)
	fmt.Fprintf(&b, "resources:\n  gpu_type: %q\n  gpus_per_node: %d\n", cl.GPUType, gpn)
	if s.Decode == nil || s.Decode.NumWorker == 0 {
		fmt.Fprintf(&b, "  agg_nodes: %d\n  agg_workers: %d\n  gpus_per_agg: %d\n", nodes(s.Prefill), s.Prefill.NumWorker, gpus(s.Prefill))
	} else {
		fmt.Fprintf(&b, "  prefill_nodes: %d\n  prefill_workers: %d\n  gpus_per_prefill: %d\n", nodes(s.Prefill), s.Prefill.NumWorker, gpus(s.Prefill))
		fmt.Fprintf(&b, "  decode_nodes: %d\n  decode_workers: %d\n  gpus_per_decode: %d\n", nodes(s.Decode), s.Decode.NumWorker, gpus(s.Decode))
	}
	fmt.Fprintf(&b, "backend:\n  type: %s\n", backend)
	// Chat template on, as InferenceX's spec-decode recipes run (checklist 9).
	fmt.Fprintf(&b, "benchmark:\n  type: sa-bench\n  use_chat_template: true\n  isl: %d\n  osl: %d\n", r.Int("isl"), r.Int("osl"))
	return []byte(b.String())
}

// Write writes a recipe (For) for every CONFIG_FILE the rows name, under
// root. A recipe several rows name must fit all of them; a CONFIG_FILE
// that picks an override variant (recipe.yaml:zip_override_x[i]) has no
// plain recipe to write. Rows Write cannot serve are errors, unless skip
// is set: then they are returned, one line each, and left without a recipe.
func Write(root string, rows []*matrix.Row, cl *config.Cluster, skip bool) ([]string, error) {
	written := map[string][]byte{}
	var skipped []string
	fail := func(err error) error {
		if !skip {
			return err
		}
		skipped = append(skipped, err.Error())
		return nil
	}
	for _, r := range rows {
		ref, err := plan.RecipeRef(r)
		if err != nil {
			if err := fail(err); err != nil {
				return nil, err
			}
			continue
		}
		rel, selector := config.SplitRecipeRef(strings.TrimSpace(ref))
		if selector != "" {
			if err := fail(fmt.Errorf("%s: CONFIG_FILE %s picks an override variant; only plain recipes are written", r.Search.Path, ref)); err != nil {
				return nil, err
			}
			continue
		}
		data := For(r, rel, cl)
		if prev, ok := written[rel]; ok {
			if string(prev) != string(data) {
				if err := fail(fmt.Errorf("%s: recipe %s is named by rows of different shapes", r.Search.Path, rel)); err != nil {
					return nil, err
				}
			}
			continue
		}
		written[rel] = data
		file := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return nil, err
		}
	}
	return skipped, nil
}
