// Package temporalx wires sweepflow to Temporal: client options from the
// environment, the zap logger adapted to the SDK, the pinned CLI binary and
// the embedded dev server.
package temporalx

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/sweepflow/sweepflow/codec"
)

// Task queues. Workflows run on the control queue; a cluster's activities run
// on its own queue, served by the worker that can reach that cluster.
const ControlQueue = "sweepflow-control"

// ClusterQueue is the activity task queue of a cluster.
func ClusterQueue(cluster string) string { return "cluster-" + cluster }

// CLIVersion is the pinned Temporal CLI (server 1.29.1, UI 2.42.1).
const CLIVersion = "v1.5.1"

// SDKLogger adapts zap to the SDK's logger through slog.
func SDKLogger(l *zap.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(zapslog.NewHandler(l.Core())))
}

// ClientOptions reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS_* and the CLI's TOML profile (envconfig). Unset, it points at
// the embedded dev server on localhost:7233. With SWEEPFLOW_CODEC_KEY or
// SWEEPFLOW_CODEC_KEY_FILE set, every payload is AES-GCM encrypted (package
// codec); starter and worker both come through here, so they agree.
func ClientOptions(l *zap.Logger) (client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client configuration: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = "127.0.0.1:7233"
	}
	if l != nil {
		opts.Logger = SDKLogger(l)
	}
	conv, _, on, err := codec.FromEnv()
	if err != nil {
		return client.Options{}, err
	}
	if on {
		opts.DataConverter, opts.FailureConverter = conv.DataConverter, conv.FailureConverter
	}
	return opts, nil
}

// Dial connects with ClientOptions.
func Dial(l *zap.Logger) (client.Client, error) {
	opts, err := ClientOptions(l)
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s (namespace %q): %w; start the embedded server with `starter server start` or set TEMPORAL_ADDRESS", opts.HostPort, orDefault(opts.Namespace), err)
	}
	return c, nil
}

func orDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// CLIPath finds the pinned temporal binary: $SWEEPFLOW_TEMPORAL_BIN, then
// the project's bin/ (walking up from dir), then the build cache that
// scripts/install-temporal.sh fills.
func CLIPath(dir string) (string, error) {
	if p := os.Getenv("SWEEPFLOW_TEMPORAL_BIN"); p != "" {
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("SWEEPFLOW_TEMPORAL_BIN=%s is not an executable", p)
	}
	if p, ok := inBin(dir, "temporal"); ok {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, ".cache", "sweepflow", "temporal-"+CLIVersion, "temporal"); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("the Temporal CLI %s is not installed: run scripts/install-temporal.sh", CLIVersion)
}

// inBin finds bin/name in dir or the nearest parent holding it (the
// project's bin/, from any package directory).
func inBin(dir, name string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if p := filepath.Join(d, "bin", name); isExec(p) {
			return p, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Logger builds the process logger: human console output on a terminal,
// JSON otherwise.
func Logger(debug bool) *zap.Logger {
	cfg := zap.NewProductionConfig()
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	}
	if !debug {
		cfg.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
	}
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}
