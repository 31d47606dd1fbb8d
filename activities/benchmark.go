package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
)

// benchmarkEnv is the environment InferenceX's benchmark-multinode template
// gives the recipe's benchmark (research/inferencex.md §3.2, §3.5): every
// scalar input of the matrix row upper-cased (model-prefix -> MODEL_PREFIX),
// the prefill/decode worker shape, and CONC, DURATION, RESULT_FILENAME,
// IS_MULTINODE for this point.
func benchmarkEnv(p PointSpec, resultFilename string) (map[string]string, error) {
	env := map[string]string{}
	if len(p.Row) > 0 {
		var row map[string]any
		if err := json.Unmarshal(p.Row, &row); err != nil {
			return nil, fmt.Errorf("%w: point %s: matrix row: %v", cluster.ErrBadConfig, p.PointID, err)
		}
		for k, v := range row {
			name := strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
			switch x := v.(type) {
			case map[string]any:
				if k != "prefill" && k != "decode" {
					continue
				}
				for wk, wv := range x {
					wname := map[string]string{"num-worker": "NUM_WORKERS", "pp": "PP_SIZE"}[wk]
					if wname == "" {
						wname = strings.ToUpper(strings.ReplaceAll(wk, "-", "_"))
					}
					if s, ok := scalarEnv(wv); ok {
						env[name+"_"+wname] = s
					}
				}
			default:
				if s, ok := scalarEnv(x); ok {
					env[name] = s
				}
			}
		}
	}
	env["CONC"] = strconv.Itoa(p.Conc)
	env["CONC_LIST"] = strconv.Itoa(p.Conc)
	if p.DurationSec > 0 {
		env["DURATION"] = strconv.Itoa(p.DurationSec)
	}
	env["MODEL"] = p.Model
	env["MODEL_PREFIX"] = p.ModelPrefix
	env["RESULT_FILENAME"] = resultFilename
	env["IS_MULTINODE"] = "true"
	if p.ISL == 0 && p.OSL == 0 {
		env["IS_AGENTIC"] = "1"
	}
	return env, nil
}

func scalarEnv(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case []any:
		var parts []string
		for _, e := range x {
			s, ok := scalarEnv(e)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " "), true
	}
	return "", false
}

// ixAgenticResult is the part of InferenceX's per-point agentic result
// (<RESULT_FILENAME>_conc<N>.json, research/inferencex.md §5.2) the ledger
// keeps. Latencies are in seconds.
type ixAgenticResult struct {
	NumRequestsTotal      int `json:"num_requests_total"`
	NumRequestsSuccessful int `json:"num_requests_successful"`
	RequestMetrics        struct {
		Latency    map[string]map[string]float64 `json:"latency"`
		Throughput struct {
			PerGPU map[string]float64 `json:"per_gpu"`
		} `json:"throughput"`
	} `json:"request_metrics"`
}

// readBenchmarkResult turns the benchmark's result file into the perf
// summary: the figures are InferenceX's own.
func readBenchmarkResult(path string) (PerfSummary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PerfSummary{}, err
	}
	var r ixAgenticResult
	if err := json.Unmarshal(data, &r); err != nil {
		return PerfSummary{}, fmt.Errorf("%s: %v", path, err)
	}
	if r.NumRequestsSuccessful <= 0 {
		return PerfSummary{}, fmt.Errorf("%s: num_requests_successful is %d (InferenceX's result gate needs > 0)", path, r.NumRequestsSuccessful)
	}
	lat := r.RequestMetrics.Latency
	pg := r.RequestMetrics.Throughput.PerGPU
	return PerfSummary{
		OutputTputPerGPU: pg["output_tput_tps"], TputPerGPU: pg["total_tput_tps"], InputTputPerGPU: pg["input_tput_tps"],
		Interactivity: lat["intvty"]["p50"], TTFTp90Ms: lat["ttft"]["p90"] * 1000, TPOTMedianMs: lat["tpot"]["p50"] * 1000,
		E2ELMedianMs: lat["e2el"]["p50"] * 1000, Requests: r.NumRequestsTotal, Failed: r.NumRequestsTotal - r.NumRequestsSuccessful,
	}, nil
}

// perfBenchmark runs the recipe's benchmark process on the cluster as
// InferenceX's launcher would and reads its result into the ledger.
func (a *Activities) perfBenchmark(ctx context.Context, in StageInput, hb *heartbeater) (PerfSummary, error) {
	p := in.Point
	bm, ok := a.Backend.(cluster.Benchmarker)
	if !ok {
		return PerfSummary{}, classify(fmt.Errorf("%w: perf-client benchmark: the %s backend cannot run the recipe's benchmark", cluster.ErrBadConfig, a.Backend.Name()))
	}
	rf := sanitize(p.PointID)
	env, err := benchmarkEnv(p, rf)
	if err != nil {
		return PerfSummary{}, classify(err)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	path, err := bm.RunBenchmark(ctx, toCluster(in.Alloc), cluster.Server{URL: in.Endpoint.URL, Handle: in.Endpoint.Handle},
		cluster.BenchmarkSpec{RecipePath: p.RecipePath, Env: env, ResultFilename: rf, Conc: p.Conc,
			Status: func(s string) { hb.set(loadProgress{Phase: "perf: " + s}) }})
	if err != nil {
		return PerfSummary{}, classify(err)
	}
	out, err := readBenchmarkResult(path)
	if err != nil {
		return PerfSummary{}, classify(fmt.Errorf("%w: benchmark result: %v", cluster.ErrBadConfig, err))
	}
	out.Simulated = a.Simulated
	if out.AggregateURI, err = a.putArtifact(ctx, path); err != nil {
		return PerfSummary{}, classify(err)
	}
	if err := a.putStage(ctx, p, StagePerf, out, []string{out.AggregateURI}, out.Simulated, nil); err != nil {
		return PerfSummary{}, classify(err)
	}
	a.log(ctx).Info("perf done (recipe benchmark)", zap.String("result", path), zap.Strings("env", keys),
		zap.Float64("output_tput_per_gpu", out.OutputTputPerGPU), zap.Bool("simulated", out.Simulated))
	return out, nil
}
