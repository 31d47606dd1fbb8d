package activities

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sweepflow/sweepflow/cluster"
)

// errWatchStopped ends a watch that found nothing wrong.
var errWatchStopped = errors.New("allocation watch stopped")

// watchAllocation checks the allocation (Backend.Check: the Slurm job state,
// the local lease) every quarter heartbeat timeout while a long stage runs,
// and cancels the returned context with the check's error as its cause
// when the allocation dies, so a dead job is noticed within one heartbeat
// timeout instead of when the load generator gives up.
//
// Call done with whether the stage's work failed; it stops the watch and
// returns the allocation error, if any, that explains the failure (checking
// once more, since a server can die before the next poll):
//
//	wctx, done := a.watchAllocation(ctx, in.Alloc)
//	res, err := work(wctx)
//	if lost := done(err != nil); lost != nil { return classify(lost) }
func (a *Activities) watchAllocation(ctx context.Context, alloc cluster.Allocation) (context.Context, func(failed bool) error) {
	wctx, cancel := context.WithCancelCause(ctx)
	if a.Backend == nil || alloc.JobID == "" {
		return wctx, func(bool) error { cancel(errWatchStopped); return nil }
	}
	every := heartbeatEvery(ctx)
	stopped := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if err := a.Backend.Check(wctx, alloc); isAllocationError(err) {
				a.log(ctx).Warn("allocation lost during stage", zap.String("job", alloc.JobID), zap.Error(err))
				cancel(err)
				return
			}
		}
	}()
	return wctx, func(failed bool) error {
		close(stopped)
		<-finished
		cause := context.Cause(wctx)
		cancel(errWatchStopped)
		if isAllocationError(cause) {
			return cause
		}
		if failed && ctx.Err() == nil {
			if err := a.Backend.Check(ctx, alloc); isAllocationError(err) {
				return err
			}
		}
		return nil
	}
}

// isAllocationError: errors that say the nodes are gone (not a failed poll).
func isAllocationError(err error) bool {
	return errors.Is(err, cluster.ErrAllocationLost) || errors.Is(err, cluster.ErrOOM) || errors.Is(err, cluster.ErrBadConfig)
}

// collectJobLogs stores the allocation's job directory logs (holder, step
// and staging logs) as one tar.gz artifact and returns its URI ("" when
// there is nothing to collect). Teardown calls it after releasing the job.
func (a *Activities) collectJobLogs(ctx context.Context, alloc cluster.Allocation) (string, error) {
	if a.Artifacts == nil || alloc.WorkDir == "" {
		return "", nil
	}
	var files []string
	_ = filepath.WalkDir(alloc.WorkDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && (strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".out") || strings.HasSuffix(p, ".err")) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		return "", nil
	}
	tmp, err := os.CreateTemp("", "sweepflow-joblogs-*.tar.gz")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	zw := gzip.NewWriter(tmp)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := addFile(tw, alloc.WorkDir, f); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return a.Artifacts.Put(ctx, fmt.Sprintf("joblogs-%s.tar.gz", sanitize(alloc.JobID)), tmp)
}

func addFile(tw *tar.Writer, root, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // a log removed meanwhile is not worth failing teardown
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	rel, _ := filepath.Rel(root, path)
	// The size is fixed at header time: copy exactly that much even if a
	// dying step still appends.
	if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, st.Size())
	return err
}
