package workers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/artifacts"
	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/local"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/gsm8k"
	"github.com/sweepflow/sweepflow/inferencex/overlay"
	"github.com/sweepflow/sweepflow/loadgen"
	"github.com/sweepflow/sweepflow/metrics"
	"github.com/sweepflow/sweepflow/results"
	"github.com/sweepflow/sweepflow/temporalx"
)

// Config is the worker's configuration, from flags (and environment
// defaults). The cluster profile says which backend serves the activities.
type Config struct {
	ClusterFile  string
	Home         string
	ResultsDSN   string
	ArtifactsURL string
	GSM8KDir     string
	EvalMode     string
	EvalLimit    int
	Thresholds   string
	StarterBin   string
	SimTimeScale float64
	SimAccuracy  float64
	PerfDuration time.Duration
	// TraceFile is the AgentX trace agentic points replay (corpus format);
	// empty: the generated default.
	TraceFile     string
	Control       bool
	MaxActivities int
	// Pollers per task kind and worker (0: DefaultPollers).
	Pollers int
	// SlurmQueueWait bounds how long a point's Slurm job may stay PENDING
	// before the point goes to the operator gate (0: no bound).
	SlurmQueueWait time.Duration

	// SimEngineFlags are extra `starter sim serve` flags of every simulated
	// engine of a local cluster (fault injection: "--error-burst-len 20").
	SimEngineFlags string
	// SimStageTime makes every stage of a simulated cluster last at least
	// this long (heartbeating), as real stages do: fault tests kill workers
	// mid-stage. 0: off.
	SimStageTime time.Duration

	// SimSlowdown multiplies the simulated engine's latencies (1.2 = a 20 %
	// slower engine): a worker-side knob, as a new engine build would be, so
	// nightly regression tests change nothing in the workflow input.
	SimSlowdown float64
	// SimCrash makes engine worker roles on an emulated Slurm partition
	// die the way a real engine does (SWEEPFLOW_SIM_CRASH: "gpu-xid@node=
	// gb200-03", "cuda-oom@job=conc64", "hang"; docs/faults.md).
	SimCrash string
	// MetricsAddr serves Prometheus /metrics when set (see Dial).
	MetricsAddr string
	// RequirePower sends a perf result whose power the gate refused to the
	// operator gate (InferenceX's REQUIRE_POWER=1; docs/energy.md).
	RequirePower bool

	cluster *config.Cluster
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Bind registers the worker's flags.
func (c *Config) Bind(fs *flag.FlagSet) {
	home := env("SWEEPFLOW_HOME", ".sweepflow")
	fs.StringVar(&c.ClusterFile, "cluster", env("SWEEPFLOW_CLUSTER", "configs/clusters/local-sim.yaml"), "cluster profile this worker serves")
	fs.StringVar(&c.Home, "home", home, "local state: ledger, artifacts, local nodes, scratch")
	fs.StringVar(&c.ResultsDSN, "results", env("SWEEPFLOW_RESULTS", ""), "results store DSN (default: SQLite file under --home)")
	fs.StringVar(&c.ArtifactsURL, "artifacts", env("SWEEPFLOW_ARTIFACTS", ""), "artifact store (default: directory under --home)")
	fs.StringVar(&c.GSM8KDir, "gsm8k-dir", env(gsm8k.EnvDir, ""), "directory with GSM8K train.jsonl and test.jsonl (default: $SWEEPFLOW_GSM8K_DIR, else the verified cache, else one verified download)")
	fs.StringVar(&c.EvalMode, "eval-mode", "lm-eval", "GSM8K prompt mode: lm-eval, inferencex or cot")
	fs.IntVar(&c.EvalLimit, "eval-limit", 0, "score only the first N GSM8K questions (0: all 1319)")
	fs.StringVar(&c.Thresholds, "thresholds", env("SWEEPFLOW_THRESHOLDS", "configs/thresholds.yaml"), "eval floors in InferenceX thresholds.yaml format")
	fs.StringVar(&c.StarterBin, "starter-bin", env("SWEEPFLOW_STARTER_BIN", ""), "starter binary the local backend runs as the simulated engine (default: next to this binary, then PATH)")
	fs.Float64Var(&c.SimTimeScale, "sim-time-scale", 1, "simulated cluster: clock of the engine (0.1 = ten times faster; high concurrency needs 1 on 2 cores, or the host falls behind the model)")
	fs.Float64Var(&c.SimAccuracy, "sim-accuracy", 0.95, "simulated cluster: probability a GSM8K answer is right")
	fs.Float64Var(&c.SimSlowdown, "sim-slowdown", 1, "simulated cluster: multiply every engine latency (1.2 = a 20% slower engine)")
	fs.StringVar(&c.SimEngineFlags, "sim-engine-flags", env("SWEEPFLOW_SIM_ENGINE_FLAGS", ""), "simulated local cluster: extra `starter sim serve` flags for every engine, e.g. engine faults \"--error-burst-start 40 --error-burst-len 30 --cut-stream-every 25\"")
	fs.StringVar(&c.SimCrash, "sim-crash", env("SWEEPFLOW_SIM_CRASH", ""), "emulated Slurm partition only: worker roles crash, e.g. gpu-xid@node=gb200-03, cuda-oom@job=conc64 or hang (comma-separated; docs/faults.md)")
	fs.DurationVar(&c.SimStageTime, "sim-stage-time", 0, "simulated clusters only: every stage lasts at least this long, heartbeating (fault tests kill workers mid-stage)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("SWEEPFLOW_METRICS_ADDR", ""), "serve Prometheus metrics on ADDR/metrics, e.g. 127.0.0.1:9464 (SDK and sweepflow metrics)")
	fs.DurationVar(&c.PerfDuration, "perf-duration", 0, "simulated clusters only: cap an agentic perf run's dispatch window (0: 20 s of engine time); real clusters always run the matrix row's duration and refuse this flag")
	fs.StringVar(&c.TraceFile, "trace", env("SWEEPFLOW_TRACE", ""), "AgentX trace (cc-traces-weka format, JSONL) agentic points replay (default: the generated AgentX-shaped trace)")
	fs.BoolVar(&c.RequirePower, "require-power", env("SWEEPFLOW_REQUIRE_POWER", "") == "1", "a perf result whose power is invalid goes to the operator gate instead of being stored power-invalid (InferenceX REQUIRE_POWER=1)")
	fs.BoolVar(&c.Control, "control", true, "also run the sweep and point workflows")
	fs.IntVar(&c.MaxActivities, "max-activities", 0, "stages this worker runs at once (0: SDK default)")
	fs.IntVar(&c.Pollers, "pollers", DefaultPollers, "workflow-task and activity-task pollers of each worker")
	fs.DurationVar(&c.SlurmQueueWait, "slurm-queue-wait", 0, "slurm clusters: a job pending longer than this goes to the operator gate (0: wait as long as the allocate stage allows)")
}

// ClusterName is the loaded profile's name (after Activities).
func (c *Config) ClusterName() string {
	if c.cluster == nil {
		return ""
	}
	return c.cluster.Name
}

// TaskQueue is the loaded profile's task-queue (after Activities): the
// queue the cluster worker polls and sweeps started with this profile use.
func (c *Config) TaskQueue() string {
	if c.cluster == nil {
		return ""
	}
	return c.cluster.TaskQueue
}

// Activities loads the cluster profile and opens the stores the stages use.
func (c *Config) Activities(ctx context.Context, log *zap.Logger) (*activities.Activities, func(), error) {
	cl, err := config.LoadCluster(c.ClusterFile)
	if err != nil {
		return nil, nil, err
	}
	// A profile naming the user's checkouts gets its recipes root composed
	// once, at start: a checkout changed later is a digest mismatch for
	// points planned from the new files, until the worker restarts.
	if cl.RecipesRoot, err = overlay.RecipesRoot(cl); err != nil {
		return nil, nil, err
	}
	c.cluster = cl
	home, err := filepath.Abs(c.Home)
	if err != nil {
		return nil, nil, err
	}
	dsn := c.ResultsDSN
	if dsn == "" {
		dsn = filepath.Join(home, "results.db")
	}
	store, err := results.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	art := c.ArtifactsURL
	if art == "" {
		art = filepath.Join(home, "artifacts")
	}
	arts, err := artifacts.Open(art)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	ev := activities.EvalConfig{Mode: gsm8k.Mode(c.EvalMode), Limit: c.EvalLimit, DefaultFloor: 0}
	// The simulator and the eval stage read the same local splits: the
	// --gsm8k-dir, else the verified cache, else one download.
	sp, err := gsm8k.Resolve(ctx, gsm8k.Source{Dir: c.GSM8KDir})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	ev.TestPath, ev.TrainPath = sp.Test, sp.Train
	if c.Thresholds != "" {
		if ev.Thresholds, err = gsm8k.LoadThresholds(c.Thresholds); err != nil {
			store.Close()
			return nil, nil, err
		}
	}
	acts := &activities.Activities{
		Store: store, Artifacts: arts, GSM8K: ev, GPUsPerNode: cl.GPUsPerNode,
		StateDir: filepath.Join(home, "state"), Logger: log,
		Load: activities.PerfConfig{Duration: c.PerfDuration, TimeScale: 1, Seed: 1},
		// Points name their recipe by path and digest; the worker reads it
		// from its own profile's root and launches it only when the bytes
		// match. Real engines are rendered from it, so Slurm requires one.
		RecipesRoot: cl.RecipesRoot, RequireRecipes: cl.Backend == config.BackendSlurm,
		Cluster: cl.Name, BadNodes: cl.BadNodes,
		Power: activities.PowerConfig{Require: c.RequirePower},
	}
	if c.TraceFile != "" {
		if acts.Load.Trace, acts.Load.TraceName, err = loadTraceFile(c.TraceFile); err != nil {
			store.Close()
			return nil, nil, err
		}
	}
	switch cl.Backend {
	case config.BackendLocal:
		if c.SimCrash != "" {
			store.Close()
			return nil, nil, fmt.Errorf("%s: --sim-crash needs an emulated Slurm partition (its worker roles crash); the local backend has none: use --sim-engine-flags",
				strictyaml.DisplayPath(c.ClusterFile))
		}
		if !cl.Simulated() {
			// A real engine on this host (serve-command): real time, the
			// row's duration, no simulator knobs.
			if err := c.refuseSimOnly(cl); err != nil {
				store.Close()
				return nil, nil, err
			}
			b, err := local.New(local.Config{
				Root: filepath.Join(home, "local-cluster"), Nodes: cl.Nodes, NodePrefix: cmp.Or(cl.GPUType, "node") + "-",
				SharedRoot: cl.SharedRoot, NodeLocalRoot: cl.NodeLocalRoot, ServeCommand: cl.ServeCommand,
			})
			if err != nil {
				store.Close()
				return nil, nil, err
			}
			acts.Backend = b
			acts.Simulated, acts.Engine = false, "local/"+filepath.Base(cl.ServeCommand[0])
			if local.HasNVIDIASMI() {
				// GPUs on this host: perf reads their power (docs/energy.md).
				acts.Power.Source = energy.SourceNVML
			}
			break
		}
		b, err := c.localBackend(cl, home, ev.TestPath)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		acts.Backend = b
		acts.Simulated, acts.Engine = true, "simulator"
		// The simulated engine runs on a scaled clock; so do perf durations
		// and trace think times, or a 3600 s point would take an hour.
		acts.Load.TimeScale = c.SimTimeScale
		if acts.Load.Duration == 0 {
			acts.Load.Duration = time.Duration(20 * c.SimTimeScale * float64(time.Second))
		}
	case config.BackendSlurm:
		if err := c.refuseSimOnly(cl); err != nil {
			store.Close()
			return nil, nil, err
		}
		b, err := c.slurmBackend(cl, ev.TestPath)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		acts.Backend = b
		acts.PerfClient = cl.PerfClient
		acts.Containers = cl.Containers
		// A telemetry recipe's collector files give perf its power.
		acts.Power.Source = energy.SourceDCGM
		if cl.Simulated() {
			// Emulated partition: the roles run the simulator on its
			// scaled clock, so perf windows and think times scale too.
			acts.Simulated, acts.Engine = true, "simulator"
			acts.Load.TimeScale = c.SimTimeScale
			if acts.Load.Duration == 0 {
				acts.Load.Duration = time.Duration(20 * c.SimTimeScale * float64(time.Second))
			}
		} else {
			// Real engines: the matrix row's duration, real time.
			acts.Simulated, acts.Engine = false, "sweepflow-launch/"+cl.Runtime
		}
	default:
		store.Close()
		return nil, nil, fmt.Errorf("%s: backend %q is not served by this worker yet", strictyaml.DisplayPath(c.ClusterFile), cl.Backend)
	}
	return acts, func() { store.Close() }, nil
}

// refuseSimOnly rejects simulator-only settings on a cluster whose engines
// are real: they would silently shorten or rescale real measurements.
func (c *Config) refuseSimOnly(cl *config.Cluster) error {
	if cl.Simulated() {
		return nil
	}
	var bad []string
	if c.SimTimeScale != 1 {
		bad = append(bad, fmt.Sprintf("--sim-time-scale %g", c.SimTimeScale))
	}
	if c.PerfDuration != 0 {
		bad = append(bad, "--perf-duration "+c.PerfDuration.String())
	}
	if c.SimEngineFlags != "" {
		bad = append(bad, "--sim-engine-flags")
	}
	if c.SimStageTime != 0 {
		bad = append(bad, "--sim-stage-time "+c.SimStageTime.String())
	}
	if c.SimSlowdown != 1 {
		bad = append(bad, fmt.Sprintf("--sim-slowdown %g", c.SimSlowdown))
	}
	if c.SimAccuracy != 0.95 {
		bad = append(bad, fmt.Sprintf("--sim-accuracy %g", c.SimAccuracy))
	}
	if c.SimCrash != "" {
		bad = append(bad, "--sim-crash")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: cluster %s runs real engines: %s only apply to simulated clusters (perf runs the matrix row's duration, bring-up the recipe's health_check budget)",
			strictyaml.DisplayPath(c.ClusterFile), cl.Name, strings.Join(bad, ", "))
	}
	return nil
}

func (c *Config) localBackend(cl *config.Cluster, home, gsm8kTest string) (cluster.Backend, error) {
	bin, err := c.starterBinary()
	if err != nil {
		return nil, err
	}
	shared, nodeLocal := cl.SharedRoot, cl.NodeLocalRoot
	if shared == "" {
		shared = filepath.Join(home, "shared")
	}
	if nodeLocal == "" {
		nodeLocal = filepath.Join(home, "nodes")
	}
	serve := []string{bin, "sim", "serve", "--listen", "{listen}", "--deployment", "{deployment}",
		"--gpus-per-node", "{gpus_per_node}", "--model", "{model}",
		"--time-scale", strconv.FormatFloat(c.SimTimeScale, 'f', -1, 64),
		"--accuracy", strconv.FormatFloat(c.SimAccuracy, 'f', -1, 64)}
	if c.SimSlowdown > 0 && c.SimSlowdown != 1 {
		serve = append(serve, "--slowdown", strconv.FormatFloat(c.SimSlowdown, 'f', -1, 64))
	}
	if gsm8kTest != "" {
		serve = append(serve, "--gsm8k", gsm8kTest)
	}
	serve = append(serve, strings.Fields(c.SimEngineFlags)...)
	return local.New(local.Config{
		Root: filepath.Join(home, "local-cluster"), Nodes: cl.Nodes, NodePrefix: "gb200-",
		SharedRoot: shared, NodeLocalRoot: nodeLocal, ServeCommand: serve,
	})
}

func (c *Config) starterBinary() (string, error) {
	if c.StarterBin != "" {
		return filepath.Abs(c.StarterBin)
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "starter"); isExec(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("starter"); err == nil {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("local backend: cannot find the starter binary (the simulated engine); build it next to the worker or pass --starter-bin")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Dial connects to Temporal with temporalx.ClientOptions (and so the payload
// codec when a key is configured). With MetricsAddr set, the client's metrics
// handler feeds a Prometheus registry served on MetricsAddr/metrics; the
// worker interceptor (workers.Start) adds sweepflow's own metrics to it.
// stop closes the client and the metrics server.
func (c *Config) Dial(log *zap.Logger) (cl client.Client, stop func(), err error) {
	opts, err := temporalx.ClientOptions(log)
	if err != nil {
		return nil, nil, err
	}
	stopMetrics := func() {}
	if c.MetricsAddr != "" {
		reg, err := metrics.New(log, 0)
		if err != nil {
			return nil, nil, err
		}
		addr, stopSrv, err := reg.Serve(c.MetricsAddr)
		if err != nil {
			return nil, nil, err
		}
		opts.MetricsHandler = reg.SDKHandler()
		stopMetrics = func() { stopSrv(); _ = reg.Close() }
		if log != nil {
			log.Info("serving metrics", zap.String("url", "http://"+addr+"/metrics"))
		}
	}
	cl, err = client.Dial(opts)
	if err != nil {
		stopMetrics()
		return nil, nil, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	return cl, func() { cl.Close(); stopMetrics() }, nil
}

// loadTraceFile reads an AgentX trace and names it by file name and content
// hash, so results measured on different traces never stand in for each
// other.
func loadTraceFile(path string) ([]loadgen.Trace, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--trace: %v", err)
	}
	tr, err := loadgen.ParseTrace(bytes.NewReader(b), path)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return tr, filepath.Base(path) + "@" + hex.EncodeToString(sum[:6]), nil
}
