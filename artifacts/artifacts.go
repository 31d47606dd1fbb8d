// Package artifacts stores stage artifacts (raw per-request records, logs,
// result JSON) under content-addressed keys, so activities pass short URIs to
// each other instead of large payloads, and a retried upload is a no-op.
package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Store puts and reads artifacts by URI.
type Store interface {
	// Put stores the content of r under its sha256 and returns its URI.
	// Putting the same bytes again returns the same URI.
	Put(ctx context.Context, name string, r io.Reader) (uri string, err error)
	// Open returns the content behind a URI returned by Put.
	Open(ctx context.Context, uri string) (io.ReadCloser, error)
}

// DefaultDir is where the directory store lives when no URL is configured,
// relative to the working directory (the project's .sweepflow state dir).
const DefaultDir = ".sweepflow/artifacts"

// ErrNotFound is wrapped by Open when a URI names no stored artifact.
var ErrNotFound = errors.New("artifact not found")

// ErrCorrupt is wrapped by reads whose content no longer hashes to its key.
var ErrCorrupt = errors.New("artifact content does not match its sha256 key")

// Open returns the store a URL names: "" (DefaultDir), a plain directory path
// or "file:///dir" select the directory store;
// "s3://bucket/prefix?endpoint=host:port&region=R" selects S3-compatible
// storage with credentials from the environment (see OpenS3).
func Open(rawURL string) (Store, error) {
	switch {
	case rawURL == "":
		return NewDirStore(DefaultDir)
	case strings.HasPrefix(rawURL, "file://"):
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("artifacts: bad store URL %q: %v", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("artifacts: store URL %q: file URLs must be local (file:///abs/dir)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("artifacts: store URL %q has no directory", rawURL)
		}
		return NewDirStore(u.Path)
	case strings.HasPrefix(rawURL, "s3://"):
		return openS3NoContext(rawURL)
	case strings.Contains(rawURL, "://"):
		return nil, fmt.Errorf("artifacts: store URL %q: unsupported scheme (want a directory, file:///dir or s3://bucket)", rawURL)
	default:
		return NewDirStore(rawURL)
	}
}

// DirStore keeps artifacts at <root>/sha256/<aa>/<hash>/<name>. The name is
// kept only so humans browsing the directory know what a blob is; the hash is
// the identity.
type DirStore struct {
	root string // absolute
}

// NewDirStore creates (if needed) and returns a directory store rooted at dir.
func NewDirStore(dir string) (*DirStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("artifacts: store dir %q: %v", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("artifacts: store dir %q: %v", dir, err)
	}
	return &DirStore{root: abs}, nil
}

// Root is the absolute directory the store writes under.
func (s *DirStore) Root() string { return s.root }

// checkName rejects names that would escape the hash directory or be invisible.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("artifact name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("artifact name %q is not a file name", name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("artifact name %q must not contain a path separator", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("artifact name %q contains a NUL byte", name)
	}
	return nil
}

// Put streams r to a temp file while hashing it, then renames it into place.
// If the same content under the same name is already stored, the temp file is
// dropped, so the final file is written exactly once and never half-written.
func (s *DirStore) Put(ctx context.Context, name string, r io.Reader) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("artifacts: put: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "put-*")
	if err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()

	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), ctxReader{ctx, r}); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	final := s.blobPath(sum, name)
	if _, err := os.Stat(final); err == nil {
		// Already stored: content is identical by construction of the key.
		return fileURI(final), nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	if err := os.Chmod(tmpName, 0o444); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	// Rename over a concurrent writer's identical file is harmless.
	if err := os.Rename(tmpName, final); err != nil {
		return "", fmt.Errorf("artifacts: put %s: %v", name, err)
	}
	committed = true
	return fileURI(final), nil
}

func (s *DirStore) blobPath(sum, name string) string {
	return filepath.Join(s.root, "sha256", sum[:2], sum, name)
}

// Open returns a reader for a file:// URI under this store. The reader checks
// the content against the sha256 in the path and fails with ErrCorrupt at EOF
// if it differs, so a damaged artifact is never silently consumed.
func (s *DirStore) Open(ctx context.Context, uri string) (io.ReadCloser, error) {
	p, sum, err := s.parseURI(uri)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("artifacts: open %s: %w", uri, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifacts: open %s: %v", uri, err)
	}
	return &verifyingReader{r: f, h: sha256.New(), want: sum, uri: uri}, nil
}

// parseURI maps a URI back to a blob path, refusing anything outside the store.
func (s *DirStore) parseURI(uri string) (path, sum string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return "", "", fmt.Errorf("artifacts: %q is not a file:// artifact URI", uri)
	}
	p := filepath.Clean(filepath.FromSlash(u.Path))
	rel, err := filepath.Rel(s.root, p)
	if err != nil {
		return "", "", fmt.Errorf("artifacts: URI %q is not under store %s", uri, s.root)
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 4 || parts[0] != "sha256" || len(parts[2]) != sha256.Size*2 || parts[1] != parts[2][:2] {
		return "", "", fmt.Errorf("artifacts: URI %q is not under store %s (want sha256/<aa>/<hash>/<name>)", uri, s.root)
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return "", "", fmt.Errorf("artifacts: URI %q: key %q is not a sha256 hex digest", uri, parts[2])
	}
	if err := checkName(parts[3]); err != nil {
		return "", "", fmt.Errorf("artifacts: URI %q: %w", uri, err)
	}
	return p, parts[2], nil
}

// SHA256 returns the content hash encoded in an artifact URI.
func SHA256(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("artifacts: bad URI %q: %v", uri, err)
	}
	parts := strings.Split(strings.TrimSuffix(u.Path, "/"), "/")
	if len(parts) < 4 || parts[len(parts)-4] != "sha256" || len(parts[len(parts)-2]) != sha256.Size*2 {
		return "", fmt.Errorf("artifacts: URI %q is not content-addressed (want .../sha256/<aa>/<hash>/<name>)", uri)
	}
	return parts[len(parts)-2], nil
}

func fileURI(p string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String()
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type verifyingReader struct {
	r    io.ReadCloser
	h    hash.Hash
	want string
	uri  string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("artifacts: read %s: %w (got %s)", v.uri, ErrCorrupt, got)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.r.Close() }
