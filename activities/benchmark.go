package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// benchmarkEnv is the environment InferenceX's benchmark-multinode template
// and GB200 launcher give the recipe's benchmark: every scalar input of the matrix row upper-cased
// (model-prefix -> MODEL_PREFIX); the prefill/decode worker shape as
// PREFILL_*/DECODE_* (NUM_WORKERS, TP, EP, DP_ATTN, PP_SIZE, DCP_SIZE,
// PCP_SIZE) and each of their additional-settings exported as the launcher
// exports them; kv-offload-backend as KV_OFFLOAD_BACKEND (its name) plus
// KV_OFFLOAD_BACKEND_METADATA (the object as JSON), router as
// ROUTER_METADATA; KV_OFFLOADING "none" when the row has none; and CONC,
// DURATION, RESULT_FILENAME, IS_MULTINODE for this point.
func benchmarkEnv(p point.Spec, resultFilename string) (map[string]string, error) {
	env := map[string]string{}
	if len(p.Row) > 0 {
		var row map[string]any
		if err := json.Unmarshal(p.Row, &row); err != nil {
			return nil, fmt.Errorf("%w: point %s: matrix row: %v", cluster.ErrBadConfig, p.PointID, err)
		}
		keys := make([]string, 0, len(row))
		for k := range row {
			keys = append(keys, k)
		}
		sort.Strings(keys) // additional-settings of prefill, then decode, win in that order
		for _, k := range keys {
			v := row[k]
			name := strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
			switch x := v.(type) {
			case map[string]any:
				switch k {
				case "prefill", "decode":
					for wk, wv := range x {
						if wk == "additional-settings" {
							for _, kv := range settingsList(wv) {
								if key, val, ok := strings.Cut(kv, "="); ok && key != "" {
									env[key] = val
								}
							}
							continue
						}
						wname := map[string]string{"num-worker": "NUM_WORKERS", "pp": "PP_SIZE"}[wk]
						if wname == "" {
							wname = strings.ToUpper(strings.ReplaceAll(wk, "-", "_"))
						}
						if s, ok := scalarEnv(wv); ok {
							env[name+"_"+wname] = s
						}
					}
				case "kv-offload-backend", "router":
					meta, err := json.Marshal(x)
					if err != nil {
						return nil, fmt.Errorf("%w: point %s: matrix row %s: %v", cluster.ErrBadConfig, p.PointID, k, err)
					}
					env[name+"_METADATA"] = string(meta)
					if k == "kv-offload-backend" {
						if n, ok := x["name"].(string); ok {
							env[name] = n
						}
					}
				}
			default:
				if s, ok := scalarEnv(x); ok {
					env[name] = s
				}
			}
		}
	}
	if env["KV_OFFLOADING"] == "" {
		env["KV_OFFLOADING"] = "none"
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

// settingsList reads an additional-settings list ("KEY=VALUE" strings).
func settingsList(v any) []string {
	xs, _ := v.([]any)
	var out []string
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
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

// readBenchmarkResult turns the benchmark's per-point result file
// (resultfile: InferenceX's own format) into the perf summary: the figures
// are InferenceX's own. A file that cannot be read is err; a file that
// fails the InferenceX workflow's gate (no successful request, more than
// 10 % failed) is gate, which a fresh attempt may pass.
func readBenchmarkResult(path string) (sum point.PerfSummary, gate, err error) {
	r, err := resultfile.Read(path)
	if err != nil {
		return point.PerfSummary{}, nil, err
	}
	if gate := r.Gate(); gate != nil {
		return point.PerfSummary{}, fmt.Errorf("%s: %w", path, gate), nil
	}
	sum = r.Perf()
	ev := r.Evidence()
	sum.Evidence = &ev
	return sum, nil, nil
}

// benchmarkPlan is what the recipe's benchmark must show it measured: a
// finished call per lane over the DURATION it was given (model seconds).
func (a *Activities) benchmarkPlan(p point.Spec, env map[string]string) point.PerfPlan {
	plan := point.PerfPlan{Scenario: p.Profile.Scenario, ISL: p.ISL, OSL: p.OSL, ClockScale: 1}
	if a.Simulated {
		plan.ClockScale = a.clockScale()
	}
	if p.ISL > 0 && p.OSL > 0 {
		plan.RangeRatio = fixedRangeRatio
	} else {
		plan.Scenario, plan.Lanes = loadgen.ScenarioAgentic, max(p.Conc, 1)
	}
	if d, err := strconv.Atoi(env["DURATION"]); err == nil && d > 0 {
		// The file's window runs from the first send to the last response:
		// the first measured call keeps its recorded idle gap and lanes idle
		// at the deadline send nothing more, each up to AgentX's gap cap.
		plan.WindowSec = max(float64(d)-2*loadgen.DefaultIdleGapCap.Seconds(), 0)
	}
	return plan
}

// perfBenchmark runs the recipe's benchmark process on the cluster as
// InferenceX's launcher would and reads its result into the ledger.
func (a *Activities) perfBenchmark(ctx context.Context, in StageInput, hb *heartbeater, flushed bool, refused int, cut time.Duration) (point.PerfSummary, error) {
	p := in.Point
	bm, ok := a.Backend.(cluster.Benchmarker)
	if !ok {
		return point.PerfSummary{}, classify(fmt.Errorf("%w: perf-client benchmark: the %s backend cannot run the recipe's benchmark", cluster.ErrBadConfig, a.Backend.Name()))
	}
	rf := sanitize(p.PointID)
	env, err := benchmarkEnv(p, rf)
	if err != nil {
		return point.PerfSummary{}, classify(err)
	}
	// The benchmark asks for the model the deployment serves; InferenceX's
	// recipes serve MODEL itself, a TensorRT-LLM worker its directory name.
	env["MODEL"] = servedModel(p, in.Endpoint)
	if d := a.simulatedDuration(p); d > 0 {
		env["DURATION"] = strconv.Itoa(d)
	}
	if a.Simulated {
		// The simulated benchmark role replays with the point's seeds (the
		// measurement profile records them).
		env[simenv.EnvSeed] = strconv.FormatInt(a.pointSeed(p), 10)
		env[simenv.EnvTraceSeed] = strconv.FormatInt(a.Load.Seed, 10)
	}
	if a.Simulated && cut > 0 {
		env[simenv.EnvCutStreams] = cut.String()
	}
	if a.Simulated && a.warmupPerLane() == 1 {
		// InferenceX's AIPERF_EXPERIMENTAL_FAST input: one warmup call per
		// lane instead of aiperf's ten, as the built-in load generator does
		// on simulated engines (2 x conc + 1/lane).
		env["AIPERF_EXPERIMENTAL_FAST"] = "true"
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	path, err := bm.RunBenchmark(ctx, in.Alloc, *in.Endpoint,
		cluster.BenchmarkSpec{RecipePath: p.RecipePath, RecipeDigest: p.RecipeDigest, RecipeSets: p.RecipeSets, Env: env, ResultFilename: rf, Conc: p.Conc,
			Status: func(s string) { hb.set(loadProgress{Phase: "perf: " + s, Refused: refused}) }})
	if err != nil {
		return point.PerfSummary{}, a.nodeFailure(ctx, point.StagePerf, in.Alloc, err)
	}
	out, gate, err := readBenchmarkResult(path)
	if err != nil {
		return point.PerfSummary{}, classify(fmt.Errorf("%w: benchmark result: %v", cluster.ErrBadConfig, err))
	}
	if gate != nil {
		return point.PerfSummary{}, classify(fmt.Errorf("perf: %w", gate))
	}
	out.Simulated = out.Simulated || a.Simulated
	out.Evidence.PrefixCacheFlushed = flushed
	if err := a.validate(ctx, hb, p, out, a.benchmarkPlan(p, env), refused); err != nil {
		return point.PerfSummary{}, err
	}
	if out.AggregateURI, err = a.putArtifact(ctx, path); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	if err := a.putStage(ctx, p, point.StagePerf, out, []string{out.AggregateURI}, out.Simulated, nil); err != nil {
		return point.PerfSummary{}, classify(err)
	}
	a.log(ctx).Info("perf done (recipe benchmark)", zap.String("result", path), zap.Strings("env", keys),
		zap.Float64("output_tput_per_gpu", out.OutputTputPerGPU), zap.Bool("simulated", out.Simulated))
	return out, nil
}

// simulatedDuration is DURATION (model seconds) for a simulated engine when
// the worker caps the perf window (--perf-duration, wall time on the
// simulator's scaled clock): the cap over the time scale, if it is shorter
// than the row's duration. 0 leaves the row's duration (real engines always).
func (a *Activities) simulatedDuration(p point.Spec) int {
	if !a.Simulated || a.Load.Duration <= 0 || a.Load.TimeScale <= 0 {
		return 0
	}
	d := int(math.Ceil(a.Load.Duration.Seconds() / a.Load.TimeScale))
	if p.DurationSec > 0 && d >= p.DurationSec {
		return 0
	}
	return d
}
