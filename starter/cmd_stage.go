package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/staging"
)

func init() {
	register("stage", newStageCmd)
}

// exitChecksumMismatch tells a parent process (an activity running this via
// srun) that retrying is pointless: the source does not match its manifest.
const exitChecksumMismatch = 3

// stageEvent is one line of --json output. A parent parses these from stdout;
// the last "progress" line is what it passes back via --resume on a retry.
type stageEvent struct {
	Event    string            `json:"event"` // progress | report | error
	Progress *staging.Progress `json:"progress,omitempty"`
	Report   *staging.Report   `json:"report,omitempty"`
	Elapsed  float64           `json:"elapsed_s,omitempty"`
	Error    string            `json:"error,omitempty"`
	// ChecksumMismatch marks an error that must not be retried.
	ChecksumMismatch bool `json:"checksum_mismatch,omitempty"`
}

func runStage(args []string) error { return execute(nil, newStageCmd(), args, nil, nil) }

func newStageCmd() *cobra.Command {
	c := &cobra.Command{Use: "stage", Short: "copy a checkpoint to a node-local dir, verified by size+sha256 manifest", Args: noArgs}
	fs := c.Flags()
	src := fs.String("src", "", "checkpoint directory on the shared filesystem (required)")
	dst := fs.String("dst", "", "node-local destination directory (required)")
	asJSON := fs.Bool("json", false, "print JSON lines (progress, then report or error) to stdout")
	verify := fs.Bool("verify", false, "re-hash every existing destination file, even ones --resume lists")
	parallel := fs.Int("parallel", 4, "files copied at once")
	resume := fs.String("resume", "", "JSON file holding a previous attempt's progress (a progress line's \"progress\" object)")
	c.RunE = func(*cobra.Command, []string) error {
		switch {
		case *src == "" || *dst == "":
			return &exitError{code: 2, msg: "--src and --dst are required"}
		case *parallel < 1:
			return &exitError{code: 2, msg: fmt.Sprintf("--parallel %d: must be at least 1", *parallel)}
		}
		opts := staging.Options{Src: *src, Dst: *dst, Parallel: *parallel, VerifyExisting: *verify}
		if *resume != "" {
			p, err := readResume(*resume)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			opts.Resume = p
		}

		// SIGTERM is how srun/scancel stop us: cancel so no temp file survives.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		start := time.Now()
		return stageMain(ctx, opts, *asJSON, os.Stdout, os.Stderr, start)
	}
	return c
}

func stageMain(ctx context.Context, opts staging.Options, asJSON bool, stdout, stderr io.Writer, start time.Time) error {
	enc := json.NewEncoder(stdout)
	if asJSON {
		opts.OnProgress = func(p staging.Progress) { _ = enc.Encode(stageEvent{Event: "progress", Progress: &p}) }
	} else {
		opts.OnProgress = func(p staging.Progress) {
			fmt.Fprintf(stderr, "staged %d/%d files, %s copied\n", len(p.Done), p.TotalFiles, staging.HumanBytes(p.BytesCopied+p.InFlightBytes))
		}
	}
	rep, err := staging.Stage(ctx, opts)
	elapsed := time.Since(start)
	if err != nil {
		mismatch := errors.Is(err, staging.ErrChecksumMismatch)
		code := 1
		if mismatch {
			code = exitChecksumMismatch
		}
		if asJSON {
			_ = enc.Encode(stageEvent{Event: "error", Error: err.Error(), ChecksumMismatch: mismatch, Elapsed: elapsed.Seconds()})
		}
		return &exitError{code: code, msg: err.Error()}
	}
	if asJSON {
		return enc.Encode(stageEvent{Event: "report", Report: rep, Elapsed: elapsed.Seconds()})
	}
	return rep.WriteTable(stdout, elapsed)
}

func readResume(path string) (*staging.Progress, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resume: %v", err)
	}
	var p staging.Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("--resume %s: not a progress object: %v", path, err)
	}
	return &p, nil
}
