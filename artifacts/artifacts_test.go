package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		url     string
		wantErr string
		root    string
	}{
		{name: "plain path", url: filepath.Join(dir, "a"), root: filepath.Join(dir, "a")},
		{name: "file url", url: "file://" + filepath.Join(dir, "b"), root: filepath.Join(dir, "b")},
		{name: "s3 bad parameter", url: "s3://bucket/prefix?endpiont=x", wantErr: `unknown parameter "endpiont"`},
		{name: "unknown scheme", url: "gs://bucket", wantErr: "unsupported scheme"},
		{name: "remote file host", url: "file://otherhost/x", wantErr: "must be local"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.url)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.root, s.(*DirStore).Root())
			assert.DirExists(t, tc.root)
		})
	}
}

func TestPutIsContentAddressedAndIdempotent(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	content := []byte(`{"output_tput_per_gpu": 1234.5}`)
	sum := sha256.Sum256(content)
	hexSum := hex.EncodeToString(sum[:])

	uri1, err := s.Put(ctx, "agg.json", bytes.NewReader(content))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(uri1, "file:///"), uri1)
	assert.True(t, strings.HasSuffix(uri1, "/sha256/"+hexSum[:2]+"/"+hexSum+"/agg.json"), uri1)

	p := filepath.Join(s.Root(), "sha256", hexSum[:2], hexSum, "agg.json")
	st1, err := os.Stat(p)
	require.NoError(t, err)

	uri2, err := s.Put(ctx, "agg.json", bytes.NewReader(content))
	require.NoError(t, err)
	assert.Equal(t, uri1, uri2)
	st2, err := os.Stat(p)
	require.NoError(t, err)
	assert.True(t, os.SameFile(st1, st2), "second put must not replace the stored file")

	got, err := SHA256(uri1)
	require.NoError(t, err)
	assert.Equal(t, hexSum, got)

	// Different content under the same name gets a different URI.
	uri3, err := s.Put(ctx, "agg.json", strings.NewReader("other"))
	require.NoError(t, err)
	assert.NotEqual(t, uri1, uri3)

	// No temp files left behind.
	tmps, err := os.ReadDir(filepath.Join(s.Root(), "tmp"))
	require.NoError(t, err)
	assert.Empty(t, tmps)

	rc, err := s.Open(ctx, uri1)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.Equal(t, content, b)
}

func TestConcurrentPutsOfSameContent(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	content := bytes.Repeat([]byte("records\n"), 10000)
	var wg sync.WaitGroup
	uris := make([]string, 8)
	errs := make([]error, 8)
	for i := range uris {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uris[i], errs[i] = s.Put(context.Background(), "records.jsonl", bytes.NewReader(content))
		}()
	}
	wg.Wait()
	for i := range uris {
		require.NoError(t, errs[i])
		assert.Equal(t, uris[0], uris[i])
	}
	rc, err := s.Open(context.Background(), uris[0])
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, content, b)
}

func TestPutRejectsBadNames(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	for _, name := range []string{"", ".", "..", "a/b", `a\b`, "x\x00y"} {
		_, err := s.Put(context.Background(), name, strings.NewReader("x"))
		assert.Error(t, err, "name %q", name)
	}
}

func TestPutHonoursCancellation(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Put(ctx, "x", strings.NewReader("data"))
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(s.Root())
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotEqual(t, "sha256", e.Name(), "nothing may be committed after cancel")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	uri, err := s.Put(ctx, "log.txt", strings.NewReader("hello"))
	require.NoError(t, err)
	require.NotEmpty(t, uri)
	other := sha256.Sum256([]byte("never stored"))
	otherHex := hex.EncodeToString(other[:])
	missing := fileURI(filepath.Join(s.Root(), "sha256", otherHex[:2], otherHex, "log.txt"))

	tests := []struct {
		name    string
		uri     string
		wantErr string
		is      error
	}{
		{name: "not file scheme", uri: "s3://b/k", wantErr: "not a file:// artifact URI"},
		{name: "outside store", uri: "file:///etc/passwd", wantErr: "not under store"},
		{name: "missing blob", uri: missing, is: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Open(ctx, tc.uri)
			require.Error(t, err)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestOpenDetectsCorruption(t *testing.T) {
	t.Parallel()
	s, err := NewDirStore(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	uri, err := s.Put(ctx, "agg.json", strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	sum, _ := SHA256(uri)
	p := filepath.Join(s.Root(), "sha256", sum[:2], sum, "agg.json")
	require.NoError(t, os.Chmod(p, 0o644))
	require.NoError(t, os.WriteFile(p, []byte(`{"a":2}`), 0o644))

	rc, err := s.Open(ctx, uri)
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.ReadAll(rc)
	require.True(t, errors.Is(err, ErrCorrupt), "got %v", err)
}

func TestSHA256RejectsPlainURIs(t *testing.T) {
	t.Parallel()
	_, err := SHA256("file:///tmp/x.json")
	assert.ErrorContains(t, err, "not content-addressed")
}
