package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
)

// RunBenchmark runs the recipe's rendered benchmark process (srt-slurm's
// `benchmark.type: custom` step, e.g. InferenceX's agentic_srt.sh) against
// the running deployment, with the environment InferenceX's workflow gives
// it (spec.Env: CONC, DURATION, MODEL, RESULT_FILENAME, ...), and returns the
// path of the per-point result JSON it wrote (<RESULT_FILENAME>_conc<N>.json
// under RESULT_DIR, or in the InferenceX workspace where InferenceX's
// launcher collects it).
func (b *Backend) RunBenchmark(ctx context.Context, alloc cluster.Allocation, srv cluster.Server, spec cluster.BenchmarkSpec) (string, error) {
	dir := filepath.Join(alloc.WorkDir, srv.Handle)
	st, err := readState(dir)
	if err != nil {
		return "", fmt.Errorf("%w: bring-up state: %v", cluster.ErrAllocationLost, err)
	}
	if st.Benchmark == nil {
		return "", fmt.Errorf("%w: the recipe has no benchmark process (benchmark.type custom); use perf-client: loadgen", cluster.ErrBadConfig)
	}
	if spec.ResultFilename == "" {
		return "", fmt.Errorf("%w: benchmark: RESULT_FILENAME is empty", cluster.ErrBadConfig)
	}
	s := *st.Benchmark
	tag := fmt.Sprintf("%s-conc%d", sanitizeStep(spec.ResultFilename), spec.Conc)
	s.Name = benchPrefix + tag
	s.Output = filepath.Join(dir, "benchmark-"+tag+".out")
	// A retried attempt starts over: the result of an interrupted run is
	// not the figures of a complete one.
	if err := b.stopSteps(ctx, alloc, benchPrefix); err != nil {
		return "", err
	}
	want := fmt.Sprintf("%s_conc%d.json", spec.ResultFilename, spec.Conc)
	for _, c := range b.resultCandidates(s, want) {
		_ = os.Remove(c)
	}
	var extra []kv
	for _, k := range sortedKeys(spec.Env) {
		extra = append(extra, kv{k, spec.Env[k]})
	}
	exited := make(chan string, 1)
	if err := b.startStep(alloc, s, extra, exited); err != nil {
		return "", err
	}
	started := time.Now()
	for {
		select {
		case <-exited:
			if err := b.Check(ctx, alloc); err != nil {
				return "", err
			}
			for _, c := range b.resultCandidates(s, want) {
				if _, err := os.Stat(c); err == nil {
					return c, nil
				}
			}
			return "", fmt.Errorf("benchmark (slurm job %s) wrote no %s (looked in %s): %s", alloc.JobID, want,
				strings.Join(b.resultCandidates(s, want), ", "), tail(s.Output, 8))
		case <-ctx.Done():
			b.stopSteps(context.Background(), alloc, benchPrefix) //nolint:errcheck
			return "", ctx.Err()
		case <-time.After(b.cfg.Poll):
			if spec.Status != nil {
				spec.Status(fmt.Sprintf("benchmark running for %s: %s", time.Since(started).Round(time.Second), tail(s.Output, 1)))
			}
			if err := b.Check(ctx, alloc); err != nil {
				return "", err
			}
		}
	}
}

// resultCandidates are the host paths where the benchmark's result JSON may
// land: RESULT_DIR (a container path, translated through the mounts) and its
// conc_<N> directory, and the InferenceX workspace.
func (b *Backend) resultCandidates(s step, want string) []string {
	resultDir := ""
	for _, e := range s.Env {
		if e.K == "RESULT_DIR" {
			resultDir = e.V
		}
	}
	var out []string
	if resultDir != "" {
		if host, ok := hostPath(s.Mounts, resultDir, s.Nodes); ok {
			conc := strings.TrimSuffix(want[strings.LastIndex(want, "_conc")+len("_conc"):], ".json")
			out = append(out, filepath.Join(host, want), filepath.Join(host, "conc_"+conc, want))
		}
	}
	if ws := b.cfg.Launch.InfmaxWorkspace; ws != "" {
		out = append(out, filepath.Join(ws, want))
	}
	return out
}

// hostPath translates a container path through host->container mounts.
func hostPath(mounts []kv, p string, nodes []string) (string, bool) {
	best, bestLen := "", -1
	for _, m := range mounts {
		if (p == m.V || strings.HasPrefix(p, strings.TrimSuffix(m.V, "/")+"/")) && len(m.V) > bestLen {
			node := ""
			if len(nodes) > 0 {
				node = nodes[0]
			}
			best, bestLen = filepath.Join(NodePath(m.K, node), strings.TrimPrefix(p, m.V)), len(m.V)
		}
	}
	return best, bestLen >= 0
}

func sanitizeStep(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

var _ cluster.Benchmarker = (*Backend)(nil)
