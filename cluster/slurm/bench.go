package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
)

// RunBenchmark runs the recipe's rendered benchmark process (srt-slurm's
// `benchmark.type: custom` step, e.g. InferenceX's agentic_srt.sh) against
// the running deployment, with the environment InferenceX's workflow gives
// it (spec.Env: CONC, DURATION, MODEL, RESULT_FILENAME, ...), and returns the
// path of the per-point result JSON it wrote (see resultFile).
func (b *Backend) RunBenchmark(ctx context.Context, alloc cluster.Allocation, srv cluster.Server, spec cluster.BenchmarkSpec) (string, error) {
	dir := filepath.Join(alloc.WorkDir, srv.Handle)
	st, err := readState(dir)
	if err != nil {
		return "", fmt.Errorf("%w: bring-up state: %v", cluster.ErrAllocationLost, err)
	}
	if st.Benchmark == nil {
		return "", fmt.Errorf("%w: the recipe has no benchmark process (benchmark.type custom); use perf-client: loadgen", cluster.ErrBadConfig)
	}
	if st.Benchmark.Unmapped != "" {
		return "", fmt.Errorf("%w: %s", cluster.ErrBadConfig, st.Benchmark.Unmapped)
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
	var extra []kv
	for _, k := range sortedKeys(spec.Env) {
		extra = append(extra, kv{k, spec.Env[k]})
	}
	result, err := resultFile(s, extra, spec.ResultFilename, spec.Conc)
	if err != nil {
		return "", err
	}
	if err := os.Remove(result); err != nil && !os.IsNotExist(err) {
		return "", err
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
			if _, err := os.Stat(result); err == nil {
				return result, nil
			}
			return "", fmt.Errorf("benchmark (slurm job %s) wrote no %s: %s", alloc.JobID, result, tail(s.Output, 8))
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

// resultFile is the host path of the point's result JSON, where
// agentic_srt.sh leaves it: benchmark_lib.sh's write_agentic_result_json
// writes $AGENTIC_OUTPUT_DIR/$RESULT_FILENAME.json (the per-conc
// RESULT_FILENAME, <base>_conc<N>), AGENTIC_OUTPUT_DIR defaulting to
// $INFMAX_CONTAINER_WORKSPACE (/infmax-workspace), a container path
// translated through the step's mounts.
func resultFile(s step, env []kv, resultFilename string, conc int) (string, error) {
	get := func(k string) string {
		v := ""
		for _, e := range s.Env {
			if e.K == k {
				v = e.V
			}
		}
		for _, e := range env {
			if e.K == k {
				v = e.V
			}
		}
		return v
	}
	dir := get("AGENTIC_OUTPUT_DIR")
	if dir == "" {
		if dir = get("INFMAX_CONTAINER_WORKSPACE"); dir == "" {
			dir = "/infmax-workspace"
		}
	}
	host, ok := hostPath(s.Mounts, dir, s.Nodes)
	if !ok {
		return "", fmt.Errorf("%w: benchmark: its result directory %s is not under any of its container mounts", cluster.ErrBadConfig, dir)
	}
	return filepath.Join(host, resultfile.FileName(resultFilename, conc)), nil
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
