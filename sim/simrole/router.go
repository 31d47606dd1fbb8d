package simrole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const routerProg = "python -m sglang_router.launch_router"

// RouterWorker is one worker the SGLang router was given.
type RouterWorker struct {
	URL           string
	Type          string // regular, prefill or decode (the router's worker_type)
	BootstrapPort int    // prefill only; 0: none given
}

// RouterArgs are the sglang_router.launch_router flags the simulated
// router acts on (srt-slurm's srtctl/frontends/sglang.py renders
// `--worker-urls URL...` for aggregated workers, or `--pd-disaggregation`
// with `--prefill URL [BOOTSTRAP_PORT]` and `--decode URL` per leader).
type RouterArgs struct {
	Host    string
	Port    int
	PD      bool
	Workers []RouterWorker
	Unknown []string
}

var routerKnown = map[string]bool{"worker-urls": true, "pd-disaggregation": true, "prefill": true, "decode": true, "host": true, "port": true}

// ParseRouterArgs reads the rendered router command. The router refuses a
// worker URL it cannot parse and, in PD mode, a set without prefill or
// without decode workers; a router given no worker at all would start and
// serve nothing (the real one waits for workers added through its API,
// which srt-slurm never does), so the emulation refuses it too, catching a
// launcher that dropped them.
func ParseRouterArgs(argv []string) (RouterArgs, error) {
	a := RouterArgs{Host: "127.0.0.1", Port: 30000}
	usage := func(format string, args ...any) error {
		return fmt.Errorf("%s: error: "+format, append([]any{routerProg}, args...)...)
	}
	words, ok := moduleArgs(argv, "sglang_router.launch_router")
	if !ok {
		return a, usage("no `python -m sglang_router.launch_router` in the command")
	}
	fa, err := parseFlags(words)
	if err != nil {
		return a, usage("%v", err)
	}
	host, _, err1 := fa.str(a.Host, "host")
	port, _, err2 := fa.int(a.Port, "port")
	pd, err3 := fa.flag("pd-disaggregation")
	if err := errors.Join(err1, err2, err3); err != nil {
		return a, usage("%v", err)
	}
	a.Host, a.Port, a.PD = host, port, pd
	if a.Port < 0 || a.Port > 65535 {
		return a, usage("argument --port: %d is not a port", a.Port)
	}
	checkURL := func(flag, u string) error {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Port() == "" {
			return usage("argument --%s: %q is not an http://HOST:PORT worker URL", flag, u)
		}
		return nil
	}
	for _, o := range fa.occ {
		switch o.name {
		case "worker-urls":
			for _, u := range o.values {
				if err := checkURL(o.name, u); err != nil {
					return a, err
				}
				a.Workers = append(a.Workers, RouterWorker{URL: u, Type: "regular"})
			}
		case "prefill", "decode":
			if len(o.values) == 0 || len(o.values) > 2 || (o.name == "decode" && len(o.values) != 1) {
				return a, usage("argument --%s: expected URL%s, got %d values", o.name, map[bool]string{true: " [BOOTSTRAP_PORT]"}[o.name == "prefill"], len(o.values))
			}
			if err := checkURL(o.name, o.values[0]); err != nil {
				return a, err
			}
			w := RouterWorker{URL: o.values[0], Type: o.name}
			if len(o.values) == 2 {
				bp, err := strconv.Atoi(o.values[1])
				if err != nil || bp < 1 || bp > 65535 {
					return a, usage("argument --prefill: bootstrap port %q is not a port", o.values[1])
				}
				w.BootstrapPort = bp
			}
			a.Workers = append(a.Workers, w)
		default:
			if !routerKnown[o.name] {
				a.Unknown = append(a.Unknown, o.name)
			}
		}
	}
	count := map[string]int{}
	for _, w := range a.Workers {
		count[w.Type]++
	}
	switch {
	case len(a.Workers) == 0:
		return a, usage("no workers given: pass --worker-urls URL... or --pd-disaggregation with --prefill URL and --decode URL")
	case a.PD && count["regular"] > 0:
		return a, usage("--worker-urls cannot be used with --pd-disaggregation (give --prefill and --decode)")
	case a.PD && (count["prefill"] == 0 || count["decode"] == 0):
		return a, usage("PD disaggregation mode needs at least one --prefill and one --decode worker (got %d prefill, %d decode)", count["prefill"], count["decode"])
	case !a.PD && count["regular"] != len(a.Workers):
		return a, usage("--prefill and --decode need --pd-disaggregation")
	}
	return a, nil
}

// router forwards completions to the workers it was given: round robin
// over the healthy aggregated workers, or over the healthy decode workers
// in PD mode (the simulated decode worker models its prefill side; it
// finds the prefill workers through the registry).
type router struct {
	a       RouterArgs
	hc      *http.Client
	rr      atomic.Uint64
	mu      sync.Mutex
	healthy map[string]bool
	proxies map[string]*streamingProxy
}

func runRouter(ctx context.Context, argv []string, o Options) error {
	a, err := ParseRouterArgs(argv)
	if err != nil {
		return err
	}
	if len(a.Unknown) > 0 {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: accepted and ignored %d sglang-router flags: --%v\n", len(a.Unknown), a.Unknown)
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED sglang router, pd %v, %d workers\n", a.PD, len(a.Workers))
	r := &router{a: a, hc: &http.Client{Timeout: 2 * time.Second}, healthy: map[string]bool{}, proxies: map[string]*streamingProxy{}}
	host := a.Host
	if o.BindHost != "" {
		host = o.BindHost
	}
	s, err := listenIdle("http", fmt.Sprintf("%s:%d", host, a.Port), r.handler(), frontIdleTimeout)
	if err != nil {
		return err
	}
	go r.probe(ctx)
	return serveAll(ctx, o, []*server{s}, nil)
}

// probe health-checks every worker each second, as the router does before
// it routes to one.
func (r *router) probe(ctx context.Context) {
	for {
		for _, w := range r.a.Workers {
			ok := false
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/health", nil)
			if resp, err := r.hc.Do(req); err == nil {
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			r.mu.Lock()
			r.healthy[w.URL] = ok
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *router) isHealthy(u string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.healthy[u]
}

// targets are the healthy workers completions go to.
func (r *router) targets() []RouterWorker {
	var out []RouterWorker
	for _, w := range r.a.Workers {
		if w.Type != "prefill" && r.isHealthy(w.URL) {
			out = append(out, w)
		}
	}
	return out
}

func (r *router) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "simulated": true})
	})
	// /workers is what srt-slurm polls (check_sglang_router_health): the
	// counts are of workers that passed their health check.
	mux.HandleFunc("GET /workers", func(w http.ResponseWriter, _ *http.Request) {
		workers := []map[string]any{}
		stats := map[string]int{"prefill_count": 0, "decode_count": 0, "regular_count": 0}
		for _, wk := range r.a.Workers {
			ok := r.isHealthy(wk.URL)
			e := map[string]any{"url": wk.URL, "worker_type": wk.Type, "is_healthy": ok}
			if wk.BootstrapPort > 0 {
				e["bootstrap_port"] = wk.BootstrapPort
			}
			workers = append(workers, e)
			if ok {
				stats[wk.Type+"_count"]++
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"workers": workers, "total": len(workers), "stats": stats, "simulated": true})
	})
	mux.HandleFunc("GET /v1/models", r.proxy)
	mux.HandleFunc("POST /v1/completions", r.proxy)
	mux.HandleFunc("POST /v1/chat/completions", r.proxy)
	mux.HandleFunc("POST /generate", r.proxy)
	return mux
}

func (r *router) proxy(w http.ResponseWriter, req *http.Request) {
	ts := r.targets()
	if len(ts) == 0 {
		openAIError(w, http.StatusServiceUnavailable, "no healthy worker to route to")
		return
	}
	t := ts[(r.rr.Add(1)-1)%uint64(len(ts))]
	r.mu.Lock()
	p := r.proxies[t.URL]
	if p == nil {
		u, _ := url.Parse(t.URL)
		p = newStreamingProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
		r.proxies[t.URL] = p
	}
	r.mu.Unlock()
	p.ServeHTTP(w, req)
}
