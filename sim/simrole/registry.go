package simrole

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
)

// Instance is one registered worker endpoint. The JSON is private to the
// roles (infra serves it, workers write it, the frontend reads it); what the
// outside sees is the frontend's /health (srtlaunch.FrontendHealth).
type Instance struct {
	Namespace string `json:"namespace"`
	Component string `json:"component"` // dynamo's: prefill, decode, backend, tensorrt_llm
	Endpoint  string `json:"endpoint"`  // generate
	// Mode is prefill, decode or agg: dynamo's component names differ by
	// engine (a TensorRT-LLM decode or aggregated worker is tensorrt_llm, a
	// vLLM decode worker backend), so routing and modelling read this.
	Mode       string `json:"mode,omitempty"`
	InstanceID int64  `json:"instance_id"`
	Address    string `json:"address"` // host:port the worker's leader serves on
	Model      string `json:"model"`
	TP         int    `json:"tp"`
	EP         int    `json:"ep"`
	DP         int    `json:"dp"`
	DPA        bool   `json:"dpa"`
	NNodes     int    `json:"nnodes"`
	TTLMillis  int64  `json:"ttl_ms"`
}

// mode is the instance's role in the deployment (from its component for a
// registration without Mode).
func (in Instance) mode() string {
	if in.Mode != "" {
		return in.Mode
	}
	switch in.Component {
	case "prefill":
		return "prefill"
	case "decode":
		return "decode"
	}
	return "agg"
}

// instanceID is stable per component and address, so re-registering is
// idempotent.
func instanceID(component, address string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, component+"|"+address)
	return int64(h.Sum64() >> 1)
}

const registryPath = "/sweepflow-sim/v1/instances"

// DefaultTTL is how long a registration lives without a refresh; workers
// refresh at a third of it (and retry a failed refresh at once), so a killed
// worker disappears within it. It is longer than dynamo's 10 s etcd lease:
// on the emulation every node shares one small host, and a worker busy
// simulating a thousand streams can miss a refresh by seconds, which must
// not drop it from the frontends' routing mid-benchmark.
const DefaultTTL = 30 * time.Second

// Registry is the infra role's etcd stand-in: registrations with a lease.
type Registry struct {
	mu   sync.Mutex
	byID map[int64]regEntry
	now  func() time.Time
}

type regEntry struct {
	in      Instance
	expires time.Time
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byID: map[int64]regEntry{}, now: time.Now}
}

// Handler serves GET /health (etcd's answer shape) and the private
// register/list/deregister API.
func (g *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"health": "true", "reason": "", "simulated": "true"})
	})
	mux.HandleFunc("PUT "+registryPath, func(w http.ResponseWriter, r *http.Request) {
		var in Instance
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad instance JSON: " + err.Error()})
			return
		}
		if in.Component == "" || in.Endpoint == "" || in.Address == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "component, endpoint and address are required"})
			return
		}
		if in.InstanceID == 0 {
			in.InstanceID = instanceID(in.Component, in.Address)
		}
		if in.Namespace == "" {
			in.Namespace = "dynamo"
		}
		ttl := time.Duration(in.TTLMillis) * time.Millisecond
		if ttl <= 0 {
			ttl = DefaultTTL
		}
		g.mu.Lock()
		g.byID[in.InstanceID] = regEntry{in: in, expires: g.now().Add(ttl)}
		g.mu.Unlock()
		writeJSON(w, http.StatusOK, in)
	})
	mux.HandleFunc("DELETE "+registryPath+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		var id int64
		if _, err := fmt.Sscan(r.PathValue("id"), &id); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad id"})
			return
		}
		g.mu.Lock()
		delete(g.byID, id)
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+registryPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, g.List())
	})
	return mux
}

// List returns the live registrations ordered by component then address.
func (g *Registry) List() []Instance {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	out := make([]Instance, 0, len(g.byID))
	for id, e := range g.byID {
		if now.After(e.expires) {
			delete(g.byID, id)
			continue
		}
		out = append(out, e.in)
	}
	sortInstances(out)
	return out
}

func sortInstances(xs []Instance) {
	sort.Slice(xs, func(i, j int) bool {
		if xs[i].Component != xs[j].Component {
			return xs[i].Component < xs[j].Component
		}
		return xs[i].Address < xs[j].Address
	})
}

// RegistryClient talks to the infra role at ETCD_ENDPOINTS.
type RegistryClient struct {
	endpoints []string
	hc        *http.Client
}

// NewRegistryClient reads ETCD_ENDPOINTS (comma-separated URLs).
func NewRegistryClient(etcdEndpoints string) (*RegistryClient, error) {
	var eps []string
	for _, e := range strings.Split(etcdEndpoints, ",") {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("ETCD_ENDPOINTS: %q is not an http(s) URL", e)
		}
		eps = append(eps, e)
	}
	if len(eps) == 0 {
		return nil, errors.New("ETCD_ENDPOINTS is not set: the worker and frontend find the infra registry through it")
	}
	return &RegistryClient{endpoints: eps, hc: &http.Client{Timeout: 5 * time.Second}}, nil
}

func (c *RegistryClient) do(ctx context.Context, method, path string, body any, out any) error {
	var last error
	for _, ep := range c.endpoints {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, ep+path, rd)
		if err != nil {
			return err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			last = fmt.Errorf("%s %s%s: HTTP %d: %.200s", method, ep, path, resp.StatusCode, b)
			continue
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("%s %s%s: %v", method, ep, path, err)
			}
		}
		return nil
	}
	return fmt.Errorf("registry: %w", last)
}

// Register puts (or refreshes) an instance.
func (c *RegistryClient) Register(ctx context.Context, in Instance) (Instance, error) {
	var out Instance
	err := c.do(ctx, http.MethodPut, registryPath, in, &out)
	return out, err
}

// Deregister removes an instance.
func (c *RegistryClient) Deregister(ctx context.Context, id int64) error {
	return c.do(ctx, http.MethodDelete, fmt.Sprintf("%s/%d", registryPath, id), nil, nil)
}

// List returns the live instances.
func (c *RegistryClient) List(ctx context.Context) ([]Instance, error) {
	var out []Instance
	err := c.do(ctx, http.MethodGet, registryPath, nil, &out)
	return out, err
}

// LocalAddrTo is the local address this host uses to reach the registry:
// what a worker started with --host 0.0.0.0 advertises.
func (c *RegistryClient) LocalAddrTo(ctx context.Context) (string, error) {
	var last error
	for _, ep := range c.endpoints {
		u, _ := url.Parse(ep)
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			last = err
			continue
		}
		la := conn.LocalAddr().(*net.TCPAddr)
		conn.Close()
		return la.IP.String(), nil
	}
	return "", fmt.Errorf("registry: %w", last)
}

// HealthOf turns registrations into a dynamo frontend's /health answer.
func HealthOf(ins []Instance) srtlaunch.FrontendHealth {
	h := srtlaunch.FrontendHealth{Status: "healthy", Instances: []srtlaunch.HealthInstance{}}
	for _, in := range ins {
		h.Instances = append(h.Instances, srtlaunch.HealthInstance{
			Component: in.Component, Endpoint: in.Endpoint, InstanceID: in.InstanceID,
			Namespace: in.Namespace, Address: in.Address,
		})
	}
	return h
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Sweepflow-Simulated", "true")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// openAIError answers in the OpenAI error shape.
func openAIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"error":     map[string]any{"message": msg, "type": http.StatusText(status), "param": nil, "code": status},
		"simulated": true,
	})
}
