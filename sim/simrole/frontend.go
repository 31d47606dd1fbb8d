package simrole

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// FrontendPortDefault is dynamo.frontend's default --http-port.
const FrontendPortDefault = 8000

func parseFrontend(argv []string) (int, error) {
	fa, err := parseFlags(flagsAfterEntry(argv))
	if err != nil {
		return 0, fmt.Errorf("python3 -m dynamo.frontend: error: %v", err)
	}
	port, _, err := fa.int(FrontendPortDefault, "http-port")
	if err != nil {
		return 0, fmt.Errorf("python3 -m dynamo.frontend: error: %v", err)
	}
	if port < 0 || port > 65535 {
		return 0, fmt.Errorf("python3 -m dynamo.frontend: error: argument --http-port: %d is not a port", port)
	}
	return port, nil
}

// frontend routes completions to the registered decode/aggregated leaders.
type frontend struct {
	reg    *RegistryClient
	active atomic.Int64
	total  atomic.Int64
	rr     atomic.Uint64

	mu      sync.Mutex
	cached  []Instance
	cacheAt time.Time
	cacheOK bool
	// refreshing: one request is listing the registry.
	refreshing bool
	proxies    map[string]*streamingProxy
}

func runFrontend(ctx context.Context, argv []string, o Options) error {
	port, err := parseFrontend(argv)
	if err != nil {
		return err
	}
	reg, err := NewRegistryClient(o.Getenv("ETCD_ENDPOINTS"))
	if err != nil {
		return err
	}
	f := &frontend{reg: reg, proxies: map[string]*streamingProxy{}}
	s, err := listenIdle("http", o.bind(port), f.handler(), frontIdleTimeout)
	if err != nil {
		return err
	}
	return serveAll(ctx, o, []*server{s}, nil)
}

// instances lists the registry, cached for a quarter second. One request
// refreshes the list while the others keep using the cached one, and a
// failed refresh keeps the last good list for staleFor (a dynamo frontend
// keeps its etcd watch state through a slow etcd): under a full agentic
// load, hundreds of requests per second must not each hit the registry.
func (f *frontend) instances(ctx context.Context) ([]Instance, error) {
	const fresh, staleFor = 250 * time.Millisecond, 30 * time.Second
	f.mu.Lock()
	age := time.Since(f.cacheAt)
	if f.cacheOK && (age < fresh || f.refreshing) {
		ins := f.cached
		f.mu.Unlock()
		return ins, nil
	}
	f.refreshing = true
	f.mu.Unlock()
	ins, err := f.reg.List(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshing = false
	if err != nil {
		if f.cacheOK && time.Since(f.cacheAt) < staleFor {
			return f.cached, nil
		}
		f.cacheOK = false
		return nil, err
	}
	f.cached, f.cacheAt, f.cacheOK = ins, time.Now(), true
	return ins, nil
}

// targets are the instances completions go to: decode or aggregated
// leaders' generate endpoints.
func targets(ins []Instance) []Instance {
	var out []Instance
	for _, in := range ins {
		if in.Endpoint == "generate" && in.mode() != "prefill" {
			out = append(out, in)
		}
	}
	sortInstances(out)
	return out
}

func (f *frontend) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		ins, err := f.instances(r.Context())
		if err != nil {
			h := HealthOf(nil)
			h.Status = "unhealthy"
			writeJSON(w, http.StatusServiceUnavailable, h)
			return
		}
		writeJSON(w, http.StatusOK, HealthOf(ins))
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		ins, err := f.instances(r.Context())
		if err != nil {
			openAIError(w, http.StatusServiceUnavailable, "registry unreachable: "+err.Error())
			return
		}
		seen := map[string]bool{}
		data := []map[string]any{}
		for _, in := range targets(ins) {
			if in.Model == "" || seen[in.Model] {
				continue
			}
			seen[in.Model] = true
			data = append(data, map[string]any{"id": in.Model, "object": "model", "owned_by": "sweepflow-simulated", "simulated": true})
		}
		sort.Slice(data, func(i, j int) bool { return data[i]["id"].(string) < data[j]["id"].(string) })
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "simulated": true})
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP dynamo_frontend_active_requests Requests in flight (simulated frontend).\n# TYPE dynamo_frontend_active_requests gauge\ndynamo_frontend_active_requests %d\n", f.active.Load())
		fmt.Fprintf(w, "# HELP dynamo_frontend_requests_total Requests received (simulated frontend).\n# TYPE dynamo_frontend_requests_total counter\ndynamo_frontend_requests_total %d\n", f.total.Load())
		fmt.Fprintf(w, "# HELP sweepflow_simulated Served by sweepflow's simulator.\n# TYPE sweepflow_simulated gauge\nsweepflow_simulated 1\n")
	})
	mux.HandleFunc("POST /v1/chat/completions", f.proxy)
	mux.HandleFunc("POST /v1/completions", f.proxy)
	return mux
}

// pick chooses a worker: the X-Dynamo-Session-ID header keeps a session on
// one worker (as dynamo's session affinity does), else round robin.
func (f *frontend) pick(r *http.Request, ts []Instance) Instance {
	if sid := r.Header.Get("X-Dynamo-Session-ID"); sid != "" {
		h := fnv.New64a()
		_, _ = io.WriteString(h, sid)
		return ts[h.Sum64()%uint64(len(ts))]
	}
	return ts[(f.rr.Add(1)-1)%uint64(len(ts))]
}

func (f *frontend) proxy(w http.ResponseWriter, r *http.Request) {
	f.total.Add(1)
	f.active.Add(1)
	defer f.active.Add(-1)
	ins, err := f.instances(r.Context())
	if err != nil {
		openAIError(w, http.StatusServiceUnavailable, "registry unreachable: "+err.Error())
		return
	}
	ts := targets(ins)
	if len(ts) == 0 {
		openAIError(w, http.StatusServiceUnavailable, "no decode or aggregated worker has registered")
		return
	}
	f.reverseProxy(f.pick(r, ts).Address).ServeHTTP(w, r)
}

func (f *frontend) reverseProxy(addr string) *streamingProxy {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.proxies[addr]; p != nil {
		return p
	}
	p := newStreamingProxy(&url.URL{Scheme: "http", Host: addr})
	f.proxies[addr] = p
	return p
}

// proxyTransport is the proxies' client side. Its idle connections expire
// before the roles' servers drop them (IdleTimeout 5 s): with Go's default
// 90 s a proxy reuses a connection the upstream is closing, and the request
// fails with EOF (seen at low concurrency, where agentic think times leave
// connections idle for seconds).
var proxyTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        4096,
	MaxIdleConnsPerHost: 1024,
	IdleConnTimeout:     4 * time.Second,
}

// maxProxyBody bounds a request body a proxy buffers (srt-slurm's nginx.conf
// sets client_max_body_size 0, no limit; this only guards memory).
const maxProxyBody = 256 << 20

// streamingProxy forwards to one upstream: it buffers the whole request
// body, then streams the response through.
//
// Buffering is what the real hops do (nginx's proxy_request_buffering is on
// by default; the dynamo frontend parses the JSON before routing it), and it
// is required with Go's HTTP/1 server: when the upstream answers as soon as
// it has read Content-Length bytes, the proxy writes the response header
// before its transport has read EOF from the inbound body; writing the
// header makes the server drain and close that body, the transport's final
// read (checking the body is not longer than declared) then fails with
// "http: invalid Read on closed Body", and the transport closes the upstream
// connection under the response it is streaming (golang/go#40747). The
// client sees "unexpected EOF" mid-stream, or "Post ...: EOF" when no byte
// was relayed yet. Fast answers make the race likely: the simulated engine
// at c1, with no queue, answers within a millisecond.
type streamingProxy struct {
	rp *httputil.ReverseProxy
}

// newStreamingProxy forwards to target, flushing every write so SSE
// chunks pass through as they come.
func newStreamingProxy(target *url.URL) *streamingProxy {
	return &streamingProxy{rp: &httputil.ReverseProxy{
		Transport: proxyTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			openAIError(w, http.StatusBadGateway, fmt.Sprintf("upstream %s: %v", target.Host, err))
		},
	}}
}

func (p *streamingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := bufferBody(r); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			openAIError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
			return
		}
		if r.Context().Err() == nil {
			openAIError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		}
		return
	}
	p.rp.ServeHTTP(w, r)
}

// bufferBody reads r's whole body and replaces it with a rewindable copy
// (GetBody also lets the transport resend a request that failed on a reused
// connection before any byte was written, as nginx retries a failed cached
// upstream connection).
func bufferBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxProxyBody))
	r.Body.Close()
	if err != nil {
		return err
	}
	r.ContentLength = int64(len(b))
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	if len(b) == 0 {
		r.Body, r.GetBody = http.NoBody, nil
	}
	return nil
}
