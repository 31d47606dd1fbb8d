package gsm8k

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real splits, read from the shared reference directory beside the repo.
var (
	testSplit  = filepath.Join("..", "..", "shared", "datasets", "gsm8k", "test.jsonl")
	trainSplit = filepath.Join("..", "..", "shared", "datasets", "gsm8k", "train.jsonl")
)

var (
	splitsOnce         sync.Once
	testDocs, trainDoc []Doc
	splitsErr          error
)

// realSplits loads both splits once per test binary.
func realSplits(t testing.TB) (test, train []Doc) {
	t.Helper()
	splitsOnce.Do(func() {
		if testDocs, splitsErr = Load(testSplit, ""); splitsErr == nil {
			trainDoc, splitsErr = Load(trainSplit, "")
		}
	})
	require.NoError(t, splitsErr)
	return testDocs, trainDoc
}

func TestLoadRealSplits(t *testing.T) {
	t.Parallel()
	test, train := realSplits(t)
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

func TestLoadURLCaches(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(testSplit)
	require.NoError(t, err)
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		switch r.URL.Path {
		case "/data/test.jsonl":
			w.Write(body)
		case "/html/test.jsonl":
			w.Write([]byte("<html>rate limited</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()

	docs, err := Load(srv.URL+"/data/test.jsonl", cache)
	require.NoError(t, err)
	require.Len(t, docs, 1319)
	again, err := Load(srv.URL+"/data/test.jsonl", cache)
	require.NoError(t, err)
	assert.Equal(t, docs, again)
	assert.Equal(t, 1, hits, "second load must come from the cache")

	_, err = Load(srv.URL+"/missing.jsonl", cache)
	require.ErrorContains(t, err, "404")

	_, err = Load(srv.URL+"/html/test.jsonl", cache)
	require.ErrorContains(t, err, "invalid JSON")
	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a bad download must not be cached")

	// The cache alone serves the split once the server is gone.
	srv.Close()
	offline, err := Load(srv.URL+"/data/test.jsonl", cache)
	require.NoError(t, err)
	assert.Len(t, offline, 1319)
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg")
	d, err := DefaultCacheDir()
	require.NoError(t, err)
	assert.Equal(t, "/tmp/xdg/sweepflow/gsm8k", d)
}
