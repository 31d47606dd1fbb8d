package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/sim"
)

// Targets from the acceptance criteria of the load generator.
const (
	capacityTargetChunksPerSec = 100_000
	accuracyTargetMeanPct      = 1.0
	accuracyTargetP99Ms        = 0.5
)

// capacityPoint is one measured concurrency.
type capacityPoint struct {
	Concurrency    int     `json:"concurrency"`
	TTFTms         float64 `json:"server_ttft_ms"`
	ITLms          float64 `json:"server_itl_ms"`
	Requests       int     `json:"requests"`
	Failed         int     `json:"failed"`
	Chunks         int     `json:"chunks"`
	DurationS      float64 `json:"duration_s"`
	ChunksPerSec   float64 `json:"chunks_per_s"`
	ClientTTFTms   float64 `json:"client_mean_ttft_ms"`
	RefTTFTms      float64 `json:"reference_mean_ttft_ms"` // server first flush - client send
	ServerTTFTms   float64 `json:"server_mean_ttft_ms"`    // server arrival - first flush (context)
	PreHandlerP99  float64 `json:"pre_handler_p99_ms"`     // request written -> server handler (context)
	WriteP99ms     float64 `json:"request_write_p99_ms"`
	TTFTMeanErrPct float64 `json:"ttft_mean_err_pct"`
	TTFTAbsP50ms   float64 `json:"ttft_abs_err_p50_ms"`
	TTFTAbsP99ms   float64 `json:"ttft_abs_err_p99_ms"`
	ClientITLms    float64 `json:"client_mean_itl_ms"`
	ServerITLms    float64 `json:"server_mean_itl_ms"`
	ITLMeanErrPct  float64 `json:"itl_mean_err_pct"`
	ITLAbsP50ms    float64 `json:"itl_abs_err_p50_ms"`
	ITLAbsP99ms    float64 `json:"itl_abs_err_p99_ms"`
	ChunkLagP50ms  float64 `json:"chunk_lag_p50_ms"`
	ChunkLagP99ms  float64 `json:"chunk_lag_p99_ms"`
	Unmatched      int     `json:"unmatched"`
	Simulator      string  `json:"simulator"`     // in-process, child process or external
	Pinned         bool    `json:"pinned"`        // client on CPU 0, simulator on the others
	CPUSeconds     float64 `json:"process_cpu_s"` // this process during the run (warmup included)
	// ClientCPUusPerChunk is the client's CPU per received chunk (warmup
	// included) when the simulator runs in another process.
	ClientCPUusPerChunk float64 `json:"client_cpu_us_per_chunk,omitempty"`
	Check               string  `json:"check"`
	Pass                bool    `json:"pass"`
}

// Capacity measures the load generator itself against the simulator: the
// flags of `starter bench capacity`.
type Capacity struct {
	Points          string
	TTFT            time.Duration
	OSL, ISL, Waves int
	RangeRatio      float64
	BaseURL         string
	Pin, SimProcess bool
	JSON            bool
	CPUProfile      string
	ClientProcs     int
}

// Validate reports a flag value the harness cannot run with.
func (o *Capacity) Validate() error {
	if _, err := parseCapacityPoints(o.Points); err != nil {
		return fmt.Errorf("--points: %w", err)
	}
	if o.OSL < 2 || o.ISL < 1 || o.Waves < 1 || o.RangeRatio <= 0 || o.RangeRatio > 1 {
		return errors.New("--osl must be >= 2, --isl and --waves >= 1, --random-range-ratio in (0, 1]")
	}
	return nil
}

// Run measures every point and prints them; a point that fails its check
// is an error, after the report. Validate first.
func (o *Capacity) Run(ctx context.Context, stdout, stderr io.Writer) error {
	specs, err := parseCapacityPoints(o.Points)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	if o.ClientProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.ClientProcs))
	}
	stop, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	var out []capacityPoint
	for _, sp := range specs {
		p, err := runCapacityPoint(ctx, sp, o.TTFT, o.ISL, o.OSL, o.Waves, o.RangeRatio, o.BaseURL, o.SimProcess, o.Pin)
		if err != nil {
			return err
		}
		out = append(out, p)
		if !o.JSON {
			fmt.Fprintf(stderr, "c%d: %.0f chunks/s, TTFT err %.2f%% (p99 %.3f ms), ITL err %.2f%% (p99 %.3f ms)\n",
				p.Concurrency, p.ChunksPerSec, p.TTFTMeanErrPct, p.TTFTAbsP99ms, p.ITLMeanErrPct, p.ITLAbsP99ms)
		}
	}
	if o.JSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printCapacity(stdout, out)
	}
	for _, p := range out {
		if !p.Pass {
			return fmt.Errorf("c%d %s check failed", p.Concurrency, p.Check)
		}
	}
	return nil
}

type capacitySpec struct {
	conc  int
	itl   time.Duration
	check string
}

func parseCapacityPoints(s string) ([]capacitySpec, error) {
	var out []capacitySpec
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("point %q: want conc:itl[:check]", part)
		}
		c, err := strconv.Atoi(f[0])
		if err != nil || c < 1 {
			return nil, fmt.Errorf("point %q: bad concurrency", part)
		}
		itl, err := time.ParseDuration(f[1])
		if err != nil || itl <= 0 {
			return nil, fmt.Errorf("point %q: bad ITL (e.g. 10ms)", part)
		}
		sp := capacitySpec{conc: c, itl: itl, check: "none"}
		if len(f) == 3 {
			sp.check = f[2]
		}
		switch sp.check {
		case "capacity", "accuracy", "none":
		default:
			return nil, fmt.Errorf("point %q: check must be capacity, accuracy or none", part)
		}
		out = append(out, sp)
	}
	return out, nil
}

func runCapacityPoint(ctx context.Context, sp capacitySpec, ttft time.Duration, isl, osl, waves int, ratio float64, baseURL string, simProcess, pin bool) (capacityPoint, error) {
	p := capacityPoint{Concurrency: sp.conc, TTFTms: ms(ttft), ITLms: ms(sp.itl), Check: sp.check}
	// Pinning separates the client from a simulator child for accuracy
	// points; capacity points leave both free, since the simulator alone
	// needs more than one CPU at 100k chunks/s.
	var simCPUs []int
	if pin && sp.check == "accuracy" && simProcess && baseURL == "" && runtime.NumCPU() >= 2 {
		for c := 1; c < runtime.NumCPU(); c++ {
			simCPUs = append(simCPUs, c)
		}
		if restore, ok := pinProcess([]int{0}); ok {
			defer restore()
			// One CPU: a second P would only make two threads take turns on it.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			p.Pinned = true
		} else {
			simCPUs = nil
		}
	}
	var lookup func(id string) (loadgen.ServerTimeline, bool)
	url := baseURL
	var srv *sim.Server
	switch {
	case url != "":
		p.Simulator = "external"
	case simProcess:
		p.Simulator = "child process"
		u, stop, err := startSimProcess(ctx, ttft, sp.itl, (waves+2)*sp.conc, simCPUs)
		if err != nil {
			return p, err
		}
		defer stop()
		url = u
	default:
		p.Simulator = "in-process"
		var err error
		srv, err = sim.New(sim.Config{FixedTTFT: ttft, FixedITL: sp.itl, TimelineCapacity: (waves + 2) * sp.conc})
		if err != nil {
			return p, err
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		addr := make(chan string, 1)
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServe(sctx, "127.0.0.1:0", func(a string) { addr <- a }) }()
		select {
		case a := <-addr:
			url = "http://" + a
		case err := <-errc:
			return p, fmt.Errorf("simulator: %w", err)
		}
		lookup = func(id string) (loadgen.ServerTimeline, bool) {
			tl, ok := srv.Timeline(id)
			return loadgen.ServerTimeline{ArrivalNs: tl.ArrivalNs, ChunkNs: tl.ChunkNs, ChunkTokens: tl.ChunkTokens}, ok
		}
	}
	runtime.GC()
	cpu0 := processCPU()
	res, err := loadgen.Run(ctx, loadgen.Options{
		BaseURL: url, Concurrency: sp.conc, NumPrompts: waves * sp.conc, NumWarmups: sp.conc,
		ISL: isl, OSL: osl, RandomRangeRatio: ratio, IgnoreEOS: true, Seed: 1,
	})
	if err != nil {
		return p, err
	}
	p.CPUSeconds = processCPU() - cpu0
	total := 0
	for _, set := range [][]loadgen.RequestRecord{res.Requests, res.Warmups} {
		for i := range set {
			total += len(set[i].ChunkNs)
		}
	}
	if total > 0 && p.Simulator != "in-process" {
		p.ClientCPUusPerChunk = 1e6 * p.CPUSeconds / float64(total)
	}
	if lookup == nil {
		tls, err := fetchTimelines(ctx, url)
		if err != nil {
			return p, err
		}
		lookup = func(id string) (loadgen.ServerTimeline, bool) { t, ok := tls[id]; return t, ok }
	}
	a := res.Aggregate
	p.Requests, p.Failed, p.DurationS = a.NumRequestsTotal, a.Failed, a.Duration
	for i := range res.Requests {
		p.Chunks += len(res.Requests[i].ChunkNs)
	}
	if a.Duration > 0 {
		p.ChunksPerSec = float64(p.Chunks) / a.Duration
	}
	c := loadgen.CompareTimelines(res, lookup)
	p.Unmatched = a.Completed - c.Matched + c.ChunkCountMismatch
	p.ClientTTFTms, p.RefTTFTms, p.ServerTTFTms = 1e3*c.ClientMeanTTFT, 1e3*c.RefMeanTTFT, 1e3*c.ServerMeanTTFT
	p.PreHandlerP99, p.WriteP99ms = 1e3*c.PreHandler.P99, 1e3*c.RequestWrite.P99
	p.ClientITLms, p.ServerITLms = 1e3*c.ClientMeanITL, 1e3*c.ServerMeanITL
	if c.RefMeanTTFT > 0 {
		p.TTFTMeanErrPct = 100 * (c.ClientMeanTTFT - c.RefMeanTTFT) / c.RefMeanTTFT
	}
	if c.ServerMeanITL > 0 {
		p.ITLMeanErrPct = 100 * (c.ClientMeanITL - c.ServerMeanITL) / c.ServerMeanITL
	}
	p.TTFTAbsP50ms, p.TTFTAbsP99ms = 1e3*c.TTFTAbsErr.P50, 1e3*c.TTFTAbsErr.P99
	p.ITLAbsP50ms, p.ITLAbsP99ms = 1e3*c.ITLAbsErr.P50, 1e3*c.ITLAbsErr.P99
	p.ChunkLagP50ms, p.ChunkLagP99ms = 1e3*c.ChunkLag.P50, 1e3*c.ChunkLag.P99
	abs := func(x float64) float64 { return max(x, -x) }
	switch sp.check {
	case "capacity":
		p.Pass = p.Failed == 0 && p.Unmatched == 0 && p.ChunksPerSec >= capacityTargetChunksPerSec
	case "accuracy":
		p.Pass = p.Failed == 0 && p.Unmatched == 0 &&
			abs(p.TTFTMeanErrPct) <= accuracyTargetMeanPct && abs(p.ITLMeanErrPct) <= accuracyTargetMeanPct &&
			p.TTFTAbsP99ms < accuracyTargetP99Ms && p.ITLAbsP99ms < accuracyTargetP99Ms
	default:
		p.Pass = p.Failed == 0
	}
	return p, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// processCPU is this process's user+system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// startSimProcess runs "<this binary> sim serve" in fast mode on a free
// port and returns its URL and a function that stops it.
func startSimProcess(ctx context.Context, ttft, itl time.Duration, timelines int, cpus []int) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, exe, "sim", "serve", "--listen", "127.0.0.1:0", "--fast",
		"--ttft-ms", strconv.FormatFloat(ms(ttft), 'f', -1, 64), "--itl-ms", strconv.FormatFloat(ms(itl), 'f', -1, 64),
		"--timeline-capacity", strconv.Itoa(timelines))
	cmd.Stderr = io.Discard
	// The child sizes its own runtime: drop a GOMAXPROCS meant for the client.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return "", nil, err
	}
	start := cmd.Start
	if len(cpus) > 0 {
		start = func() error { return startPinned(cmd.Start, cpus) }
	}
	if err := start(); err != nil {
		cancel()
		return "", nil, fmt.Errorf("start simulator: %w", err)
	}
	stop := func() { cancel(); _ = cmd.Wait() }
	const marker = "listening on "
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), marker); i >= 0 {
			url := strings.TrimSpace(sc.Text()[i+len(marker):])
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return url, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("simulator child process exited before listening (%s sim serve)", exe)
}

// fetchTimelines reads every stored timeline from an external simulator.
func fetchTimelines(ctx context.Context, base string) (map[string]loadgen.ServerTimeline, error) {
	url := strings.TrimRight(base, "/") + "/sim/timelines"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (is it the sweepflow simulator?)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d (is it the sweepflow simulator?)", url, resp.StatusCode)
	}
	out := map[string]loadgen.ServerTimeline{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var t struct {
			ID          string  `json:"id"`
			ArrivalNs   int64   `json:"arrival_ns"`
			ChunkNs     []int64 `json:"chunk_ns"`
			ChunkTokens []int   `json:"chunk_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("GET %s: %v", url, err)
		}
		out[t.ID] = loadgen.ServerTimeline{ArrivalNs: t.ArrivalNs, ChunkNs: t.ChunkNs, ChunkTokens: t.ChunkTokens}
	}
	return out, sc.Err()
}

func printCapacity(w io.Writer, pts []capacityPoint) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\tpinned\tITL ms\trequests\tchunks\tchunks/s\tclient us/chunk\tTTFT err %\t|dTTFT| p50/p99 ms\tITL err %\t|dITL| p50/p99 ms\tlag p50/p99 ms\tcheck\t")
	for _, p := range pts {
		res := "-"
		if p.Check != "none" {
			res = p.Check + " FAIL"
			if p.Pass {
				res = p.Check + " ok"
			}
		}
		fmt.Fprintf(tw, "%d\t%v\t%.1f\t%d\t%d\t%.0f\t%.1f\t%+.3f\t%.3f / %.3f\t%+.3f\t%.3f / %.3f\t%.3f / %.3f\t%s\t\n",
			p.Concurrency, p.Pinned, p.ITLms, p.Requests, p.Chunks, p.ChunksPerSec, p.ClientCPUusPerChunk,
			p.TTFTMeanErrPct, p.TTFTAbsP50ms, p.TTFTAbsP99ms, p.ITLMeanErrPct, p.ITLAbsP50ms, p.ITLAbsP99ms,
			p.ChunkLagP50ms, p.ChunkLagP99ms, res)
	}
	tw.Flush()
	if len(pts) > 0 {
		fmt.Fprintf(w, "simulator: %s, fast mode, TTFT %.0f ms, one token per chunk\n", pts[0].Simulator, pts[0].TTFTms)
	}
	fmt.Fprintf(w, "targets: capacity >= %d chunks/s; accuracy |mean err| <= %.0f%% and p99 |err| < %.1f ms for TTFT and ITL\n",
		capacityTargetChunksPerSec, accuracyTargetMeanPct, accuracyTargetP99Ms)
}

// startCPUProfile profiles this process into path ("": no profile) until
// stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}
