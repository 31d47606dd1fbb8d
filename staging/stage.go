package staging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// ErrChecksumMismatch is wrapped when a source file does not match its
// manifest entry. Retrying cannot fix it (the shared copy or its manifest is
// wrong), so callers should classify it as not retryable.
var ErrChecksumMismatch = errors.New("source file does not match its manifest")

// Progress is what a staging attempt has verified so far; an activity
// heartbeats it and a retried attempt passes it back as Options.Resume.
type Progress struct {
	// Done lists manifest paths present and verified at the destination.
	Done []string `json:"done"`
	// BytesCopied counts bytes of completed copies, across resumed attempts.
	BytesCopied int64 `json:"bytes_copied"`
	// InFlightBytes counts bytes written so far of copies still running; it
	// moves during long files so heartbeats show liveness.
	InFlightBytes int64 `json:"in_flight_bytes,omitempty"`
	// TotalFiles and TotalBytes describe the whole checkpoint, for progress
	// bars; they are ignored in Options.Resume.
	TotalFiles int   `json:"total_files,omitempty"`
	TotalBytes int64 `json:"total_bytes,omitempty"`
}

// Options configures Stage.
type Options struct {
	Src, Dst string
	// Resume is the last heartbeated Progress of a previous attempt. Trust
	// rule: a destination file listed in Resume.Done whose size matches the
	// manifest is accepted without re-hashing, because that same staging job
	// verified its sha256 when it wrote it. Every other existing file is
	// re-hashed before it is skipped. VerifyExisting re-hashes all of them.
	Resume *Progress
	// OnProgress is called after each file is verified (copied or skipped),
	// and at most about once a second during long copies. Calls never overlap.
	OnProgress func(Progress)
	// Parallel is the number of files copied at once (default 4).
	Parallel int
	// VerifyExisting re-hashes destination files even if Resume lists them.
	VerifyExisting bool

	// chunkHook, if set, runs after every copied chunk (tests use it to
	// cancel in the middle of a file).
	chunkHook func()
}

// Report summarises one Stage call.
type Report struct {
	FilesCopied  int   `json:"files_copied"`
	FilesSkipped int   `json:"files_skipped"`
	BytesCopied  int64 `json:"bytes_copied"`
	BytesSkipped int64 `json:"bytes_skipped"`
	// ManifestSHA256 is the sha256 of Dst/ManifestName as written; equal on
	// every node that staged the same checkpoint.
	ManifestSHA256 string `json:"manifest_sha256"`
}

// progressInterval throttles OnProgress calls made in the middle of a file.
const progressInterval = time.Second

// Stage makes Dst an exact, verified copy of the checkpoint in Src and writes
// Dst/ManifestName. Only one Stage may target a given Dst at a time.
func Stage(ctx context.Context, opts Options) (*Report, error) {
	if opts.Src == "" || opts.Dst == "" {
		return nil, errors.New("staging: both a source and a destination directory are required")
	}
	src, err := filepath.Abs(opts.Src)
	if err != nil {
		return nil, fmt.Errorf("staging: source %s: %w", opts.Src, err)
	}
	dst, err := filepath.Abs(opts.Dst)
	if err != nil {
		return nil, fmt.Errorf("staging: destination %s: %w", opts.Dst, err)
	}
	if within(dst, src) || within(src, dst) {
		return nil, fmt.Errorf("staging: source %s and destination %s must not contain one another", src, dst)
	}
	m, err := LoadOrBuildSourceManifest(ctx, src)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("staging: destination: %w", err)
	}
	if err := removeStaleTemps(dst); err != nil {
		return nil, err
	}

	s := &stager{opts: opts, src: src, dst: dst, inFlight: map[int]int64{}, lastEmit: time.Now()}
	if opts.Resume != nil {
		s.progress.BytesCopied = opts.Resume.BytesCopied
	}
	s.progress.TotalFiles, s.progress.TotalBytes = len(m.Files), m.TotalBytes
	s.acceptTrusted(m)
	if err := s.run(ctx, m); err != nil {
		return nil, err
	}
	sum, err := WriteManifest(dst, m)
	if err != nil {
		return nil, err
	}
	s.report.ManifestSHA256 = sum
	return &s.report, nil
}

type stager struct {
	opts     Options
	src, dst string
	// accepted: the files the trust rule accepts without re-hashing, listed
	// in progress.Done from the start; read-only once run starts.
	accepted map[string]bool

	mu       sync.Mutex // guards everything below and serialises OnProgress
	progress Progress
	report   Report
	inFlight map[int]int64 // worker -> bytes of its current copy
	lastEmit time.Time
}

// acceptTrusted applies the trust rule once, before any copy: a file in
// Resume.Done with the manifest's size at the destination is accepted and
// listed in Done at once. Listing it only when a worker got to it would
// make a resumed attempt that fails early report less than the earlier
// attempts verified, and the next retry would re-hash the rest.
func (s *stager) acceptTrusted(m *Manifest) {
	s.accepted = map[string]bool{}
	if s.opts.VerifyExisting || s.opts.Resume == nil || len(s.opts.Resume.Done) == 0 {
		return
	}
	trusted := make(map[string]bool, len(s.opts.Resume.Done))
	for _, p := range s.opts.Resume.Done {
		trusted[p] = true
	}
	for _, e := range m.Files {
		if !trusted[e.Path] {
			continue
		}
		if st, err := os.Stat(filepath.Join(s.dst, filepath.FromSlash(e.Path))); err == nil && st.Mode().IsRegular() && st.Size() == e.Size {
			s.progress.Done = append(s.progress.Done, e.Path)
			s.accepted[e.Path] = true
		}
	}
}

func (s *stager) run(ctx context.Context, m *Manifest) error {
	workers := s.opts.Parallel
	if workers <= 0 {
		workers = 4
	}
	workers = min(workers, max(len(m.Files), 1))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan FileEntry)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunkSize)
			for e := range jobs {
				copied, err := s.stageFile(ctx, w, e, buf)
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				s.fileDone(w, e, copied)
			}
		}()
	}
feed:
	for _, e := range m.Files {
		select {
		case jobs <- e:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// stageFile makes one destination file match e; it reports whether it copied.
func (s *stager) stageFile(ctx context.Context, worker int, e FileEntry, buf []byte) (bool, error) {
	if s.accepted[e.Path] {
		return false, nil
	}
	dstPath := filepath.Join(s.dst, filepath.FromSlash(e.Path))
	st, err := os.Stat(dstPath)
	switch {
	case err == nil && st.IsDir():
		return false, fmt.Errorf("staging: destination %s is a directory, manifest has a file there", dstPath)
	case err == nil && st.Mode().IsRegular() && st.Size() == e.Size:
		sum, _, err := hashFile(ctx, dstPath, buf)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			break // unreadable copy: replace it
		}
		if sum == e.SHA256 {
			return false, nil
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("staging: destination %s: %w", dstPath, err)
	}
	return true, s.copyFile(ctx, worker, e, dstPath, buf)
}

// copyFile copies, hashing as it goes, into a temp file beside the target and
// renames it into place only when size and sha256 match the manifest.
func (s *stager) copyFile(ctx context.Context, worker int, e FileEntry, dstPath string, buf []byte) (err error) {
	srcPath := filepath.Join(s.src, filepath.FromSlash(e.Path))
	in, err := os.Open(srcPath)
	if err != nil {
		return fmt.Errorf("staging: open source %s: %w", srcPath, err)
	}
	defer in.Close()
	srcInfo, err := in.Stat()
	if err != nil {
		return fmt.Errorf("staging: source %s: %w", srcPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(dstPath), 0o755); err != nil {
		return fmt.Errorf("staging: destination: %w", err)
	}
	out, err := os.CreateTemp(filepath.Dir(dstPath), tmpPrefix+filepath.Base(dstPath)+"-*")
	if err != nil {
		return fmt.Errorf("staging: destination: %w", err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(out.Name())
		}
		s.setInFlight(worker, 0)
	}()

	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, rerr := in.Read(buf)
		if k > 0 {
			n += int64(k)
			if n > e.Size {
				return fmt.Errorf("staging: %w: %s is larger than the manifest's %d bytes", ErrChecksumMismatch, srcPath, e.Size)
			}
			h.Write(buf[:k])
			if _, werr := out.Write(buf[:k]); werr != nil {
				return fmt.Errorf("staging: write %s: %w", dstPath, werr)
			}
			s.setInFlight(worker, n)
			if s.opts.chunkHook != nil {
				s.opts.chunkHook()
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("staging: read %s: %w", srcPath, rerr)
		}
	}
	if n != e.Size {
		return fmt.Errorf("staging: %w: %s has %d bytes, manifest says %d", ErrChecksumMismatch, srcPath, n, e.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("staging: %w: %s has sha256 %s, manifest %s says %s (if the checkpoint was legitimately replaced, delete that manifest)",
			ErrChecksumMismatch, srcPath, got, filepath.Join(s.src, ManifestName), e.SHA256)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("staging: sync %s: %w", dstPath, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("staging: close %s: %w", dstPath, err)
	}
	if err := os.Chmod(out.Name(), srcInfo.Mode().Perm()|0o600); err != nil {
		return fmt.Errorf("staging: chmod %s: %w", dstPath, err)
	}
	if err := os.Rename(out.Name(), dstPath); err != nil {
		return fmt.Errorf("staging: rename into %s: %w", dstPath, err)
	}
	return nil
}

func (s *stager) fileDone(worker int, e FileEntry, copied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, worker)
	if !s.accepted[e.Path] {
		s.progress.Done = append(s.progress.Done, e.Path)
	}
	if copied {
		s.report.FilesCopied++
		s.report.BytesCopied += e.Size
		s.progress.BytesCopied += e.Size
	} else {
		s.report.FilesSkipped++
		s.report.BytesSkipped += e.Size
	}
	s.emitLocked()
}

func (s *stager) setInFlight(worker int, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		delete(s.inFlight, worker)
		return
	}
	s.inFlight[worker] = n
	if time.Since(s.lastEmit) >= progressInterval {
		s.emitLocked()
	}
}

func (s *stager) emitLocked() {
	s.lastEmit = time.Now()
	if s.opts.OnProgress == nil {
		return
	}
	p := s.progress
	p.Done = append([]string(nil), s.progress.Done...)
	p.InFlightBytes = 0
	for _, n := range s.inFlight {
		p.InFlightBytes += n
	}
	s.opts.OnProgress(p)
}

// removeStaleTemps deletes copies left by an attempt that was killed mid-file.
func removeStaleTemps(dst string) error {
	return filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("staging: scan destination %s: %w", dst, err)
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), tmpPrefix) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("staging: remove stale %s: %w", p, err)
			}
		}
		return nil
	})
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
}

// WriteTable prints the report as `starter stage` does: files and bytes
// copied and skipped, elapsed time, throughput and the manifest digest.
func (rep *Report) WriteTable(w io.Writer, elapsed time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILES COPIED\tFILES SKIPPED\tCOPIED\tSKIPPED\tELAPSED\tTHROUGHPUT\tMANIFEST SHA256")
	rate := "-"
	if s := elapsed.Seconds(); s > 0 && rep.BytesCopied > 0 {
		rate = HumanBytes(int64(float64(rep.BytesCopied)/s)) + "/s"
	}
	fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", rep.FilesCopied, rep.FilesSkipped,
		HumanBytes(rep.BytesCopied), HumanBytes(rep.BytesSkipped), elapsed.Round(time.Millisecond), rate, rep.ManifestSHA256)
	return tw.Flush()
}

// HumanBytes is n in binary units: "512 B", "1.5 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
