package staging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkpoint writes a small fake checkpoint (nested dirs, shards of varying
// size, an empty file) and returns path -> content.
func checkpoint(t testing.TB, dir string, sizes map[string]int) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(len(sizes)), 7))
	files := map[string][]byte{}
	for p, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, b, 0o644))
		files[p] = b
	}
	return files
}

var smallCheckpoint = map[string]int{
	"config.json":                      300,
	"tokenizer.json":                   5000,
	"model-00001-of-00003.safetensors": 70000,
	"model-00002-of-00003.safetensors": 65000,
	"model-00003-of-00003.safetensors": 12345,
	"dspark/head.safetensors":          4096,
	"empty.txt":                        0,
}

func assertSameTree(t *testing.T, files map[string][]byte, dst string) {
	t.Helper()
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(p)))
		require.NoError(t, err, p)
		assert.Equal(t, want, got, p)
	}
	assertNoTemps(t, dst)
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		assert.False(t, strings.HasPrefix(d.Name(), tmpPrefix), "leftover temp file %s", p)
		return nil
	}))
}

func totalBytes(sizes map[string]int) int64 {
	var n int64
	for _, s := range sizes {
		n += int64(s)
	}
	return n
}

func TestStageCopiesThenSecondRunCopiesNothing(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "nvme", "ckpt")
	files := checkpoint(t, src, smallCheckpoint)

	var calls []Progress
	r1, err := Stage(context.Background(), Options{Src: src, Dst: dst, Parallel: 2, OnProgress: func(p Progress) { calls = append(calls, p) }})
	require.NoError(t, err)
	assert.Equal(t, len(files), r1.FilesCopied)
	assert.Equal(t, 0, r1.FilesSkipped)
	assert.Equal(t, totalBytes(smallCheckpoint), r1.BytesCopied)
	assertSameTree(t, files, dst)

	// One call per file, Done growing by one each time.
	require.Len(t, calls, len(files))
	for i, c := range calls {
		assert.Len(t, c.Done, i+1)
	}
	last := calls[len(calls)-1]
	assert.Equal(t, totalBytes(smallCheckpoint), last.BytesCopied)
	assert.Equal(t, totalBytes(smallCheckpoint), last.TotalBytes)
	assert.Equal(t, len(files), last.TotalFiles)
	done := append([]string(nil), last.Done...)
	sort.Strings(done)
	want := make([]string, 0, len(files))
	for p := range files {
		want = append(want, p)
	}
	sort.Strings(want)
	assert.Equal(t, want, done)

	// The destination manifest is the source manifest, and its hash is reported.
	b, err := os.ReadFile(filepath.Join(dst, ManifestName))
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	assert.Equal(t, hex.EncodeToString(sum[:]), r1.ManifestSHA256)
	dm, err := ReadManifest(filepath.Join(dst, ManifestName))
	require.NoError(t, err)
	assert.Equal(t, totalBytes(smallCheckpoint), dm.TotalBytes)
	assert.Len(t, dm.Files, len(files))

	r2, err := Stage(context.Background(), Options{Src: src, Dst: dst})
	require.NoError(t, err)
	assert.Equal(t, int64(0), r2.BytesCopied)
	assert.Equal(t, 0, r2.FilesCopied)
	assert.Equal(t, len(files), r2.FilesSkipped)
	assert.Equal(t, totalBytes(smallCheckpoint), r2.BytesSkipped)
	assert.Equal(t, r1.ManifestSHA256, r2.ManifestSHA256)
}

func TestStageCorruptedDestination(t *testing.T) {
	t.Parallel()
	const victim = "model-00002-of-00003.safetensors"
	tests := []struct {
		name       string
		inResume   bool
		verify     bool
		sameSize   bool
		wantRecopy bool
	}{
		{name: "same size, not in resume: hashed and recopied", sameSize: true, wantRecopy: true},
		{name: "same size, in resume, verify: recopied", inResume: true, verify: true, sameSize: true, wantRecopy: true},
		{name: "same size, in resume: trusted (documented rule)", inResume: true, sameSize: true, wantRecopy: false},
		{name: "truncated, in resume: size check catches it", inResume: true, sameSize: false, wantRecopy: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dst := t.TempDir(), t.TempDir()
			files := checkpoint(t, src, smallCheckpoint)
			_, err := Stage(context.Background(), Options{Src: src, Dst: dst})
			require.NoError(t, err)

			bad := append([]byte(nil), files[victim]...)
			bad[len(bad)/2] ^= 0xff
			if !tc.sameSize {
				bad = bad[:len(bad)-10]
			}
			require.NoError(t, os.WriteFile(filepath.Join(dst, victim), bad, 0o644))

			opts := Options{Src: src, Dst: dst, VerifyExisting: tc.verify}
			if tc.inResume {
				opts.Resume = &Progress{Done: []string{victim}}
			}
			r, err := Stage(context.Background(), opts)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dst, victim))
			require.NoError(t, err)
			if tc.wantRecopy {
				assert.Equal(t, 1, r.FilesCopied)
				assert.Equal(t, int64(len(files[victim])), r.BytesCopied)
				assert.Equal(t, files[victim], got)
			} else {
				assert.Equal(t, 0, r.FilesCopied)
				assert.Equal(t, bad, got)
			}
		})
	}
}

// stageUntil runs one attempt, one file at a time, and cancels it (a worker
// loss) at the first progress report stop accepts; it returns that report.
func stageUntil(t *testing.T, src, dst string, resume *Progress, stop func(Progress) bool) Progress {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last Progress
	_, err := Stage(ctx, Options{Src: src, Dst: dst, Parallel: 1, Resume: resume, OnProgress: func(p Progress) {
		last = p
		if stop(p) {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	return last
}

func TestStageResumesFromProgress(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	files := checkpoint(t, src, smallCheckpoint)

	// First attempt dies (cancelled) after three files, like a worker loss.
	last := stageUntil(t, src, dst, nil, func(p Progress) bool { return len(p.Done) == 3 })
	require.Len(t, last.Done, 3)
	assertNoTemps(t, dst)
	var doneBytes int64
	for _, p := range last.Done {
		doneBytes += int64(len(files[p]))
	}
	assert.Equal(t, doneBytes, last.BytesCopied)

	// The retry gets the heartbeated progress and copies only the rest.
	var final Progress
	r, err := Stage(context.Background(), Options{Src: src, Dst: dst, Resume: &last, OnProgress: func(p Progress) { final = p }})
	require.NoError(t, err)
	assert.Equal(t, len(files)-3, r.FilesCopied)
	assert.Equal(t, 3, r.FilesSkipped)
	assert.Equal(t, totalBytes(smallCheckpoint)-doneBytes, r.BytesCopied)
	assert.Equal(t, totalBytes(smallCheckpoint), final.BytesCopied, "progress bytes are cumulative across attempts")
	assert.Len(t, final.Done, len(files))
	assertSameTree(t, files, dst)
}

// TestStageFailedResumeKeepsEarlierProgress: a resumed attempt that dies
// before it reaches the files an earlier attempt verified still reports them
// as done, so the next retry trusts them instead of re-hashing.
func TestStageFailedResumeKeepsEarlierProgress(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	files := checkpoint(t, src, smallCheckpoint)

	// Attempt 1 verifies three files, then dies.
	first := stageUntil(t, src, dst, nil, func(p Progress) bool { return len(p.Done) == 3 })
	require.Len(t, first.Done, 3)

	// Attempt 2 resumes and dies at its first progress report.
	second := stageUntil(t, src, dst, &first, func(Progress) bool { return true })
	assert.Subset(t, second.Done, first.Done, "the earlier attempt's verified files stay listed")
	seen := map[string]bool{}
	for _, f := range second.Done {
		assert.False(t, seen[f], "%s listed twice", f)
		seen[f] = true
	}

	// Attempt 3 re-hashes nothing it was told about: only the rest is copied.
	r, err := Stage(context.Background(), Options{Src: src, Dst: dst, Resume: &second})
	require.NoError(t, err)
	assert.Equal(t, len(files)-len(second.Done), r.FilesCopied)
	assertSameTree(t, files, dst)
}

func TestStageSourceMismatch(t *testing.T) {
	t.Parallel()
	const victim = "model-00001-of-00003.safetensors"
	src, dst := t.TempDir(), t.TempDir()
	files := checkpoint(t, src, smallCheckpoint)
	m, err := LoadOrBuildSourceManifest(context.Background(), src)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(src, ManifestName))
	require.Len(t, m.Files, len(files))

	// Same size, different bytes: the cached manifest still looks consistent,
	// so the copy's hash check must catch it.
	bad := append([]byte(nil), files[victim]...)
	bad[0] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(src, victim), bad, 0o644))

	_, err = Stage(context.Background(), Options{Src: src, Dst: dst, Parallel: 1})
	require.ErrorIs(t, err, ErrChecksumMismatch)
	assert.Contains(t, err.Error(), victim)
	assert.NoFileExists(t, filepath.Join(dst, victim))
	assert.NoFileExists(t, filepath.Join(dst, ManifestName))
	assertNoTemps(t, dst)
}

func TestStageCancelMidFileLeavesNoPartialFile(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	const big = "model-00001-of-00001.safetensors"
	checkpoint(t, src, map[string]int{big: 3*chunkSize + 17})
	// A temp file from an attempt killed earlier must be cleaned up too.
	require.NoError(t, os.WriteFile(filepath.Join(dst, tmpPrefix+big+"-123"), []byte("half"), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	chunks := 0
	_, err := Stage(ctx, Options{Src: src, Dst: dst, chunkHook: func() {
		chunks++
		if chunks == 1 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, chunks, "copy must stop at the next chunk boundary")
	assert.NoFileExists(t, filepath.Join(dst, big))
	assert.NoFileExists(t, filepath.Join(dst, ManifestName))
	assertNoTemps(t, dst)
}

func TestLoadOrBuildSourceManifest(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	checkpoint(t, src, smallCheckpoint)
	ctx := context.Background()

	m1, err := LoadOrBuildSourceManifest(ctx, src)
	require.NoError(t, err)
	built, err := BuildManifest(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, built, m1)
	for i := 1; i < len(m1.Files); i++ {
		assert.Less(t, m1.Files[i-1].Path, m1.Files[i].Path)
	}

	// A consistent cache is used as-is (prove it by planting a fake hash).
	planted := *m1
	planted.Files = append([]FileEntry(nil), m1.Files...)
	planted.Files[0].SHA256 = strings.Repeat("ab", 32)
	_, err = WriteManifest(src, &planted)
	require.NoError(t, err)
	m2, err := LoadOrBuildSourceManifest(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("ab", 32), m2.Files[0].SHA256)

	// A size change makes the cache inconsistent: it is rebuilt and rewritten.
	require.NoError(t, os.WriteFile(filepath.Join(src, "config.json"), []byte("{}"), 0o644))
	m3, err := LoadOrBuildSourceManifest(ctx, src)
	require.NoError(t, err)
	fresh, err := BuildManifest(ctx, src)
	require.NoError(t, err)
	assert.Equal(t, fresh, m3)
	onDisk, err := ReadManifest(filepath.Join(src, ManifestName))
	require.NoError(t, err)
	assert.Equal(t, fresh, onDisk)

	// A new file also invalidates it.
	require.NoError(t, os.WriteFile(filepath.Join(src, "extra.bin"), []byte("x"), 0o644))
	m4, err := LoadOrBuildSourceManifest(ctx, src)
	require.NoError(t, err)
	assert.Len(t, m4.Files, len(smallCheckpoint)+1)
}

func TestManifestFollowsFileSymlinks(t *testing.T) {
	t.Parallel()
	src, blobs, dst := t.TempDir(), t.TempDir(), t.TempDir()
	files := checkpoint(t, blobs, map[string]int{"blob1": 1000})
	require.NoError(t, os.Symlink(filepath.Join(blobs, "blob1"), filepath.Join(src, "model.safetensors")))
	_, err := Stage(context.Background(), Options{Src: src, Dst: dst})
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dst, "model.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, files["blob1"], got)
	st, err := os.Lstat(filepath.Join(dst, "model.safetensors"))
	require.NoError(t, err)
	assert.True(t, st.Mode().IsRegular(), "node-local copy must be a real file")
}

func TestStageBadInput(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	checkpoint(t, src, map[string]int{"a": 1})
	notDir := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	tests := []struct {
		name     string
		src, dst string
		wantErr  string
	}{
		{name: "no src", dst: base, wantErr: "source and a destination"},
		{name: "no dst", src: src, wantErr: "source and a destination"},
		{name: "dst inside src", src: src, dst: filepath.Join(src, "nvme"), wantErr: "must not contain one another"},
		{name: "src inside dst", src: src, dst: base, wantErr: "must not contain one another"},
		{name: "same dir", src: src, dst: src, wantErr: "must not contain one another"},
		{name: "missing src", src: filepath.Join(base, "nope"), dst: filepath.Join(base, "d"), wantErr: "no such file"},
		{name: "src not a dir", src: notDir, dst: filepath.Join(base, "d"), wantErr: "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Stage(context.Background(), Options{Src: tc.src, Dst: tc.dst})
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestOnProgressCallsNeverOverlap(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	sizes := map[string]int{}
	for i := range 24 {
		sizes[fmt.Sprintf("shards/%02d.bin", i)] = 2000 + i
	}
	checkpoint(t, src, sizes)
	var mu sync.Mutex
	busy, overlaps, calls := false, 0, 0
	_, err := Stage(context.Background(), Options{Src: src, Dst: dst, Parallel: 8, OnProgress: func(Progress) {
		mu.Lock()
		if busy {
			overlaps++
		}
		busy = true
		calls++
		mu.Unlock()
		mu.Lock()
		busy = false
		mu.Unlock()
	}})
	require.NoError(t, err)
	assert.Equal(t, 0, overlaps)
	assert.Equal(t, len(sizes), calls)
}

// BenchmarkStage measures copy+verify throughput into a fresh destination
// (page cache warm, so this is the CPU/memcpy/sha256 ceiling, not NVMe).
func BenchmarkStage(b *testing.B) {
	for _, par := range []int{1, 4} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			src := b.TempDir()
			sizes := map[string]int{}
			for i := range 8 {
				sizes[fmt.Sprintf("model-%05d.safetensors", i)] = 16 << 20
			}
			checkpoint(b, src, sizes)
			_, err := LoadOrBuildSourceManifest(context.Background(), src)
			require.NoError(b, err)
			b.SetBytes(totalBytes(sizes))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dst := filepath.Join(b.TempDir(), "dst")
				b.StartTimer()
				_, err := Stage(context.Background(), Options{Src: src, Dst: dst, Parallel: par})
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkVerifyExisting measures the re-hash pass of a second run.
func BenchmarkVerifyExisting(b *testing.B) {
	src, dst := b.TempDir(), b.TempDir()
	sizes := map[string]int{"a.safetensors": 32 << 20, "b.safetensors": 32 << 20}
	checkpoint(b, src, sizes)
	_, err := Stage(context.Background(), Options{Src: src, Dst: dst})
	require.NoError(b, err)
	b.SetBytes(totalBytes(sizes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Stage(context.Background(), Options{Src: src, Dst: dst, VerifyExisting: true})
		require.NoError(b, err)
		require.Zero(b, r.BytesCopied)
	}
}
