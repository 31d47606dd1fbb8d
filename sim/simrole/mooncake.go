package simrole

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Mooncake store master (kvcache-ai/Mooncake mooncake-store/src/
// master.cpp), as srt-slurm launches it for backend.mooncake_kv_store:
// gflags flags, the RPC port workers connect to, the embedded HTTP metadata
// server (GET/PUT/DELETE /metadata?key=K) the transfer engines exchange
// segment descriptors through, and the metrics server.

// mooncakeFlag is one gflags flag of mooncake_master and its type.
type mooncakeFlag struct{ kind, def string }

// mooncakeFlags are the master's gflags (master.cpp DEFINE_*); gflags
// refuses any other flag and any value its type cannot parse.
var mooncakeFlags = map[string]mooncakeFlag{
	"config_path": {"string", ""}, "port": {"int32", "50051"}, "max_threads": {"int32", "4"},
	"enable_metric_reporting": {"bool", "true"}, "metrics_port": {"int32", "9003"},
	"default_kv_lease_ttl": {"uint64", "5000"}, "default_kv_soft_pin_ttl": {"uint64", "1800000"},
	"allow_evict_soft_pinned_objects": {"bool", "true"}, "eviction_ratio": {"double", "0.05"},
	"eviction_high_watermark_ratio": {"double", "0.95"}, "rpc_thread_num": {"int32", "0"}, "rpc_port": {"int32", "0"},
	"rpc_address": {"string", "0.0.0.0"}, "rpc_conn_timeout_seconds": {"int32", "0"}, "rpc_enable_tcp_no_delay": {"bool", "true"},
	"enable_ha": {"bool", "false"}, "enable_offload": {"bool", "false"}, "etcd_endpoints": {"string", ""},
	"client_ttl": {"int64", "10"}, "root_fs_dir": {"string", ""}, "global_file_segment_size": {"int64", "0"},
	"cluster_id": {"string", "mooncake_cluster"}, "memory_allocator": {"string", "offset"},
	"allocation_strategy": {"string", "random"}, "enable_http_metadata_server": {"bool", "false"},
	"http_metadata_server_port": {"int32", "8080"}, "http_metadata_server_host": {"string", "0.0.0.0"},
	"put_start_discard_timeout_sec": {"uint64", "30"}, "put_start_release_timeout_sec": {"uint64", "600"},
	"enable_disk_eviction": {"bool", "true"}, "quota_bytes": {"uint64", "0"},
	"max_total_finished_tasks": {"uint32", "10000"}, "max_total_pending_tasks": {"uint32", "10000"},
	"max_total_processing_tasks": {"uint32", "10000"}, "pending_task_timeout_sec": {"uint64", "300"},
	"processing_task_timeout_sec": {"uint64", "300"}, "cxl_path": {"string", ""}, "cxl_size": {"uint64", "0"},
	"enable_cxl": {"bool", "false"},
}

// MooncakeMasterArgs are the master's settings the simulation acts on.
type MooncakeMasterArgs struct {
	RPCPort, MetadataPort, MetricsPort int
	MetadataServer, Metrics            bool
	Values                             map[string]string // every flag, defaults filled in
}

// ParseMooncakeMaster reads `mooncake_master --flag=value ...` as gflags
// does: -flag and --flag alike, a bool flag alone or as --noflag, and
// "ERROR: ..." for an unknown flag or a value its type refuses.
func ParseMooncakeMaster(argv []string) (MooncakeMasterArgs, error) {
	a := MooncakeMasterArgs{Values: map[string]string{}}
	for k, f := range mooncakeFlags {
		a.Values[k] = f.def
	}
	if len(argv) == 0 || !strings.HasSuffix(argv[0], "mooncake_master") {
		return a, fmt.Errorf("mooncake_master: not a mooncake_master command: %q", strings.Join(argv, " "))
	}
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if !strings.HasPrefix(w, "-") {
			continue // gflags leaves positional arguments to the program, which ignores them
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f, ok := mooncakeFlags[name]
		if !ok && !hasVal && strings.HasPrefix(name, "no") && mooncakeFlags[name[2:]].kind == "bool" {
			name, f, ok, val, hasVal = name[2:], mooncakeFlags[name[2:]], true, "false", true
		}
		if !ok {
			return a, fmt.Errorf("ERROR: unknown command line flag '%s'", name)
		}
		if !hasVal {
			if f.kind == "bool" {
				val = "true"
			} else {
				if i+1 >= len(argv) {
					return a, fmt.Errorf("ERROR: flag '%s' is missing its argument", name)
				}
				i++
				val = argv[i]
			}
		}
		norm, err := gflagValue(f.kind, val)
		if err != nil {
			return a, fmt.Errorf("ERROR: illegal value '%s' specified for %s flag '%s'", val, f.kind, name)
		}
		a.Values[name] = norm
	}
	if r, _ := strconv.ParseFloat(a.Values["eviction_ratio"], 64); r < 0 || r > 1 {
		return a, fmt.Errorf("ERROR: failed validation of new value '%s' for flag 'eviction_ratio' (eviction ratio must be between 0.0 and 1.0)", a.Values["eviction_ratio"])
	}
	num := func(k string) int { n, _ := strconv.Atoi(a.Values[k]); return n }
	a.RPCPort = num("rpc_port")
	if a.RPCPort <= 0 {
		a.RPCPort = num("port") // the deprecated spelling, used unless rpc_port is set
	}
	a.MetadataPort, a.MetricsPort = num("http_metadata_server_port"), num("metrics_port")
	a.MetadataServer = a.Values["enable_http_metadata_server"] == "true"
	a.Metrics = a.Values["enable_metric_reporting"] == "true"
	for _, p := range []struct {
		name string
		v    int
		on   bool
	}{{"rpc port", a.RPCPort, true}, {"http_metadata_server_port", a.MetadataPort, a.MetadataServer}, {"metrics_port", a.MetricsPort, a.Metrics}} {
		if p.on && (p.v <= 0 || p.v > 65535) {
			return a, fmt.Errorf("mooncake_master: %s %d is not a TCP port", p.name, p.v)
		}
	}
	return a, nil
}

// gflagValue parses val as gflags parses a value of kind, returning its
// canonical form.
func gflagValue(kind, val string) (string, error) {
	switch kind {
	case "bool":
		switch strings.ToLower(val) {
		case "true", "t", "yes", "y", "1":
			return "true", nil
		case "false", "f", "no", "n", "0":
			return "false", nil
		}
		return "", fmt.Errorf("not a bool")
	case "int32", "int64", "uint32", "uint64":
		bits, _ := strconv.Atoi(strings.TrimLeft(kind, "uint"))
		if strings.HasPrefix(kind, "u") {
			n, err := strconv.ParseUint(val, 0, bits)
			return strconv.FormatUint(n, 10), err
		}
		n, err := strconv.ParseInt(val, 0, bits)
		return strconv.FormatInt(n, 10), err
	case "double":
		f, err := strconv.ParseFloat(val, 64)
		return strconv.FormatFloat(f, 'g', -1, 64), err
	}
	return val, nil
}

// metadataStore is the HTTP metadata server's key-value store.
type metadataStore struct {
	mu sync.Mutex
	kv map[string][]byte
}

func (s *metadataStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metadata" {
		http.NotFound(w, r)
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		http.Error(w, "missing key", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		v, ok := s.kv[key]
		if !ok {
			http.Error(w, "metadata not found", http.StatusNotFound)
			return
		}
		_, _ = w.Write(v)
	case http.MethodPut:
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.kv[key] = b
		_, _ = io.WriteString(w, "metadata updated")
	case http.MethodDelete:
		delete(s.kv, key)
		_, _ = io.WriteString(w, "metadata deleted")
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// runMooncakeMaster serves the master's three ports until ctx ends. The RPC
// port accepts the store clients' connections and counts them (the
// simulation has no objects to store: the engines model KV reuse
// themselves); /metrics reports the clients and metadata keys.
func runMooncakeMaster(ctx context.Context, argv []string, o Options) error {
	a, err := ParseMooncakeMaster(argv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.bind(a.RPCPort))
	if err != nil {
		return fmt.Errorf("mooncake_master: listen rpc %d: %w", a.RPCPort, err)
	}
	defer ln.Close()
	var mu sync.Mutex
	clients := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			clients++
			mu.Unlock()
			go func() { // hold the connection until the client closes it
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	store := &metadataStore{kv: map[string][]byte{}}
	var servers []*server
	if a.MetadataServer {
		s, err := listen("metadata", o.bind(a.MetadataPort), store)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	if a.Metrics {
		mux := http.NewServeMux()
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			n := clients
			mu.Unlock()
			store.mu.Lock()
			keys := len(store.kv)
			store.mu.Unlock()
			fmt.Fprintf(w, "# sweepflow-sim: SIMULATED Mooncake master\n"+
				"# TYPE master_client_connections gauge\nmaster_client_connections %d\n"+
				"# TYPE master_metadata_keys gauge\nmaster_metadata_keys %d\n", n, keys)
		})
		mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "OK") })
		s, err := listen("metrics", o.bind(a.MetricsPort), mux)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED mooncake_master rpc on %s (lease ttl %s ms, eviction watermark %s)\n",
		ln.Addr(), a.Values["default_kv_lease_ttl"], a.Values["eviction_high_watermark_ratio"])
	if len(servers) == 0 {
		<-ctx.Done()
		return nil
	}
	return serveAll(ctx, o, servers, nil)
}

// mooncakeStore is what a store client (vLLM's MooncakeStoreConnector,
// SGLang's Mooncake HiCache backend) needs before its engine starts: the
// master it registers with and the metadata server its transfer engine
// publishes its segment to.
type mooncakeStore struct {
	master, metadata, local string
}

// joinMooncake connects a worker's store client as the connector does at
// start-up: it reaches the master (retrying while it comes up) and publishes
// this worker's segment under its local hostname; an unreachable master or
// metadata server fails the worker, as it fails the real engine.
func joinMooncake(ctx context.Context, st mooncakeStore, who string) error {
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := dialRetry(dctx, st.master)
	if err != nil {
		return fmt.Errorf("mooncake store client: cannot reach the master at %s: %w", st.master, err)
	}
	_ = c.Close()
	if st.metadata == "" || st.metadata == "P2PHANDSHAKE" {
		return nil
	}
	url := strings.TrimSuffix(st.metadata, "/") + "?key=" + "mooncake/ram/" + st.local
	req, err := http.NewRequestWithContext(dctx, http.MethodPut, url, strings.NewReader(fmt.Sprintf(`{"name":%q,"simulated":true}`, who)))
	if err != nil {
		return fmt.Errorf("mooncake store client: metadata server %q: %w", st.metadata, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("mooncake store client: metadata server %s: %w", st.metadata, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mooncake store client: metadata server %s answered %s", st.metadata, resp.Status)
	}
	return nil
}
