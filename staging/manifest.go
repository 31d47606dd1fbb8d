// Package staging copies a model checkpoint from the shared filesystem to a
// node-local directory and proves the copy with a size+sha256 manifest. It is
// restartable: files that already match are skipped, a retried attempt can
// trust the files its previous attempt reported done, and nothing is ever
// half-written under its final name.
package staging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// ManifestName is the file, at the root of a checkpoint directory, that holds
// its manifest. It is never itself part of a manifest.
const ManifestName = ".sweepflow-manifest.json"

// tmpPrefix marks in-progress copies; they are excluded from manifests and
// removed when a new Stage starts.
const tmpPrefix = ".sweepflow-tmp-"

// chunkSize is the unit of copying and hashing; cancellation is checked
// between chunks, so it bounds how long a cancel waits.
const chunkSize = 4 << 20

// FileEntry is one file of a checkpoint; Path is slash-separated and relative
// to the checkpoint root.
type FileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest lists every regular file of a checkpoint, sorted by Path.
type Manifest struct {
	Files      []FileEntry `json:"files"`
	TotalBytes int64       `json:"total_bytes"`
}

// Marshal returns the canonical encoding written to ManifestName. It is
// deterministic, so equal manifests have equal sha256 on every node.
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// BuildManifest hashes every regular file under dir (following symlinks to
// files, as in Hugging Face snapshot directories).
func BuildManifest(ctx context.Context, dir string) (*Manifest, error) {
	files, err := scan(dir)
	if err != nil {
		return nil, err
	}
	return hashAll(ctx, dir, files)
}

// LoadOrBuildSourceManifest returns the manifest cached at src/ManifestName
// when it lists exactly the files and sizes present now; otherwise it hashes
// src and tries to cache the result there (best effort: a read-only shared
// filesystem just means the next caller hashes again). Trusting the cached
// hashes is what makes same-size tampering or corruption of the source
// detectable during the copy.
func LoadOrBuildSourceManifest(ctx context.Context, src string) (*Manifest, error) {
	files, err := scan(src)
	if err != nil {
		return nil, err
	}
	if m, err := ReadManifest(filepath.Join(src, ManifestName)); err == nil && consistent(m, files) {
		return m, nil
	}
	m, err := hashAll(ctx, src, files)
	if err != nil {
		return nil, err
	}
	_, _ = WriteManifest(src, m)
	return m, nil
}

// ReadManifest reads and decodes a manifest file.
func ReadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("staging: manifest %s: %v", path, err)
	}
	return &m, nil
}

// WriteManifest writes dir/ManifestName atomically and returns the sha256 of
// the bytes written.
func WriteManifest(dir string, m *Manifest) (string, error) {
	b, err := m.Marshal()
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+ManifestName+"-*")
	if err != nil {
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, ManifestName)); err != nil {
		return "", fmt.Errorf("staging: write manifest in %s: %w", dir, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// consistent reports whether a cached manifest matches the scanned file list
// by path and size and carries well-formed hashes.
func consistent(m *Manifest, files []FileEntry) bool {
	if len(m.Files) != len(files) {
		return false
	}
	var total int64
	for i, f := range files {
		e := m.Files[i]
		if e.Path != f.Path || e.Size != f.Size || len(e.SHA256) != sha256.Size*2 {
			return false
		}
		if _, err := hex.DecodeString(e.SHA256); err != nil {
			return false
		}
		total += e.Size
	}
	return total == m.TotalBytes
}

// scan lists regular files under dir with their sizes, sorted by path.
func scan(dir string) ([]FileEntry, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("staging: checkpoint dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("staging: checkpoint dir %s is not a directory", dir)
	}
	var files []FileEntry
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("staging: scan %s: %w", dir, err)
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ManifestName || strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := os.Stat(p) // follows symlinks
		if err != nil {
			return fmt.Errorf("staging: scan %s: %w", p, err)
		}
		switch {
		case info.Mode().IsRegular():
			files = append(files, FileEntry{Path: rel, Size: info.Size()})
		case info.IsDir():
			return fmt.Errorf("staging: scan %s: symlink to a directory is not supported", p)
		default:
			return fmt.Errorf("staging: scan %s: not a regular file (%s)", p, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// hashAll fills in SHA256 for files, hashing a few at a time: one stream is
// rarely enough to saturate a parallel filesystem.
func hashAll(ctx context.Context, dir string, files []FileEntry) (*Manifest, error) {
	m := &Manifest{Files: make([]FileEntry, len(files))}
	copy(m.Files, files)
	workers := min(runtime.NumCPU(), 4, max(len(files), 1))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idx := make(chan int)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunkSize)
			for i := range idx {
				e := &m.Files[i]
				sum, n, err := hashFile(ctx, filepath.Join(dir, filepath.FromSlash(e.Path)), buf)
				if err == nil && n != e.Size {
					err = fmt.Errorf("staging: %s changed size while hashing (%d -> %d bytes)", e.Path, e.Size, n)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				e.SHA256 = sum
			}
		}()
	}
feed:
	for i := range m.Files {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		m.TotalBytes += f.Size
	}
	return m, nil
}

// hashFile returns the sha256 and length of a file, checking ctx per chunk.
func hashFile(ctx context.Context, path string, buf []byte) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("staging: hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", n, fmt.Errorf("staging: hash %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
