package simrole

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/sim/simenv"
)

// benchmarkRequired is agentic_srt.sh's check_env_vars list.
var benchmarkRequired = []string{"MODEL", "MODEL_PREFIX", "FRAMEWORK", "PRECISION", "CONC", "RESULT_FILENAME", "DURATION"}

var concRe = regexp.MustCompile(`^[1-9][0-9]*$`)

// BenchmarkPlan is what the benchmark role does, read from the environment
// agentic_srt.sh gets.
type BenchmarkPlan struct {
	BaseURL        string
	Model          string
	Concs          []int
	Duration       time.Duration // model time per point (DURATION seconds)
	ResultFilename string        // without _conc<N>
	ResultDir      string        // container path; points use <dir>/conc_<N>
	OutputDir      string        // container path of AGENTIC_OUTPUT_DIR
	TimeScale      float64
	WarmupPerLane  int
	// Seed seeds the lanes' start points and markers (simenv.EnvSeed; default
	// 42 + conc); TraceSeed generates the AgentX trace (simenv.EnvTraceSeed;
	// default 42). The perf activity passes the point's seeds, which its
	// measurement profile records.
	Seed      *int64
	TraceSeed int64
	// CutStreamsAfter is a chaos run's fault (simenv.EnvCutStreams): the
	// replay's streams are cut from this long (wall time) into it.
	CutStreamsAfter time.Duration
}

// PlanBenchmark reads the benchmark environment as agentic_srt.sh does.
func PlanBenchmark(getenv func(string) string) (BenchmarkPlan, error) {
	var p BenchmarkPlan
	var missing []string
	for _, k := range benchmarkRequired {
		if getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return p, fmt.Errorf("ERROR: required environment variable is missing: %s", strings.Join(missing, ", "))
	}
	if h := getenv("SRT_FRONTEND_HOST"); h != "" {
		port := getenv("SRT_FRONTEND_PORT")
		if port == "" {
			return p, errors.New("ERROR: required environment variable is missing: SRT_FRONTEND_PORT")
		}
		p.BaseURL = "http://" + h + ":" + port
	} else {
		p.BaseURL = "http://localhost:" + orDefault(getenv("PORT"), "8000")
	}
	p.Model = getenv("MODEL")
	for _, c := range strings.Fields(orDefault(getenv("CONC_LIST"), getenv("CONC"))) {
		if !concRe.MatchString(c) {
			return p, fmt.Errorf("ERROR: invalid agentic concurrency: %s", c)
		}
		n, _ := strconv.Atoi(c)
		p.Concs = append(p.Concs, n)
	}
	if len(p.Concs) == 0 {
		return p, errors.New("ERROR: CONC_LIST must contain at least one concurrency")
	}
	d, err := strconv.ParseFloat(getenv("DURATION"), 64)
	if err != nil || d <= 0 {
		return p, fmt.Errorf("ERROR: DURATION=%q is not a positive number of seconds", getenv("DURATION"))
	}
	p.Duration = time.Duration(d * float64(time.Second))
	p.ResultFilename = getenv("RESULT_FILENAME")
	p.ResultDir = orDefault(getenv("RESULT_DIR"), "/logs/agentic")
	ws := orDefault(getenv("INFMAX_CONTAINER_WORKSPACE"), "/infmax-workspace")
	p.OutputDir = orDefault(getenv("AGENTIC_OUTPUT_DIR"), ws)
	if p.TimeScale, err = simFloat(getenv, EnvTimeScale, 1, 1e-9); err != nil {
		return p, err
	}
	p.TraceSeed = 42
	for _, e := range []struct {
		name string
		into func(int64)
	}{{simenv.EnvSeed, func(v int64) { p.Seed = &v }}, {simenv.EnvTraceSeed, func(v int64) { p.TraceSeed = v }}} {
		if s := getenv(e.name); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return p, fmt.Errorf("%s=%q: want an integer", e.name, s)
			}
			e.into(v)
		}
	}
	if s := getenv(simenv.EnvCutStreams); s != "" {
		if p.CutStreamsAfter, err = time.ParseDuration(s); err != nil || p.CutStreamsAfter <= 0 {
			return p, fmt.Errorf("%s=%q: want a positive duration such as 4s", simenv.EnvCutStreams, s)
		}
	}
	p.WarmupPerLane = 10 // aiperf --warmup-requests-per-lane
	if strings.EqualFold(getenv("AIPERF_EXPERIMENTAL_FAST"), "true") || getenv("AIPERF_EXPERIMENTAL_FAST") == "1" {
		p.WarmupPerLane = 1
	}
	return p, nil
}

// PointFile is where the point's result lands (container path).
func (p BenchmarkPlan) PointFile(conc int) string {
	return filepath.Join(p.OutputDir, resultfile.FileName(p.ResultFilename, conc))
}

func runBenchmark(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	words, err := EntryWords(argv)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return fmt.Errorf("%w: benchmark: empty command", ErrUsage)
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED benchmark: %s runs sweepflow's load generator (AgentX replay), not aiperf\n", strings.Join(words, " "))
	p, err := PlanBenchmark(o.Getenv)
	if err != nil {
		return err
	}
	for i, conc := range p.Concs {
		if i > 0 {
			if err := waitIdle(ctx, p.BaseURL, p.TimeScale); err != nil {
				return err
			}
		}
		if err := benchmarkPoint(ctx, o, mounts, p, conc); err != nil {
			return err
		}
	}
	return nil
}

func benchmarkPoint(ctx context.Context, o Options, mounts Mounts, p BenchmarkPlan, conc int) error {
	env := func(k string) string {
		if k == "CONC" {
			return strconv.Itoa(conc)
		}
		return o.Getenv(k)
	}
	res, err := resultfile.Identity(env)
	if err != nil {
		return err
	}
	opts := loadgen.Options{
		BaseURL: p.BaseURL, Model: p.Model, Concurrency: conc,
		Trace: loadgen.DefaultTrace(p.TraceSeed), Seed: 42 + int64(conc), NumWarmups: p.WarmupPerLane,
		Duration:  time.Duration(float64(p.Duration) * p.TimeScale),
		TimeScale: p.TimeScale, ClockScale: p.TimeScale, CutStreamsAfter: p.CutStreamsAfter,
	}
	if p.Seed != nil {
		opts.Seed = *p.Seed
	}
	if m := res.Multinode; m != nil && m.NumPrefillGPU > 0 && m.NumDecodeGPU > 0 {
		opts.PrefillGPUs, opts.DecodeGPUs = m.NumPrefillGPU, m.NumDecodeGPU
	} else {
		opts.TotalGPUs = res.NumGPUs()
	}
	dir := mounts.Host(filepath.Join(p.ResultDir, fmt.Sprintf("conc_%d", conc)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Running agentic concurrency %d of: %v against %s for %s (model time)\n", conc, p.Concs, p.BaseURL, p.Duration)
	run, runErr := loadgen.Run(ctx, opts)
	if run == nil {
		return fmt.Errorf("agentic replay at concurrency %d: %w", conc, runErr)
	}
	if err := run.WriteAggregateJSON(filepath.Join(dir, "sweepflow_loadgen_aggregate.json")); err != nil {
		return err
	}
	if err := res.FromLoadgen(run); err != nil {
		return err
	}
	out := mounts.Host(p.PointFile(conc))
	if err := resultfile.Write(out, res); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Saved aggregated agentic result to %s (host %s)\n  Requests: %d successful / %d total (%d warmup, %d error dropped)\n",
		p.PointFile(conc), out, res.NumRequestsSuccess, res.NumRequestsTotal, res.RequestAccounting.RecordsWarmupDropped, res.RequestAccounting.RecordsErrorDropped)
	logErrors(o, run)
	if runErr != nil {
		return fmt.Errorf("ERROR: agentic trace replay at concurrency %d failed after writing available results: %w", conc, runErr)
	}
	if err := res.Gate(); err != nil {
		return fmt.Errorf("ERROR: agentic result at concurrency %d: %w", conc, err)
	}
	return nil
}

// waitIdle waits, between points, until the frontend reports no request in
// flight for three polls (agentic_srt.sh wait_for_agentic_servers_idle:
// 10 s polls, 1800 s limit; both scaled by the time scale).
func waitIdle(ctx context.Context, base string, scale float64) error {
	poll := max(time.Duration(10*scale*float64(time.Second)), 20*time.Millisecond)
	deadline := time.Now().Add(max(time.Duration(1800*scale*float64(time.Second)), 5*time.Second))
	hc := &http.Client{Timeout: 10 * time.Second}
	idle := 0
	for time.Now().Before(deadline) {
		active, err := frontendActive(ctx, hc, base+"/metrics")
		if err == nil && active == 0 {
			idle++
			if idle >= 3 {
				return nil
			}
		} else {
			idle = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	return errors.New("agentic servers did not drain between points")
}

func frontendActive(ctx context.Context, hc *http.Client, u string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if name, _, _ := strings.Cut(f[0], "{"); name == "dynamo_frontend_active_requests" {
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				total += v
			}
		}
	}
	return total, sc.Err()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// logErrors prints the most frequent failures of a run (status and the
// start of the message), as aiperf reports its error summary.
func logErrors(o Options, run *loadgen.Result) {
	count := map[string]int{}
	for _, recs := range [][]loadgen.RequestRecord{run.Warmups, run.Requests} {
		for _, r := range recs {
			if r.Success {
				continue
			}
			msg := r.Error
			if len(msg) > 160 {
				msg = msg[:160]
			}
			count[fmt.Sprintf("%s %d: %s", r.ErrorKind, r.Status, msg)]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return count[keys[i]] > count[keys[j]] || count[keys[i]] == count[keys[j]] && keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 5 {
			break
		}
		fmt.Fprintf(o.Stdout, "  errors: %d x %s\n", count[k], k)
	}
}
