// Package metrics exposes the worker's Prometheus metrics: the Temporal
// SDK's own (requests, polls, task latencies, through the tally contrib) and
// sweepflow's (points by final status, stage durations, operator waits).
//
// sweepflow's metrics are recorded by worker interceptors through the SDK's
// metrics handler, so they share its registry and tags, and the workflow-side
// ones are replay-safe: the SDK drops metrics recorded while a workflow
// replays, so a worker restart never counts an operator wait twice.
package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.uber.org/zap"
)

// Metric names as sweepflow records them; the Prometheus naming scope adds
// _total to counters and _seconds to timers (histograms).
const (
	// PointsFinished counts points by final status (tag status).
	PointsFinished = "sweepflow_points_finished"
	// StageDuration is each stage attempt's duration (tags stage, outcome).
	StageDuration = "sweepflow_stage_duration"
	// OperatorWaits counts points that parked for an operator (tag stage).
	OperatorWaits = "sweepflow_operator_waits"
	// OperatorWait is how long a point waited for retry|skip|abort (tags
	// stage, outcome: the status the point left the wait with).
	OperatorWait = "sweepflow_operator_wait"
)

// Buckets (seconds) span SDK request latencies (milliseconds) up to bring-up
// and perf stages and operator waits (hours).
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}

// Registry is one Prometheus registry fed by a tally scope.
type Registry struct {
	reg    *prom.Registry
	scope  tally.Scope
	closer interface{ Close() error }
	sdk    client.MetricsHandler
}

// New builds the registry. Metrics reach it every reportEvery (tally buffers
// in between); 0 means one second. Registration conflicts (one name recorded
// with two tag sets) are logged, not fatal.
func New(log *zap.Logger, reportEvery time.Duration) (*Registry, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if reportEvery <= 0 {
		reportEvery = time.Second
	}
	reg := prom.NewRegistry()
	if err := reg.Register(prom.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: Buckets,
		OnRegisterError: func(err error) {
			log.Warn("metrics: registration conflict", zap.Error(err))
		},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, reportEvery)
	scope = sdktally.NewPrometheusNamingScope(scope)
	return &Registry{reg: reg, scope: scope, closer: closer, sdk: sdktally.NewMetricsHandler(scope)}, nil
}

// SDKHandler goes into client.Options.MetricsHandler.
func (r *Registry) SDKHandler() client.MetricsHandler { return r.sdk }

// Handler serves the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Close flushes buffered metrics and stops reporting.
func (r *Registry) Close() error { return r.closer.Close() }

// Serve listens on addr and serves /metrics until stop is called. It returns
// the bound address (useful with port 0).
func (r *Registry) Serve(addr string) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns when stop shuts the server down
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
