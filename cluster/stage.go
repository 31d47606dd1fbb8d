package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sweepflow/sweepflow/staging"
)

// StageOnNodes runs stageNode for every node in parallel and sums the
// per-node reports; backends differ only in how one node is staged (a local
// copy, an srun step).
func StageOnNodes(ctx context.Context, nodes []string, stageNode func(ctx context.Context, node string) (*staging.Report, error)) (StageReport, error) {
	var (
		mu     sync.Mutex
		report = StageReport{Nodes: len(nodes)}
		errs   []error
		wg     sync.WaitGroup
	)
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := stageNode(ctx, node)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
				return
			}
			report.FilesCopied += rep.FilesCopied
			report.FilesSkipped += rep.FilesSkipped
			report.BytesCopied += rep.BytesCopied
			report.BytesSkipped += rep.BytesSkipped
			report.Manifest = rep.ManifestSHA256
		}()
	}
	wg.Wait()
	return report, errors.Join(errs...)
}
