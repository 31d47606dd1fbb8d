package gsm8k

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

// The fixture splits: problems written for sweepflow in GSM8K's format (see
// testdata/gsm8k/README.md), so unit tests need nothing beside the repository.
var (
	fixtureDir = filepath.Join("testdata", "gsm8k")
	testSplit  = filepath.Join(fixtureDir, "test.jsonl")
	trainSplit = filepath.Join(fixtureDir, "train.jsonl")
)

const fixtureTestLen, fixtureTrainLen = 12, 10

// fixtureSplits loads the fixture splits.
func fixtureSplits(t testing.TB) (test, train []Doc) {
	t.Helper()
	test, err := Load(testSplit, "")
	require.NoError(t, err)
	train, err = Load(trainSplit, "")
	require.NoError(t, err)
	return test, train
}

var (
	realOnce            sync.Once
	realTest, realTrain []Doc
	realErr             error
)

// realSplits loads the real splits from $SWEEPFLOW_GSM8K_DIR once per test
// binary, or skips t: it is for reference tests only.
func realSplits(t testing.TB) (test, train []Doc, testPath, trainPath string) {
	t.Helper()
	dir := reftest.GSM8K(t)
	testPath, trainPath = filepath.Join(dir, "test.jsonl"), filepath.Join(dir, "train.jsonl")
	realOnce.Do(func() {
		if realTest, realErr = Load(testPath, ""); realErr == nil {
			realTrain, realErr = Load(trainPath, "")
		}
	})
	require.NoError(t, realErr)
	return realTest, realTrain, testPath, trainPath
}

// synthSplit writes n distinct generated problems (our own, in GSM8K's
// format) for tests whose point needs more documents than the fixture has:
// failure-rate limits, concurrency, early aborts.
func synthSplit(t testing.TB, n int) (string, []Doc) {
	t.Helper()
	p := gsm8kfixture.Split(t, n)
	docs, err := Load(p, "")
	require.NoError(t, err)
	require.Len(t, docs, n)
	return p, docs
}

func TestLoadFixtureSplits(t *testing.T) {
	t.Parallel()
	test, train := fixtureSplits(t)
	require.Len(t, test, fixtureTestLen)
	require.Len(t, train, fixtureTrainLen)
	assert.Equal(t, 0, test[0].ID)
	assert.Equal(t, "33", test[0].Gold)
	assert.Contains(t, test[0].Question, "Mara")
	assert.Equal(t, "1250", test[3].Gold, "commas are dropped from the gold")
	assert.True(t, strings.HasSuffix(test[3].Answer, "#### 1,250"), "the answer is kept verbatim")
	assert.Equal(t, fixtureTestLen-1, test[fixtureTestLen-1].ID)
	for _, d := range append(append([]Doc{}, test...), train...) {
		assert.NotContains(t, d.Gold, ",", "doc %d", d.ID)
		assert.NotEmpty(t, d.Gold, "doc %d", d.ID)
	}
}

// TestLoadRealSplits pins the real splits' shape (reference test).
func TestLoadRealSplits(t *testing.T) {
	t.Parallel()
	test, train, _, _ := realSplits(t)
	require.Len(t, test, 1319)
	require.Len(t, train, 7473)
	assert.Equal(t, 0, test[0].ID)
	assert.Equal(t, "18", test[0].Gold)
	assert.Contains(t, test[0].Question, "Janet")
	assert.Equal(t, 1318, test[1318].ID)
	for _, d := range append(append([]Doc{}, test...), train...) {
		assert.NotContains(t, d.Gold, ",", "doc %d", d.ID)
		assert.NotEmpty(t, d.Gold, "doc %d", d.ID)
	}
}

// TestCanonicalSumsMatchRealSplit checks the download table against the real
// files (reference test): a wrong table would reject every download.
func TestCanonicalSumsMatchRealSplit(t *testing.T) {
	t.Parallel()
	dir := reftest.GSM8K(t)
	for u, name := range map[string]string{DefaultTestURL: "test.jsonl", DefaultTrainURL: "train.jsonl"} {
		require.NoError(t, verifyFile(filepath.Join(dir, name), CanonicalSums[u]), name)
	}
}

func TestCanonicalSums(t *testing.T) {
	t.Parallel()
	assert.Equal(t, map[string]FileSum{
		DefaultTestURL:  {749738, "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"},
		DefaultTrainURL: {4166206, "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"},
	}, CanonicalSums)
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want string }{
		{"bad json", `{"question":"a","answer":"#### 1"}` + "\n{oops\n", "bad.jsonl:2: invalid JSON"},
		{"missing question", `{"answer":"#### 1"}`, "bad.jsonl:1: field question: missing or empty"},
		{"missing answer", `{"question":"q"}`, "bad.jsonl:1: field answer: missing or empty"},
		{"no hashes", `{"question":"q","answer":"it is 5"}`, `bad.jsonl:1: field answer: no "#### " final-answer line`},
		{"empty", "\n\n", "bad.jsonl: no documents"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o644))
			_, err := Load(p, "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := Load(filepath.Join(t.TempDir(), "nope.jsonl"), "")
	require.ErrorContains(t, err, "nope.jsonl")
	_, err = Load("", "")
	require.ErrorContains(t, err, "empty dataset path")
}

// splitServer serves the fixture splits (and broken variants) and counts
// requests, so tests can tell a cache hit from a download.
type splitServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newSplitServer(t *testing.T) *splitServer {
	t.Helper()
	test, err := os.ReadFile(testSplit)
	require.NoError(t, err)
	train, err := os.ReadFile(trainSplit)
	require.NoError(t, err)
	s := &splitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch r.URL.Path {
		case "/data/test.jsonl", "/mirror/test.jsonl":
			w.Write(test)
		case "/data/train.jsonl":
			w.Write(train)
		case "/html/test.jsonl":
			w.Write([]byte("<html>rate limited</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// sumOf is the FileSum of a fixture file.
func sumOf(t *testing.T, p string) FileSum {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	h := sha256.Sum256(b)
	return FileSum{Size: int64(len(b)), SHA256: hex.EncodeToString(h[:])}
}

// TestLoadURLCaches covers URLs without sums (a user's mirror): they are
// checked to be GSM8K JSONL and cached under host and path.
func TestLoadURLCaches(t *testing.T) {
	t.Parallel()
	srv := newSplitServer(t)
	cache := t.TempDir()

	docs, err := Load(srv.URL+"/mirror/test.jsonl", cache)
	require.NoError(t, err)
	require.Len(t, docs, fixtureTestLen)
	again, err := Load(srv.URL+"/mirror/test.jsonl", cache)
	require.NoError(t, err)
	assert.Equal(t, docs, again)
	assert.EqualValues(t, 1, srv.hits.Load(), "second load must come from the cache")

	_, err = Load(srv.URL+"/missing.jsonl", cache)
	require.ErrorContains(t, err, "404")

	_, err = Load(srv.URL+"/html/test.jsonl", cache)
	require.ErrorContains(t, err, "invalid JSON")
	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a bad download must not be cached")

	// The cache alone serves the split once the server is gone.
	srv.Close()
	offline, err := Load(srv.URL+"/mirror/test.jsonl", cache)
	require.NoError(t, err)
	assert.Len(t, offline, fixtureTestLen)
}

// TestResolveDownloadVerified drives Resolve's cache and download steps
// against a local server, with the fixture's sums injected in place of
// CanonicalSums. Not parallel: it clears $SWEEPFLOW_GSM8K_DIR, which comes
// first in the resolution order.
func TestResolveDownloadVerified(t *testing.T) {
	t.Setenv(EnvDir, "")
	testSum, trainSum := sumOf(t, testSplit), sumOf(t, trainSplit)
	fixtureBytes, err := os.ReadFile(testSplit)
	require.NoError(t, err)
	otherSha := FileSum{Size: testSum.Size, SHA256: strings.Repeat("0", 64)}

	cases := []struct {
		name     string
		testSum  FileSum
		cached   string // content already in the cache as test.jsonl
		offline  bool
		testPath string // default /data/test.jsonl
		wantHits int64
		wantErr  []string
	}{
		{name: "download and cache", testSum: testSum, wantHits: 2},
		{name: "valid cache is used offline", testSum: testSum, cached: string(fixtureBytes), offline: true, wantHits: 0,
			wantErr: []string{"cannot download train.jsonl"}}, // train.jsonl was not cached
		{name: "mismatched cache is downloaded again", testSum: testSum, cached: "{\"question\":\"q\",\"answer\":\"#### 1\"}\n", wantHits: 2},
		{name: "size mismatch", testSum: FileSum{Size: testSum.Size + 1, SHA256: testSum.SHA256}, wantHits: 1,
			wantErr: []string{fmt.Sprintf("got %d bytes, want %d", testSum.Size, testSum.Size+1)}},
		{name: "sha256 mismatch", testSum: otherSha, wantHits: 1,
			wantErr: []string{"sha256 " + testSum.SHA256 + ", want " + otherSha.SHA256}},
		{name: "HTTP error", testSum: testSum, testPath: "/missing/test.jsonl", wantHits: 1, wantErr: []string{"404"}},
		{name: "offline", testSum: testSum, offline: true, wantErr: []string{"connect: connection refused"}},
		{name: "offline with a stale cache", testSum: testSum, cached: "stale", offline: true,
			wantErr: []string{"is not used: 5 bytes, want"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSplitServer(t)
			if tc.offline {
				srv.Close()
			}
			cache := t.TempDir()
			if tc.cached != "" {
				require.NoError(t, os.WriteFile(filepath.Join(cache, "test.jsonl"), []byte(tc.cached), 0o644))
			}
			src := Source{
				CacheDir: cache,
				TestURL:  srv.URL + orDefault(tc.testPath, "/data/test.jsonl"),
				TrainURL: srv.URL + "/data/train.jsonl",
			}
			src.Sums = map[string]FileSum{src.TestURL: tc.testSum, src.TrainURL: trainSum}
			sp, err := Resolve(context.Background(), src)
			assert.Equal(t, tc.wantHits, srv.hits.Load(), "requests")
			if tc.wantErr != nil {
				require.Error(t, err)
				msg := err.Error()
				assert.NotContains(t, msg, "\n", "one line")
				for _, w := range tc.wantErr {
					assert.Contains(t, msg, w)
				}
				// The line says what to do.
				assert.Contains(t, msg, "set SWEEPFLOW_GSM8K_DIR to a directory holding test.jsonl and train.jsonl, or put them in "+cache)
				if tc.cached == "" {
					_, serr := os.Stat(filepath.Join(cache, "test.jsonl"))
					assert.ErrorIs(t, serr, os.ErrNotExist, "a rejected download is not cached")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Splits{Test: filepath.Join(cache, "test.jsonl"), Train: filepath.Join(cache, "train.jsonl")}, sp)
			require.NoError(t, verifyFile(sp.Test, testSum))
			require.NoError(t, verifyFile(sp.Train, trainSum))
			// A second resolve is served from the cache, even offline.
			srv.Close()
			again, err := Resolve(context.Background(), src)
			require.NoError(t, err)
			assert.Equal(t, sp, again)
		})
	}
}

// TestResolveOfflineCanonical is what a user without network sees: the real
// canonical URLs and sums, and a transport that cannot connect.
func TestResolveOfflineCanonical(t *testing.T) {
	t.Setenv(EnvDir, "")
	cache := t.TempDir()
	offline := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("dial tcp: lookup raw.githubusercontent.com: no such host")
	})}
	_, err := Resolve(context.Background(), Source{CacheDir: cache, Client: offline})
	require.Error(t, err)
	assert.Equal(t, "gsm8k: cannot download test.jsonl from "+DefaultTestURL+
		" (dial tcp: lookup raw.githubusercontent.com: no such host); set SWEEPFLOW_GSM8K_DIR to a directory holding test.jsonl and train.jsonl, or put them in "+cache,
		err.Error())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestResolveDir covers the first step: an explicit directory or
// $SWEEPFLOW_GSM8K_DIR wins over the cache and network, and a directory
// without readable splits is a clear error.
func TestResolveDir(t *testing.T) {
	fixture, err := filepath.Abs(fixtureDir)
	require.NoError(t, err)
	empty := t.TempDir()
	onlyTest := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(onlyTest, "test.jsonl"), []byte("x\n"), 0o644))
	emptyTrain := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(emptyTrain, "test.jsonl"), []byte("x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(emptyTrain, "train.jsonl"), nil, 0o644))
	dirTest := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dirTest, "test.jsonl"), 0o755))

	cases := []struct {
		name, dir, env string
		want           string // resolved directory
		wantErr        []string
	}{
		{name: "explicit dir", dir: fixture, want: fixture},
		{name: "env dir", env: fixture, want: fixture},
		{name: "explicit dir beats env", dir: fixture, env: empty, want: fixture},
		{name: "env dir missing files", env: empty, wantErr: []string{
			"gsm8k: SWEEPFLOW_GSM8K_DIR=" + empty + ": open " + filepath.Join(empty, "test.jsonl") + ": no such file or directory (it must hold test.jsonl and train.jsonl)"}},
		{name: "explicit dir missing train", dir: onlyTest, wantErr: []string{
			"gsm8k: directory " + onlyTest + ": open " + filepath.Join(onlyTest, "train.jsonl") + ": no such file or directory"}},
		{name: "empty train", dir: emptyTrain, wantErr: []string{filepath.Join(emptyTrain, "train.jsonl") + " is empty"}},
		{name: "split is a directory", dir: dirTest, wantErr: []string{filepath.Join(dirTest, "test.jsonl") + " is a directory"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDir, tc.env)
			// A closed server: any attempt to download fails the test.
			srv := newSplitServer(t)
			srv.Close()
			sp, err := Resolve(context.Background(), Source{Dir: tc.dir, CacheDir: t.TempDir(),
				TestURL: srv.URL + "/data/test.jsonl", TrainURL: srv.URL + "/data/train.jsonl"})
			assert.Zero(t, srv.hits.Load())
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.NotContains(t, err.Error(), "\n")
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Splits{Test: filepath.Join(tc.want, "test.jsonl"), Train: filepath.Join(tc.want, "train.jsonl")}, sp)
		})
	}
}

// TestRunResolvesDefaultSplits: a Run without paths takes the splits from
// $SWEEPFLOW_GSM8K_DIR (here the fixture), as the worker's eval stage does.
func TestRunResolvesDefaultSplits(t *testing.T) {
	fixture, err := filepath.Abs(fixtureDir)
	require.NoError(t, err)
	t.Setenv(EnvDir, fixture)
	test, _ := fixtureSplits(t)
	f := newFakeServer(t, test)
	res, err := Run(context.Background(), Options{BaseURL: f.URL, Model: "fake", Mode: ModeLMEval, Concurrency: 4, CacheDir: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, fixtureTestLen, res.Summary.NEff)

	t.Setenv(EnvDir, t.TempDir())
	_, err = Run(context.Background(), Options{BaseURL: f.URL, Model: "fake", Mode: ModeLMEval, CacheDir: t.TempDir()})
	require.ErrorContains(t, err, "it must hold test.jsonl and train.jsonl")
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg")
	d, err := DefaultCacheDir()
	require.NoError(t, err)
	assert.Equal(t, "/tmp/xdg/sweepflow/gsm8k", d)
}
