// Package simrole runs the processes srt-slurm launches, on the emulated
// Slurm partition, as simulator roles (docs: the emulation contract in
// issue 12). The launcher runs `starter sim role ROLE -- ARGV...` with the
// rendered command ARGV unchanged and its env_to_set exported; each role
// first prints the argv and environment it received (Header, ParseLog),
// then behaves like the real process as far as sweepflow and srt-slurm can
// see:
//
//   - infra (python3 /tmp/setup_head.py): an etcd-like registry over HTTP
//     on :2379 (GET /health) and a TCP listener on :4222 (nats).
//   - sglang-worker (python3 -m dynamo.sglang, python3 -m
//     sglang.launch_server): reads sglang's flags, refuses what sglang
//     refuses, joins or leads its multi-node group, registers its leader
//     with the registry and serves the simulated engine (package sim) on
//     --host:--port plus /health and /metrics on DYN_SYSTEM_PORT.
//   - trtllm-worker ([numactl ...] [trtllm-llmapi-launch] python3 -m
//     dynamo.trtllm): reads dynamo.trtllm's flags and the LLM API options
//     of its --extra-engine-args YAML (tensor/pipeline/expert parallelism,
//     attention DP, max_seq_len, speculative_config), refuses a missing or
//     malformed file and a tp x pp that is not the GPUs the step got; rank 0
//     of the step (SLURM_PROCID) serves the simulated engine on a free port
//     and registers it (prefill as "prefill", decode and aggregated as
//     "tensorrt_llm"), other ranks hold their place.
//   - vllm-worker (python3 -m dynamo.vllm): reads vLLM's parallelism,
//     data-parallel layout and --speculative-config (its synthetic
//     acceptance length when InferenceX's perf mode set one), refuses the
//     layouts vLLM refuses; the process holding DP rank 0 leads the
//     worker's nodes like the sglang worker's group and registers it.
//   - sglang-router (python -m sglang_router.launch_router): routes
//     completions round robin to the healthy workers it was given
//     (--worker-urls, or the --decode workers with --pd-disaggregation) and
//     answers /workers as srt-slurm's health check reads it.
//   - dynamo-frontend (python3 -m dynamo.frontend): /health with the
//     registered instances (srtlaunch.FrontendHealth), /v1/models, and
//     streaming proxying of completions to decode or aggregated leaders.
//   - nginx: reads its nginx.conf and proxies its listen ports to the
//     upstream servers.
//   - mooncake-master (mooncake_master): Mooncake's store master with its
//     gflags flags: the RPC port store clients connect to, the HTTP metadata
//     server and metrics (backend.mooncake_kv_store).
//   - dcgm-exporter (dcgm-exporter): /metrics with a simulated
//     DCGM_FI_DEV_POWER_USAGE per GPU of the node (telemetry dcgm-power).
//   - benchmark (agentic_srt.sh): sweepflow's load generator replays the
//     AgentX trace against the frontend and writes InferenceX's per-point
//     result file (package inferencex/resultfile).
//
// Everything a role serves says it is simulated.
package simrole

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/sim/simenv"
	"go.uber.org/zap"
)

// Role names (the cluster profile's emulation.entrypoints map to these).
const (
	RoleInfra     = "infra"
	RoleWorker    = "sglang-worker"
	RoleTRTLLM    = "trtllm-worker"
	RoleVLLM      = "vllm-worker"
	RoleRouter    = "sglang-router"
	RoleFrontend  = "dynamo-frontend"
	RoleNginx     = "nginx"
	RoleMooncake  = "mooncake-master"
	RoleDCGM      = "dcgm-exporter"
	RoleBenchmark = "benchmark"
)

// Roles lists the role names in launch order.
func Roles() []string {
	return []string{RoleInfra, RoleMooncake, RoleWorker, RoleTRTLLM, RoleVLLM, RoleFrontend, RoleRouter, RoleNginx, RoleDCGM, RoleBenchmark}
}

// The emulation's own environment (contract §3), never part of a comparison.
const (
	EnvMounts      = "SWEEPFLOW_SIM_MOUNTS"
	EnvTimeScale   = "SWEEPFLOW_SIM_TIME_SCALE"
	EnvAccuracy    = "SWEEPFLOW_SIM_ACCURACY"
	EnvSlowdown    = "SWEEPFLOW_SIM_SLOWDOWN"
	EnvGSM8K       = "SWEEPFLOW_SIM_GSM8K"
	EnvGPUsPerNode = "SWEEPFLOW_SIM_GPUS_PER_NODE"
)

// ErrUsage marks a bad role invocation (unknown role, empty argv): the
// command exits 2 on it; every other error is the role failing (exit 1).
var ErrUsage = errors.New("usage")

// Options are what a role runs with besides its argv. The zero value is the
// real thing (os environment, stdout/stderr, listening on all interfaces
// at the ports the command names); tests override addresses.
type Options struct {
	Getenv  func(string) string
	Environ []string
	Stdout  io.Writer
	Stderr  io.Writer
	Logger  *zap.Logger
	// BindHost is the host listeners bind to ("" = all interfaces, as the
	// real processes do; tests use 127.0.0.x).
	BindHost string
	// InfraHTTP and InfraNATS override the infra role's :2379 and :4222.
	InfraHTTP, InfraNATS string
	// Ready, if set, is called once a serving role listens, with what it
	// listens on by name (e.g. "http", "nats", "engine", "system").
	Ready func(addrs map[string]string)
}

func (o *Options) fill() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

func (o *Options) bind(port int) string {
	return net.JoinHostPort(o.BindHost, strconv.Itoa(port))
}

// Run prints the two header lines, then runs role with the rendered argv
// until ctx ends (serving roles) or the work is done (benchmark).
func Run(ctx context.Context, role string, argv []string, o Options) error {
	o.fill()
	known := false
	for _, r := range Roles() {
		known = known || r == role
	}
	if !known {
		return fmt.Errorf("%w: unknown role %q (roles: %s)", ErrUsage, role, strings.Join(Roles(), ", "))
	}
	if len(argv) == 0 {
		return fmt.Errorf("%w: role %s: no command after --", ErrUsage, role)
	}
	// A step of several tasks (an MPI worker across nodes) shares one
	// output file: task 0 alone writes the contract lines, so they are not
	// interleaved with its twins'.
	if p := o.Getenv("SLURM_PROCID"); p == "" || p == "0" {
		if err := Header(o.Stdout, argv, o.Environ); err != nil {
			return err
		}
	}
	mounts, err := ParseMounts(o.Getenv(EnvMounts))
	if err != nil {
		return err
	}
	if c := o.Getenv(simenv.EnvCrash); c != "" && (role == RoleWorker || role == RoleTRTLLM || role == RoleVLLM) {
		if err := crash(ctx, o.Stdout, o.Getenv, c); err != nil {
			return err // crashed, hung until stopped, or a malformed value
		}
	}
	switch role {
	case RoleInfra:
		err = runInfra(ctx, argv, o, mounts)
	case RoleWorker:
		err = runWorker(ctx, argv, o, mounts)
	case RoleTRTLLM:
		err = runTRTLLM(ctx, argv, o, mounts)
	case RoleVLLM:
		err = runVLLM(ctx, argv, o, mounts)
	case RoleFrontend:
		err = runFrontend(ctx, argv, o)
	case RoleRouter:
		err = runRouter(ctx, argv, o)
	case RoleNginx:
		err = runNginx(ctx, argv, o, mounts)
	case RoleMooncake:
		err = runMooncakeMaster(ctx, argv, o)
	case RoleDCGM:
		err = runDCGMExporter(ctx, argv, o)
	default:
		err = runBenchmark(ctx, argv, o, mounts)
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // stopped (teardown) while starting: not a failure
	}
	return err
}

// simFloat reads a SWEEPFLOW_SIM_* number (def when unset).
func simFloat(getenv func(string) string, name string, def, min float64) (float64, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < min {
		return 0, fmt.Errorf("%s=%q: want a number >= %g", name, s, min)
	}
	return v, nil
}

// server is one listener served until ctx ends.
type server struct {
	name    string
	ln      net.Listener
	srv     *http.Server
	started bool
}

// serveNow starts serving s at once (a status server that must answer
// while the role is still starting); serveAll then only reports and stops it.
func (s *server) serveNow() {
	s.started = true
	go func() { _ = s.srv.Serve(s.ln) }()
}

func listen(name, addr string, h http.Handler) (*server, error) {
	return listenIdle(name, addr, h, 5*time.Second)
}

// frontIdleTimeout is how long nginx (keepalive_timeout's default, 75 s) and
// the dynamo frontends keep an idle client connection: longer than any
// client's own idle expiry (the load generator's 4 s), so a client never
// reuses a connection the server is closing.
const frontIdleTimeout = 75 * time.Second

// listenIdle is listen with the server's keep-alive idle timeout (the
// engines: 5 s, as uvicorn).
func listenIdle(name, addr string, h http.Handler, idle time.Duration) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen %s: %w", name, addr, err)
	}
	return &server{name: name, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: idle}}, nil
}

// serveAll serves every server until ctx ends or one fails, then shuts all
// down; ready gets the bound addresses first.
func serveAll(ctx context.Context, o Options, servers []*server, extra <-chan error) error {
	addrs := map[string]string{}
	for _, s := range servers {
		addrs[s.name] = s.ln.Addr().String()
	}
	names := make([]string, 0, len(addrs))
	for n := range addrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED %s listening on %s\n", n, addrs[n])
	}
	if o.Ready != nil {
		o.Ready(addrs)
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		if s.started {
			continue
		}
		go func(s *server) {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", s.name, err)
			}
		}(s)
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	case err = <-extra:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		if e := s.srv.Shutdown(sctx); e != nil {
			_ = s.srv.Close()
		}
	}
	return err
}
