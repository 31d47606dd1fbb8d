package bench

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sweepflow/sweepflow/internal/freeport"
	"github.com/sweepflow/sweepflow/temporalx"
)

// startBenchDevServer starts the embedded dev server (binary bin) on a free
// port in a temporary directory; stop ends it and removes the directory.
func startBenchDevServer(ctx context.Context, bin string, stock bool, dynamicConfig, pragmas []string) (temporalx.DevServer, func(), error) {
	dir, err := os.MkdirTemp("", "sweepflow-bench-orch-*")
	if err != nil {
		return temporalx.DevServer{}, nil, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		os.RemoveAll(dir)
		return temporalx.DevServer{}, nil, err
	}
	d := temporalx.DevServer{Binary: bin, DataDir: filepath.Join(dir, "temporal"), IP: "127.0.0.1", Port: port, Headless: true,
		Stock: stock, DynamicConfig: dynamicConfig, Pragmas: pragmas, SearchAttributes: temporalx.SearchAttributeTypes()}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	stop := func() { _ = d.Stop(); _ = os.RemoveAll(dir) }
	if _, _, err := d.Start(sctx); err != nil {
		stop()
		return temporalx.DevServer{}, nil, err
	}
	return d, stop, nil
}
