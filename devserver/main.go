// Command sweepflow-devserver is the Temporal dev server that `starter server
// start` and `starter bench orchestration` run: the server, UI and SQLite
// store of the pinned Temporal CLI (its devserver package, same versions),
// started with the CLI's own defaults but without the Prometheus endpoint the
// CLI always opens. Every server request records a few dozen metrics, and on
// a 2-core machine that was 15-25 % of the dev server's throughput in
// `starter bench orchestration --points 1000`. --metrics-port turns them on.
//
// It accepts the subset of `temporal server start-dev` flags sweepflow uses,
// with the same names and meaning, optionally after the words "server
// start-dev", so the two binaries are interchangeable.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/temporalio/cli/temporalcli/devserver"
	enumspb "go.temporal.io/api/enums/v1"
)

// cliDefaults are the dynamic config values `temporal server start-dev`
// applies unless given (temporalcli/commands.server.go in CLI v1.5.1).
var cliDefaults = map[string]any{
	"system.forceSearchAttributesCacheRefreshOnRead": true,
	"frontend.persistenceMaxQPS":                     10000,
	"history.persistenceMaxQPS":                      45000,
}

type options struct {
	start     devserver.StartOptions
	headless  bool
	uiPort    int
	logLevel  string
	pragmas   []string
	dynConfig []string
	attrs     []string
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweepflow-devserver:", err)
		os.Exit(2)
	}
	srv, err := devserver.Start(o.start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweepflow-devserver: failed starting server:", err)
		os.Exit(1)
	}
	fmt.Printf("Server:  %s:%d\n", o.start.FrontendIP, o.start.FrontendPort)
	if !o.headless {
		fmt.Printf("UI:      http://%s:%d\n", o.start.UIIP, o.start.UIPort)
	}
	if o.start.MetricsPort > 0 {
		fmt.Printf("Metrics: http://%s:%d/metrics\n", o.start.FrontendIP, o.start.MetricsPort)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Stop()
}

// parse reads the command line into the server's start options.
func parse(args []string) (*options, error) {
	if len(args) >= 2 && args[0] == "server" && args[1] == "start-dev" {
		args = args[2:]
	}
	o := &options{}
	s := &o.start
	var namespaces list
	fs := flag.NewFlagSet("sweepflow-devserver", flag.ContinueOnError)
	fs.StringVar(&s.FrontendIP, "ip", "127.0.0.1", "IP the frontend and UI listen on")
	fs.IntVar(&s.FrontendPort, "port", 7233, "frontend gRPC port")
	fs.IntVar(&o.uiPort, "ui-port", 0, "Web UI port (default: --port + 1000)")
	fs.BoolVar(&o.headless, "headless", false, "no Web UI")
	fs.StringVar(&s.DatabaseFile, "db-filename", "", "SQLite database file (default: in memory)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "server log level: debug, info, warn, error or never")
	fs.IntVar(&s.MetricsPort, "metrics-port", 0, "Prometheus metrics port (default: no metrics endpoint)")
	fs.IntVar(&s.PProfPort, "pprof-port", 0, "pprof port (default: off)")
	fs.Var((*list)(&o.pragmas), "sqlite-pragma", "SQLite PRAGMA=VALUE (repeatable)")
	fs.Var((*list)(&o.dynConfig), "dynamic-config-value", "dynamic config KEY=JSON-VALUE (repeatable)")
	fs.Var((*list)(&o.attrs), "search-attribute", "search attribute NAME=TYPE to register (repeatable)")
	fs.Var(&namespaces, "namespace", "namespace to create besides default (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if s.FrontendIP == "localhost" {
		s.FrontendIP = "127.0.0.1" // the server wants an IP
	}
	s.Namespaces = append([]string{"default"}, namespaces...)
	s.ClusterID = uuid.NewString()
	s.MasterClusterName, s.CurrentClusterName, s.InitialFailoverVersion = "active", "active", 1
	if o.logLevel == "never" {
		s.LogLevel = 100
	} else if err := s.LogLevel.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", o.logLevel, err)
	}
	s.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: s.LogLevel}))
	if !o.headless {
		s.UIIP, s.UIPort = s.FrontendIP, o.uiPort
		if s.UIPort == 0 {
			s.UIPort = min(s.FrontendPort+1000, 65535)
		}
	}
	var err error
	if s.SqlitePragmas, err = keyValues("--sqlite-pragma", o.pragmas); err != nil {
		return nil, err
	}
	if s.DynamicConfigValues, err = dynamicConfig(o.dynConfig); err != nil {
		return nil, err
	}
	if s.SearchAttributes, err = searchAttributes(o.attrs); err != nil {
		return nil, err
	}
	return o, nil
}

func keyValues(flagName string, kvs []string) (map[string]string, error) {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flagName, kv)
		}
		out[k] = v
	}
	return out, nil
}

// dynamicConfig parses KEY=JSON-VALUE pairs as the CLI does: integral
// numbers become int (the server's int settings reject float64), then the
// CLI's defaults fill what is not given.
func dynamicConfig(kvs []string) (map[string]any, error) {
	raw, err := keyValues("--dynamic-config-value", kvs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(raw)+len(cliDefaults))
	for k, text := range raw {
		dec := json.NewDecoder(bytes.NewReader([]byte(text)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("--dynamic-config-value %s: value %q is not JSON: %w", k, text, err)
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = int(i)
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		out[k] = v
	}
	for k, v := range cliDefaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out, nil
}

func searchAttributes(kvs []string) (map[string]enumspb.IndexedValueType, error) {
	raw, err := keyValues("--search-attribute", kvs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]enumspb.IndexedValueType, len(raw))
	for name, typ := range raw {
		var t enumspb.IndexedValueType
		for short, v := range enumspb.IndexedValueType_shorthandValue {
			if strings.EqualFold(short, typ) {
				t = enumspb.IndexedValueType(v)
			}
		}
		if t == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("--search-attribute %s: unknown type %q (Text, Keyword, Int, Double, Bool, Datetime, KeywordList)", name, typ)
		}
		out[name] = t
	}
	return out, nil
}
