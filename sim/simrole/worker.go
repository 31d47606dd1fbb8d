package simrole

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/sim"
)

// WorkerArgs are the sglang (dynamo.sglang) flags the simulated worker acts
// on; every other flag is accepted and listed in Unknown.
type WorkerArgs struct {
	ModelPath, ServedModelName string
	Host                       string
	Port, NCCLPort             int
	Mode                       string // "null" (aggregated), "prefill" or "decode"
	BootstrapPort              int
	BootstrapPortSet           bool
	DistInitAddr               string
	NNodes, NodeRank           int
	TP, DP, EP, PP             int
	DPAttention                bool
	SpecAlgorithm              string
	SpecDraftTokens            int
	ContextLength              int
	// HiCacheStorage is --hicache-storage-backend: "mooncake" makes the
	// worker a Mooncake store client (MOONCAKE_MASTER and friends).
	HiCacheStorage string
	Unknown        []string
}

// Component is the dynamo component the worker registers as.
func (a WorkerArgs) Component() string {
	switch a.Mode {
	case "prefill":
		return "prefill"
	case "decode":
		return "decode"
	}
	return "backend"
}

// Model is the served model name (sglang: --served-model-name, else the
// model path).
func (a WorkerArgs) Model() string {
	if a.ServedModelName != "" {
		return a.ServedModelName
	}
	return a.ModelPath
}

// known are the flags the simulator reads (with sglang's aliases).
var workerKnown = map[string]bool{
	"model-path": true, "model": true, "served-model-name": true, "host": true, "port": true, "nccl-port": true,
	"disaggregation-mode": true, "disaggregation-bootstrap-port": true, "dist-init-addr": true, "nnodes": true,
	"node-rank": true, "tensor-parallel-size": true, "tp-size": true, "tp": true, "data-parallel-size": true,
	"dp-size": true, "dp": true, "expert-parallel-size": true, "ep-size": true, "ep": true,
	"pipeline-parallel-size": true, "pp-size": true, "enable-dp-attention": true, "speculative-algorithm": true, "speculative-algo": true,
	"speculative-num-draft-tokens": true, "context-length": true, "hicache-storage-backend": true,
}

const sglangProg = "python3 -m dynamo.sglang"

// ParseWorkerArgs reads the rendered dynamo.sglang argv (entry point
// included) and applies the checks sglang makes before it starts. Errors
// are one line, in sglang's words where sglang has them.
func ParseWorkerArgs(argv []string) (WorkerArgs, error) {
	a := WorkerArgs{Host: "127.0.0.1", Port: 30000, Mode: "null", NNodes: 1, TP: 1, DP: 1, EP: 1, PP: 1, BootstrapPort: 8998}
	usage := func(err error) error { return fmt.Errorf("%s: error: %v", sglangProg, err) }
	fa, err := parseFlags(flagsAfterEntry(argv))
	if err != nil {
		return a, usage(err)
	}
	str, num := fa.setStr, fa.setInt
	str(&a.ModelPath, "model-path", "model")
	str(&a.ServedModelName, "served-model-name")
	str(&a.Host, "host")
	num(&a.Port, "port")
	num(&a.NCCLPort, "nccl-port")
	str(&a.Mode, "disaggregation-mode")
	a.BootstrapPortSet = num(&a.BootstrapPort, "disaggregation-bootstrap-port")
	str(&a.DistInitAddr, "dist-init-addr")
	num(&a.NNodes, "nnodes")
	num(&a.NodeRank, "node-rank")
	num(&a.TP, "tensor-parallel-size", "tp-size", "tp")
	num(&a.DP, "data-parallel-size", "dp-size", "dp")
	num(&a.EP, "expert-parallel-size", "ep-size", "ep")
	num(&a.PP, "pipeline-parallel-size", "pp-size")
	str(&a.SpecAlgorithm, "speculative-algorithm", "speculative-algo") // argparse accepts the prefix, as srt-slurm's recipes use it
	num(&a.SpecDraftTokens, "speculative-num-draft-tokens")
	num(&a.ContextLength, "context-length")
	str(&a.HiCacheStorage, "hicache-storage-backend")
	a.DPAttention = fa.isSet("enable-dp-attention")
	for _, e := range fa.errs {
		if e != nil {
			return a, usage(e)
		}
	}
	for _, n := range fa.names() {
		if !workerKnown[n] {
			a.Unknown = append(a.Unknown, n)
		}
	}
	if a.ModelPath == "" {
		return a, usage(errors.New("the following arguments are required: --model-path"))
	}
	switch a.Mode {
	case "null", "prefill", "decode":
	default:
		return a, usage(fmt.Errorf("argument --disaggregation-mode: invalid choice: '%s' (choose from 'null', 'prefill', 'decode')", a.Mode))
	}
	if err := a.check(); err != nil {
		return a, err
	}
	return a, nil
}

// check mirrors the combinations sglang refuses. Sources, in
// sgl-project/sglang python/sglang/srt/server_args.py:
//   - ServerArgs.check_server_args asserts (tp_size * pp_size) % nnodes == 0
//     ("tp_size must be divisible by number of nodes") and
//     not (dp_size > 1 and nnodes != 1 and not enable_dp_attention)
//     ("multi-node data parallel is not supported unless dp attention!").
//   - DP attention splits tp_size into dp_size attention groups
//     (layers/dp_attention.py compute_dp_attention_world_info:
//     attn_tp_size = tp_size // dp_size), which needs tp % dp == 0.
//   - sizes must be positive and node_rank in [0, nnodes): torch.distributed
//     rendezvous fails otherwise (sglang has no friendlier check).
//   - nnodes > 1 without --dist-init-addr: sglang falls back to a
//     127.0.0.1 init address, which cannot join ranks on other nodes; the
//     group never forms. Refused here rather than hanging.
//   - --disaggregation-mode prefill without --disaggregation-bootstrap-port:
//     sglang itself defaults the port (8998); srt-slurm always passes it,
//     and the emulation contract refuses its absence so that a launcher
//     dropping it is caught instead of silently using the default.
func (a WorkerArgs) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("AssertionError: "+format, args...)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tp_size", a.TP}, {"dp_size", a.DP}, {"ep_size", a.EP}, {"pp_size", a.PP}, {"nnodes", a.NNodes}} {
		if f.v < 1 {
			return fail("%s must be >= 1, got %d", f.name, f.v)
		}
	}
	if a.NodeRank < 0 || a.NodeRank >= a.NNodes {
		return fail("node_rank=%d must be in [0, nnodes=%d)", a.NodeRank, a.NNodes)
	}
	if a.NNodes > 1 && a.DistInitAddr == "" {
		return fail("nnodes=%d needs --dist-init-addr (the rank-0 node's HOST:PORT) so the ranks can rendezvous", a.NNodes)
	}
	if a.DistInitAddr != "" {
		if _, p, err := net.SplitHostPort(a.DistInitAddr); err != nil || p == "" {
			return fmt.Errorf("%s: error: argument --dist-init-addr: %q is not HOST:PORT", sglangProg, a.DistInitAddr)
		}
	}
	if (a.TP*a.PP)%a.NNodes != 0 {
		return fail("tp_size must be divisible by number of nodes (tp_size=%d, pp_size=%d, nnodes=%d)", a.TP, a.PP, a.NNodes)
	}
	if a.DP > 1 && a.NNodes != 1 && !a.DPAttention {
		return fail("multi-node data parallel is not supported unless dp attention!")
	}
	if a.DPAttention && a.TP%a.DP != 0 {
		return fail("tp_size=%d must be divisible by dp_size=%d with --enable-dp-attention", a.TP, a.DP)
	}
	if a.Mode == "prefill" && !a.BootstrapPortSet {
		return fail("--disaggregation-mode prefill needs --disaggregation-bootstrap-port (the port decode workers fetch KV bootstrap info from)")
	}
	if a.Port < 0 || a.Port > 65535 {
		return fail("port must be in [0, 65535], got %d", a.Port)
	}
	return nil
}

// Acceptance is the speculative acceptance length the simulated engine
// uses. SGLANG_SIMULATE_ACC_LEN (with _METHOD match-expected and
// _TOKEN_MODE real-draft-token, as InferenceX sets them) forces it; without
// it a speculative worker uses the simulator's own acceptance (a draft
// chain whose tokens are each accepted with probability 0.75; labelled
// simulated), and a worker without speculation decodes one token a step.
func Acceptance(a WorkerArgs, getenv func(string) string) (al float64, synthetic bool, err error) {
	if s := getenv("SGLANG_SIMULATE_ACC_LEN"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 1 {
			return 0, false, fmt.Errorf("SGLANG_SIMULATE_ACC_LEN=%q: want a number >= 1", s)
		}
		if m := getenv("SGLANG_SIMULATE_ACC_METHOD"); m != "" && m != "match-expected" {
			return 0, false, fmt.Errorf("SGLANG_SIMULATE_ACC_METHOD=%q: the simulator implements match-expected only", m)
		}
		if m := getenv("SGLANG_SIMULATE_ACC_TOKEN_MODE"); m != "" && m != "real-draft-token" {
			return 0, false, fmt.Errorf("SGLANG_SIMULATE_ACC_TOKEN_MODE=%q: the simulator implements real-draft-token only", m)
		}
		if a.SpecAlgorithm == "" {
			// SGLang reads it in its speculative worker only; InferenceX's
			// injector sets it in every worker block, so a disaggregated
			// recipe's prefill without speculation gets it too (GB300's
			// qwen3.5 agentic disagg key) and decodes one token a step.
			return 1, false, nil
		}
		return v, true, nil
	}
	if a.SpecAlgorithm == "" {
		return 1, false, nil
	}
	return ownAcceptance(a.SpecDraftTokens), false, nil
}

// ownAcceptance is the simulator's own acceptance length for a speculative
// step of draftTokens tokens (the verified token included, as sglang's
// --speculative-num-draft-tokens counts them; at least 2): each draft token
// is accepted with probability 0.75 while the chain holds.
func ownAcceptance(draftTokens int) float64 {
	n := max(draftTokens, 2)
	const p = 0.75 // per-token acceptance of the simulator's own drafts
	return (1 - math.Pow(p, float64(n))) / (1 - p)
}

func runWorker(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	a, err := ParseWorkerArgs(argv)
	if err != nil {
		return err
	}
	if len(a.Unknown) > 0 {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: accepted and ignored %d sglang flags: --%s\n", len(a.Unknown), strings.Join(a.Unknown, " --"))
	}
	al, synthetic, err := Acceptance(a, o.Getenv)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED sglang %s worker node-rank %d/%d tp %d dp %d ep %d dp-attention %v, acceptance length %.3g (synthetic %v)\n",
		a.Component(), a.NodeRank, a.NNodes, a.TP, a.DP, a.EP, a.DPAttention, al, synthetic)
	if a.HiCacheStorage == "mooncake" {
		// SGLang's Mooncake HiCache backend reads the master and metadata
		// server from the environment srt-slurm stamps.
		st := mooncakeStore{master: o.Getenv("MOONCAKE_MASTER"), metadata: o.Getenv("MOONCAKE_TE_META_DATA_SERVER"), local: o.Getenv("MOONCAKE_LOCAL_HOSTNAME")}
		if st.master == "" {
			return fmt.Errorf("%s: error: ValueError: --hicache-storage-backend mooncake needs MOONCAKE_MASTER (backend.mooncake_kv_store)", sglangProg)
		}
		if err := joinMooncake(ctx, st, fmt.Sprintf("sglang-%s-node%d", a.Component(), a.NodeRank)); err != nil {
			return fmt.Errorf("%s: %v", sglangProg, err)
		}
		fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED Mooncake HiCache storage joined the master at %s\n", st.master)
	}
	s := a.spec()
	s.AL = al
	return runSimWorker(ctx, s, o, mounts)
}

// spec is the sglang worker as the simulated engine sees it.
func (a WorkerArgs) spec() workerSpec {
	mode := a.Mode
	if mode == "null" {
		mode = "agg"
	}
	return workerSpec{Model: a.Model(), Host: a.Host, Port: a.Port, Mode: mode, Component: a.Component(),
		GPUs: a.TP, EP: a.EP, DP: a.DP, DPA: a.DPAttention, NNodes: a.NNodes, NodeRank: a.NodeRank,
		GroupAddr: a.DistInitAddr, ContextLength: a.ContextLength}
}

// workerSpec is one engine worker (sglang, TensorRT-LLM or vLLM) as the
// simulated engine and the registry see it; each engine's role maps its own
// flags onto it.
type workerSpec struct {
	Model string
	// Host:Port is the engine listener of the group leader. Host "",
	// 0.0.0.0 or :: listens on all interfaces and advertises the address the
	// registry is reached from; Port 0 takes any free port (dynamo.trtllm
	// and dynamo.vllm serve no HTTP port of their own: the frontend reaches
	// them through the registry).
	Host      string
	Port      int
	Mode      string // prefill, decode or agg
	Component string // what the leader registers as (dynamo's component)
	// GPUs is the whole worker's GPU count (sim.Deployment's TP), EP its
	// expert parallelism, DP its attention data parallelism.
	GPUs, EP, DP int
	DPA          bool
	// NNodes > 1: NodeRank 0 leads and waits for the others on GroupAddr.
	NNodes, NodeRank int
	GroupAddr        string
	ContextLength    int
	AL               float64 // speculative acceptance length (1: none)
	// Direct: the leader is the public OpenAI server itself (`vllm serve`
	// behind frontend.type vllm): it listens on Host:Port and registers
	// nowhere, as there is no dynamo request plane.
	Direct bool
}

func runSimWorker(ctx context.Context, s workerSpec, o Options, mounts Mounts) error {
	w := &worker{s: s, o: o, mounts: mounts}
	if err := w.simConfig(); err != nil {
		return err
	}
	pctx, stopCard := context.WithCancel(ctx)
	defer stopCard()
	go postPowerCard(pctx, o, s.Mode, w.load)
	if s.NodeRank > 0 {
		return w.member(ctx)
	}
	return w.leader(ctx)
}

type worker struct {
	s      workerSpec
	o      Options
	mounts Mounts
	cfg    sim.Config
	reg    *RegistryClient

	mu    sync.Mutex
	eng   *sim.Server
	ready bool
}

func (w *worker) simConfig() error {
	g := w.o.Getenv
	ts, err := simFloat(g, EnvTimeScale, 1, 1e-9)
	if err != nil {
		return err
	}
	slow, err := simFloat(g, EnvSlowdown, 1, 1e-9)
	if err != nil {
		return err
	}
	acc, err := simFloat(g, EnvAccuracy, 0.95, 0)
	if err != nil {
		return err
	}
	gpn, err := simFloat(g, EnvGPUsPerNode, sim.DefaultGPUsPerNode, 1)
	if err != nil {
		return err
	}
	if acc > 1 {
		return fmt.Errorf("%s=%g: want a probability in [0, 1]", EnvAccuracy, acc)
	}
	w.cfg = sim.Config{
		Model: w.s.Model, TimeScale: ts, Slowdown: slow, Accuracy: acc, GSM8KPath: g(EnvGSM8K),
		AcceptanceLength: w.s.AL, ContextLength: w.s.ContextLength, Logger: w.o.Logger,
		Deployment: sim.Deployment{GPUsPerNode: int(gpn)},
	}
	engineFault(g, &w.cfg.Faults)
	return nil
}

// member joins the leader's rendezvous and stays until the leader goes
// away (exit 1, as a rank whose group broke) or ctx ends.
func (w *worker) member(ctx context.Context) error {
	sys, err := w.systemServer()
	if err != nil {
		return err
	}
	if sys != nil {
		sys.serveNow()
		defer sys.srv.Close()
	}
	conn, err := dialRetry(ctx, w.s.GroupAddr)
	if err != nil {
		return fmt.Errorf("node-rank %d: rendezvous with %s: %w", w.s.NodeRank, w.s.GroupAddr, err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "join %d %d\n", w.s.NodeRank, w.s.NNodes)
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return fmt.Errorf("node-rank %d: rendezvous with %s: %w", w.s.NodeRank, w.s.GroupAddr, err)
	}
	if strings.TrimSpace(line) != "ok" {
		return fmt.Errorf("node-rank %d: the leader at %s refused: %s", w.s.NodeRank, w.s.GroupAddr, strings.TrimSpace(line))
	}
	fmt.Fprintf(w.o.Stdout, "sweepflow-sim: node-rank %d joined the group at %s\n", w.s.NodeRank, w.s.GroupAddr)
	w.setReady()
	lost := make(chan error, 1)
	go func() {
		_, err := rd.ReadString('\n') // the leader never writes again; EOF means it is gone
		if ctx.Err() == nil {
			lost <- fmt.Errorf("node-rank %d: lost the group leader at %s (%v)", w.s.NodeRank, w.s.GroupAddr, err)
		}
	}()
	var servers []*server
	if sys != nil {
		servers = append(servers, sys)
	}
	go func() { <-ctx.Done(); conn.Close() }()
	return serveAll(ctx, w.o, servers, lost)
}

func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rendezvous accepts the nnodes-1 members on dist-init-addr; the returned
// channel reports a member leaving afterwards. A one-node worker has none.
func (w *worker) rendezvous(ctx context.Context) (<-chan error, func(), error) {
	if w.s.NNodes <= 1 {
		return nil, func() {}, nil
	}
	ln, err := net.Listen("tcp", w.s.GroupAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("rendezvous: listen %s: %w", w.s.GroupAddr, err)
	}
	fmt.Fprintf(w.o.Stdout, "sweepflow-sim: node-rank 0 waiting for %d member(s) on %s\n", w.s.NNodes-1, ln.Addr())
	go func() { <-ctx.Done(); ln.Close() }()
	joined := map[int]net.Conn{}
	closeAll := func() {
		ln.Close()
		for _, c := range joined {
			c.Close()
		}
	}
	for len(joined) < w.s.NNodes-1 {
		c, err := ln.Accept()
		if err != nil {
			closeAll()
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, fmt.Errorf("rendezvous: %w", err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		_ = c.SetReadDeadline(time.Time{})
		var rank, nn int
		if err == nil {
			_, err = fmt.Sscanf(strings.TrimSpace(line), "join %d %d", &rank, &nn)
		}
		switch {
		case err != nil:
			c.Close()
			continue
		case nn != w.s.NNodes || rank < 1 || rank >= w.s.NNodes || joined[rank] != nil:
			fmt.Fprintf(c, "refused: rank %d of %d does not fit a group of %d (ranks joined: %d)\n", rank, nn, w.s.NNodes, len(joined))
			c.Close()
			continue
		}
		fmt.Fprintf(c, "ok\n")
		joined[rank] = c
		fmt.Fprintf(w.o.Stdout, "sweepflow-sim: node-rank %d joined (%d/%d)\n", rank, len(joined)+1, w.s.NNodes)
	}
	ln.Close()
	lost := make(chan error, 1)
	for rank, c := range joined {
		go func(rank int, c net.Conn) {
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			if ctx.Err() == nil {
				select {
				case lost <- fmt.Errorf("node-rank %d left the group", rank):
				default:
				}
			}
		}(rank, c)
	}
	return lost, closeAll, nil
}

func (w *worker) leader(ctx context.Context) error {
	if w.s.Direct {
		return w.direct(ctx)
	}
	var err error
	w.reg, err = NewRegistryClient(w.o.Getenv("ETCD_ENDPOINTS"))
	if err != nil {
		return err
	}
	sys, err := w.systemServer()
	if err != nil {
		return err
	}
	if sys != nil {
		sys.serveNow()
		defer sys.srv.Close()
	}
	lost, closeAll, err := w.rendezvous(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	host := w.s.Host
	engSrv, err := listen("engine", net.JoinHostPort(host, strconv.Itoa(w.s.Port)), http.HandlerFunc(w.serveEngine))
	if err != nil {
		return err
	}
	advertise := host
	if host == "" || host == "0.0.0.0" || host == "::" {
		if advertise, err = w.reg.LocalAddrTo(ctx); err != nil {
			engSrv.ln.Close()
			return fmt.Errorf("finding the address to advertise: %w", err)
		}
	}
	_, port, _ := net.SplitHostPort(engSrv.ln.Addr().String())
	in := Instance{
		Namespace: "dynamo", Component: w.s.Component, Endpoint: "generate", Mode: w.s.Mode,
		Address: net.JoinHostPort(advertise, port), Model: w.s.Model,
		TP: w.s.GPUs, EP: w.s.EP, DP: w.s.DP, DPA: w.s.DPA, NNodes: w.s.NNodes,
		TTLMillis: DefaultTTL.Milliseconds(),
	}
	in.InstanceID = instanceID(in.Component, in.Address)
	if w.s.Mode == "prefill" {
		if err := w.buildEngine(ctx); err != nil { // a prefill leader serves its own worker
			engSrv.ln.Close()
			return err
		}
	}
	w.setReady()
	regErr := make(chan error, 1)
	rctx, stopReg := context.WithCancel(ctx)
	defer stopReg()
	go w.keepRegistered(rctx, in, regErr)
	servers := []*server{engSrv}
	if sys != nil {
		servers = append(servers, sys)
	}
	merged := make(chan error, 2)
	go func() {
		select {
		case e := <-lost:
			merged <- e
		case e := <-regErr:
			merged <- e
		case <-rctx.Done():
		}
	}()
	err = serveAll(ctx, w.o, servers, merged)
	stopReg()
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = w.reg.Deregister(dctx, in.InstanceID)
	return err
}

// direct leads a worker that is its own public server (`vllm serve`): it
// waits for its other node ranks, builds the engine and serves the OpenAI
// API on Host:Port until ctx ends or a rank leaves.
func (w *worker) direct(ctx context.Context) error {
	lost, closeAll, err := w.rendezvous(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := w.buildEngine(ctx); err != nil {
		return err
	}
	srv, err := listenIdle("engine", net.JoinHostPort(w.s.Host, strconv.Itoa(w.s.Port)), http.HandlerFunc(w.serveEngine), frontIdleTimeout)
	if err != nil {
		return err
	}
	servers := []*server{srv}
	if sys, err := w.systemServer(); err != nil {
		srv.ln.Close()
		return err
	} else if sys != nil {
		servers = append(servers, sys)
	}
	w.setReady()
	return serveAll(ctx, w.o, servers, lost)
}

// keepRegistered registers the leader and refreshes the lease; it gives up
// (failing the worker) only when the registry never answered at all for a
// minute.
func (w *worker) keepRegistered(ctx context.Context, in Instance, errc chan<- error) {
	first := true
	start := time.Now()
	for {
		_, err := w.reg.Register(ctx, in)
		switch {
		case err == nil && first:
			first = false
			fmt.Fprintf(w.o.Stdout, "sweepflow-sim: registered %s/%s instance %d at %s\n", in.Component, in.Endpoint, in.InstanceID, in.Address)
		case err != nil && first && time.Since(start) > time.Minute:
			errc <- fmt.Errorf("could not register with the registry at ETCD_ENDPOINTS=%s for a minute: %w", w.o.Getenv("ETCD_ENDPOINTS"), err)
			return
		case err != nil && !first:
			w.o.Logger.Warn("registry refresh failed", zap.Error(err))
		}
		wait := DefaultTTL / 3
		if first || err != nil {
			wait = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (w *worker) setReady() {
	w.mu.Lock()
	w.ready = true
	w.mu.Unlock()
}

// systemServer is dynamo's per-process system status server on
// DYN_SYSTEM_PORT: /health and /metrics (the engine's, on a leader).
func (w *worker) systemServer() (*server, error) {
	ps := w.o.Getenv("DYN_SYSTEM_PORT")
	if ps == "" {
		return nil, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("DYN_SYSTEM_PORT=%q is not a port", ps)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		ready := w.ready
		w.mu.Unlock()
		if !ready {
			writeJSON(rw, http.StatusServiceUnavailable, map[string]any{"status": "notready", "simulated": true})
			return
		}
		writeJSON(rw, http.StatusOK, map[string]any{"status": "ready", "simulated": true})
	})
	mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		eng := w.eng
		w.mu.Unlock()
		if eng != nil {
			eng.Handler().ServeHTTP(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(rw, "# HELP sweepflow_simulated Served by sweepflow's simulator.\n# TYPE sweepflow_simulated gauge\nsweepflow_simulated 1\n")
	})
	return listen("system", w.o.bind(port), mux)
}

// serveEngine serves the OpenAI API; a decode or aggregated leader builds
// its performance model on the first request, when the deployment's
// prefill workers have registered.
func (w *worker) serveEngine(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		writeJSON(rw, http.StatusOK, map[string]any{"status": "ok", "simulated": true})
		return
	}
	if err := w.buildEngine(r.Context()); err != nil {
		openAIError(rw, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.mu.Lock()
	eng := w.eng
	w.mu.Unlock()
	eng.Handler().ServeHTTP(rw, r)
}

func (w *worker) buildEngine(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.eng != nil {
		return nil
	}
	d, err := w.deployment(ctx)
	if err != nil {
		return err
	}
	cfg := w.cfg
	d.GPUsPerNode = cfg.Deployment.GPUsPerNode
	cfg.Deployment = d
	if cfg.GSM8KPath != "" {
		cfg.GSM8KPath = w.mounts.Host(cfg.GSM8KPath)
	}
	eng, err := sim.New(cfg)
	if err != nil {
		return fmt.Errorf("simulated engine: %w", err)
	}
	w.eng = eng
	fmt.Fprintf(w.o.Stdout, "sweepflow-sim: SIMULATED engine up: %s, model %s, AL %.3g, time scale %g (warmup requests x %g)\n", d, cfg.Model, cfg.AcceptanceLength, cfg.TimeScale, eng.Config().WarmupTimeScale)
	return nil
}

// deployment is the performance model's topology: a prefill leader models
// its own worker; an aggregated leader its own worker; a decode leader one
// decode worker (itself) fed by its share of the registered prefill workers
// (all of them when it is the only decode worker).
func (w *worker) deployment(ctx context.Context) (sim.Deployment, error) {
	s := w.s
	self := sim.Deployment{PrefillWorkers: 1, PrefillTP: s.GPUs, PrefillEP: s.EP, PrefillDPA: s.DPA,
		DecodeTP: s.GPUs, DecodeEP: s.EP, DecodeDPA: s.DPA}
	if s.Mode != "decode" {
		return self, nil
	}
	ins, err := w.reg.List(ctx)
	if err != nil {
		return sim.Deployment{}, fmt.Errorf("reading the registry: %w", err)
	}
	var prefill []Instance
	decode := 0
	for _, in := range ins {
		switch {
		case in.Endpoint != "generate":
		case in.mode() == "prefill":
			prefill = append(prefill, in)
		case in.mode() == "decode":
			decode++
		}
	}
	if len(prefill) == 0 {
		return sim.Deployment{}, errors.New("no prefill worker has registered yet: a decode worker cannot serve")
	}
	decode = max(decode, 1)
	p := prefill[0]
	return sim.Deployment{
		Disagg:         true,
		PrefillWorkers: max(1, int(math.Round(float64(len(prefill))/float64(decode)))),
		PrefillTP:      max(p.TP, 1), PrefillEP: max(p.EP, 1), PrefillDPA: p.DPA,
		DecodeWorkers: 1, DecodeTP: s.GPUs, DecodeEP: s.EP, DecodeDPA: s.DPA,
	}, nil
}

// load is the engine's load for the power board ((0, 0) before it runs).
func (w *worker) load() (int64, int64) {
	w.mu.Lock()
	eng := w.eng
	w.mu.Unlock()
	if eng == nil {
		return 0, 0
	}
	return eng.Load()
}
