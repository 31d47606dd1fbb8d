// Package gsm8k evaluates an OpenAI-compatible endpoint on GSM8K and scores
// the responses exactly as lm-evaluation-harness does (the gsm8k and
// gsm8k_cot tasks, and InferenceX's chat variant of gsm8k), then gates the
// scores against InferenceX's per-model floors.
package gsm8k

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Canonical public copies of the GSM8K "main" splits (the JSONL files that
// openai/gsm8k on the Hugging Face hub was built from). Load downloads them
// once into the cache directory.
const (
	DefaultTestURL  = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl"
	DefaultTrainURL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/train.jsonl"
)

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

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// Load reads a GSM8K JSONL split from a local path or an http(s) URL. A URL
// is fetched once into cacheDir (DefaultCacheDir when empty) and read from
// there afterwards, so repeated evals work offline.
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
	p, err := cachedDownload(pathOrURL, cacheDir)
	if err != nil {
		return nil, err
	}
	return Load(p, "")
}

// cachedDownload returns the cache path for u, downloading it first if it is
// not cached. The file is written to a temp name and renamed so a crash never
// leaves a truncated split in the cache.
func cachedDownload(u, cacheDir string) (string, error) {
	if cacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return "", err
		}
		cacheDir = d
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("gsm8k: bad dataset URL %q: %w", u, err)
	}
	// Host plus path keeps two mirrors' test.jsonl apart.
	name := strings.NewReplacer("/", "_", ":", "_").Replace(pu.Host + path.Clean(pu.Path))
	dst := filepath.Join(cacheDir, name)
	if st, err := os.Stat(dst); err == nil && st.Size() > 0 {
		return dst, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("gsm8k: bad dataset URL %q: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("gsm8k: download %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("gsm8k: download %s: HTTP %s", u, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("gsm8k: download %s: %w", u, err)
	}
	// Validate before caching so a proxy's HTML error page is never cached.
	if _, err := parseJSONL(bytes.NewReader(body), u); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(cacheDir, name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("gsm8k: cache: %w", err)
	}
	return dst, nil
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
