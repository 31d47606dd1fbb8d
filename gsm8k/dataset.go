// Package gsm8k evaluates an OpenAI-compatible endpoint on GSM8K and scores
// the responses exactly as lm-evaluation-harness does (the gsm8k and
// gsm8k_cot tasks, and InferenceX's chat variant of gsm8k), then gates the
// scores against InferenceX's per-model floors.
package gsm8k

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/internal/atomicfile"
	"github.com/sweepflow/sweepflow/internal/errtext"
)

// Canonical public copies of the GSM8K "main" splits (the JSONL files that
// openai/gsm8k on the Hugging Face hub was built from). Resolve downloads them
// once into the cache directory, after checking CanonicalSums.
const (
	DefaultTestURL  = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl"
	DefaultTrainURL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/train.jsonl"
)

// EnvDir names a directory holding test.jsonl and train.jsonl; Resolve uses
// it before the cache and the network.
const EnvDir = "SWEEPFLOW_GSM8K_DIR"

// FileSum is what a downloaded file must be before it is cached or trusted.
type FileSum struct {
	Size   int64
	SHA256 string // lower-case hex
}

// CanonicalSums are the canonical splits' sizes and SHA-256s, by URL. A
// download or cached copy of these URLs that differs is never used.
var CanonicalSums = map[string]FileSum{
	DefaultTestURL:  {Size: 749738, SHA256: "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"},
	DefaultTrainURL: {Size: 4166206, SHA256: "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"},
}

// Doc is one GSM8K problem. ID is the 0-based line index in its split, which
// is also lm-eval's doc_id. Answer is the full reference solution; Gold is the
// text after "#### " with commas removed.
type Doc struct {
	ID       int
	Question string
	Answer   string
	Gold     string
}

// DefaultCacheDir is $XDG_CACHE_HOME/sweepflow/gsm8k, falling back to the
// platform user cache directory when XDG_CACHE_HOME is unset.
func DefaultCacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("gsm8k: no cache directory: %w", err)
		}
		base = d
	}
	return filepath.Join(base, "sweepflow", "gsm8k"), nil
}

// Splits are the local paths of the two split files.
type Splits struct{ Test, Train string }

// Source says where Resolve looks for the splits; the zero value is the
// default ($SWEEPFLOW_GSM8K_DIR, then DefaultCacheDir, then the canonical
// URLs verified against CanonicalSums).
type Source struct {
	// Dir holds test.jsonl and train.jsonl (e.g. the worker's --gsm8k-dir);
	// empty means $SWEEPFLOW_GSM8K_DIR.
	Dir      string
	CacheDir string // default DefaultCacheDir()
	// TestURL and TrainURL default to DefaultTestURL and DefaultTrainURL.
	TestURL, TrainURL string
	// Sums are the expected size and SHA-256 per URL (default
	// CanonicalSums). A URL without an entry is only checked to be GSM8K
	// JSONL.
	Sums   map[string]FileSum
	Client *http.Client // default http.DefaultClient
}

// Resolve returns local paths of the test and train splits: from src.Dir or
// $SWEEPFLOW_GSM8K_DIR when set (both files must be readable there), else
// from the cache when its copies match their sums, else downloaded from the
// URLs, verified by size and SHA-256, and cached. Offline with nothing
// usable, the error is one line that says what to set.
func Resolve(ctx context.Context, src Source) (Splits, error) {
	dir, from := src.Dir, "directory "+src.Dir
	if dir == "" {
		dir = os.Getenv(EnvDir)
		from = EnvDir + "=" + dir
	}
	if dir != "" {
		sp := Splits{Test: filepath.Join(dir, "test.jsonl"), Train: filepath.Join(dir, "train.jsonl")}
		for _, p := range []string{sp.Test, sp.Train} {
			if err := checkReadable(p); err != nil {
				return Splits{}, fmt.Errorf("gsm8k: %s: %v (it must hold test.jsonl and train.jsonl)", from, err)
			}
		}
		return sp, nil
	}
	f, err := newFetcher(src)
	if err != nil {
		return Splits{}, err
	}
	var sp Splits
	if sp.Test, err = f.fetch(ctx, orDefault(src.TestURL, DefaultTestURL)); err != nil {
		return Splits{}, err
	}
	if sp.Train, err = f.fetch(ctx, orDefault(src.TrainURL, DefaultTrainURL)); err != nil {
		return Splits{}, err
	}
	return sp, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkReadable opens p so that a missing, unreadable or empty split is
// reported when the directory is chosen, not halfway into a run.
func checkReadable(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", p)
	}
	if _, err := f.Read(make([]byte, 1)); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is empty", p)
		}
		return fmt.Errorf("read %s: %w", p, err)
	}
	return nil
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// Load reads a GSM8K JSONL split from a local path or an http(s) URL. A URL
// is fetched once into cacheDir (DefaultCacheDir when empty) and read from
// there afterwards, so repeated evals work offline; the canonical URLs are
// verified against CanonicalSums.
func Load(pathOrURL string, cacheDir string) ([]Doc, error) {
	if pathOrURL == "" {
		return nil, errors.New("gsm8k: empty dataset path")
	}
	if !isURL(pathOrURL) {
		f, err := os.Open(pathOrURL)
		if err != nil {
			return nil, fmt.Errorf("gsm8k: %w", err)
		}
		defer f.Close()
		return parseJSONL(f, pathOrURL)
	}
	fe, err := newFetcher(Source{CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	p, err := fe.fetch(context.Background(), pathOrURL)
	if err != nil {
		return nil, err
	}
	return Load(p, "")
}

// fetcher downloads split files into a cache directory.
type fetcher struct {
	cacheDir string
	sums     map[string]FileSum
	client   *http.Client
}

func newFetcher(src Source) (*fetcher, error) {
	f := &fetcher{cacheDir: src.CacheDir, sums: src.Sums, client: src.Client}
	if f.cacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		f.cacheDir = d
	}
	if f.sums == nil {
		f.sums = CanonicalSums
	}
	if f.client == nil {
		f.client = http.DefaultClient
	}
	return f, nil
}

// maxUnverified bounds a download that has no expected size.
const maxUnverified = 1 << 30

// fetch returns the cache path for u, downloading it first unless a usable
// copy is cached. A URL with sums is cached under its base name (so the cache
// directory itself holds test.jsonl and train.jsonl) and trusted only when
// its size and SHA-256 match; other URLs are cached under host and path (so
// two mirrors stay apart) once they parse as GSM8K JSONL. The file is written
// to a temp name and renamed, so a crash never leaves a truncated split.
func (f *fetcher) fetch(ctx context.Context, u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("gsm8k: bad dataset URL %q: %w", u, err)
	}
	base := path.Base(pu.Path)
	want, verified := f.sums[u]
	name := strings.NewReplacer("/", "_", ":", "_").Replace(pu.Host + path.Clean(pu.Path))
	if verified {
		name = base
	}
	dst := filepath.Join(f.cacheDir, name)
	stale := ""
	if verified {
		switch err := verifyFile(dst, want); {
		case err == nil:
			return dst, nil
		case !errors.Is(err, fs.ErrNotExist):
			stale = fmt.Sprintf("; cached %s is not used: %v", dst, err)
		}
	} else if st, err := os.Stat(dst); err == nil && st.Size() > 0 {
		return dst, nil
	}
	body, err := f.download(ctx, u, want, verified)
	if err != nil {
		// One line: what failed, why, and what the user can do instead.
		msg := fmt.Sprintf("gsm8k: cannot download %s from %s (%s)%s", base, u, errtext.Folded(err), stale)
		if verified {
			msg += fmt.Sprintf("; set %s to a directory holding test.jsonl and train.jsonl, or put them in %s", EnvDir, f.cacheDir)
		}
		return "", errors.New(msg)
	}
	if err := atomicfile.WriteFile(filepath.Join(f.cacheDir, name), body); err != nil {
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	return dst, nil
}

// download GETs u and checks the body: against want when verified, else that
// it parses as GSM8K JSONL (so a proxy's HTML error page is never cached).
func (f *fetcher) download(ctx context.Context, u string, want FileSum, verified bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already in the message
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	limit := int64(maxUnverified)
	if verified {
		limit = want.Size + 1 // one byte more is enough to see it is too long
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, err
	}
	if verified {
		return body, verifyBytes(body, want)
	}
	if _, err := parseJSONL(bytes.NewReader(body), u); err != nil {
		return nil, err
	}
	return body, nil
}

func verifyBytes(b []byte, want FileSum) error {
	if int64(len(b)) != want.Size {
		return fmt.Errorf("got %d bytes, want %d", len(b), want.Size)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
		return fmt.Errorf("sha256 %s, want %s", got, want.SHA256)
	}
	return nil
}

// verifyFile checks a cached copy; the size is checked first so a wrong
// file is rejected without hashing it.
func verifyFile(p string, want FileSum) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Size() != want.Size {
		return fmt.Errorf("%d bytes, want %d", st.Size(), want.Size)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return verifyBytes(b, want)
}

type rawDoc struct {
	Question *string `json:"question"`
	Answer   *string `json:"answer"`
}

func parseJSONL(r io.Reader, name string) ([]Doc, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var docs []Doc
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rd rawDoc
		if err := json.Unmarshal(b, &rd); err != nil {
			return nil, fmt.Errorf("%s:%d: invalid JSON: %v", name, line, err)
		}
		if rd.Question == nil || *rd.Question == "" {
			return nil, fmt.Errorf("%s:%d: field question: missing or empty", name, line)
		}
		if rd.Answer == nil || *rd.Answer == "" {
			return nil, fmt.Errorf("%s:%d: field answer: missing or empty", name, line)
		}
		i := strings.LastIndex(*rd.Answer, "#### ")
		if i < 0 {
			return nil, fmt.Errorf("%s:%d: field answer: no \"#### \" final-answer line", name, line)
		}
		gold := strings.ReplaceAll(strings.TrimSpace((*rd.Answer)[i+len("#### "):]), ",", "")
		docs = append(docs, Doc{ID: len(docs), Question: *rd.Question, Answer: *rd.Answer, Gold: gold})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no documents", name)
	}
	return docs, nil
}
