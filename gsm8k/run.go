package gsm8k

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options configures one eval run. Zero values mean the documented default.
type Options struct {
	BaseURL string // e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)
	Model   string
	Mode    Mode
	// Limit scores only the first Limit test documents (0 = all 1,319).
	Limit int
	// Concurrency is the number of requests in flight (default 64;
	// InferenceX uses the point's conc).
	Concurrency int
	// MaxTokens per request (default Mode.DefaultMaxTokens()).
	MaxTokens int
	// RequestTimeout bounds one attempt (default 30 min, InferenceX's 1800 s).
	RequestTimeout time.Duration
	// Retries after the first attempt on 429, 5xx, timeouts and network
	// errors (default 5, lm-eval's max_retries in InferenceX; <0 = none).
	Retries int
	// RetryBackoff is the first retry's wait, doubled per retry up to 10 s
	// (default 1 s).
	RetryBackoff time.Duration
	// Seed is the request seed (default 1234, what lm-eval sends).
	Seed int64
	// TrainPath and TestPath are paths or URLs of the JSONL splits. Empty
	// means Resolve's default: $SWEEPFLOW_GSM8K_DIR, else the verified
	// canonical files cached in CacheDir (downloaded on first use).
	TrainPath, TestPath string
	CacheDir            string
	// Progress, if set, is called after each document completes, serially.
	Progress func(done, total int)
	APIKey   string
	// HTTPClient overrides the default pooled client.
	HTTPClient *http.Client
}

// Sample is one document's request, response and scores; its JSON form is
// one line of the per-sample log and is accepted by RescoreJSONL.
type Sample struct {
	DocID         int         `json:"doc_id"`
	Prompt        string      `json:"prompt"`
	FewshotIDs    []int       `json:"fewshot_ids,omitempty"`
	Response      string      `json:"response"`
	Gold          string      `json:"gold"`
	FinishReason  string      `json:"finish_reason,omitempty"`
	UsedReasoning bool        `json:"used_reasoning_content,omitempty"`
	Attempts      int         `json:"attempts"`
	Error         string      `json:"error,omitempty"`
	Extractions   Extractions `json:"extractions"`
	Matches       Matches     `json:"matches"`
}

// Extractions are the two filters' outputs ("[invalid]" when no match).
type Extractions struct {
	Strict   string `json:"strict"`
	Flexible string `json:"flexible"`
}

// Matches are the two filters' exact_match results.
type Matches struct {
	Strict   bool `json:"strict"`
	Flexible bool `json:"flexible"`
}

// Failed reports whether the request for this sample never succeeded.
func (s Sample) Failed() bool { return s.Error != "" }

// Summary is the run's score. EM* are lm-eval's exact_match means over the
// scored (non-failed) documents and *SE their standard errors
// sqrt(p(1-p)/(n-1)).
type Summary struct {
	Task         string  `json:"task"`
	Mode         Mode    `json:"mode"`
	EMStrict     float64 `json:"em_strict"`
	EMStrictSE   float64 `json:"em_strict_se"`
	EMFlexible   float64 `json:"em_flexible"`
	EMFlexibleSE float64 `json:"em_flexible_se"`
	// NEff is the number of documents scored (lm-eval's n-samples.effective),
	// i.e. requested documents minus failed requests.
	NEff int `json:"n_eff"`
	// InvalidRate is the share of scored responses where strict-match found
	// nothing (a format problem); InvalidRateFlexible the same for
	// flexible-extract (no number at all).
	InvalidRate         float64 `json:"invalid_rate"`
	InvalidRateFlexible float64 `json:"invalid_rate_flexible"`
	FailedRequests      int     `json:"failed_requests"`
}

// Result is a finished run.
type Result struct {
	Summary        Summary
	Samples        []Sample
	FailedRequests int
	// Simulated is true when any response came from sweepflow's simulator.
	Simulated bool
	Elapsed   time.Duration
}

// FailedRequestsError reports that more than 1 % of requests failed after
// retries. The run's scores are not trustworthy and the stage should be
// retried; it is not an accuracy verdict.
type FailedRequestsError struct {
	Failed, Total int
	// Aborted is true when the run stopped early once the limit was passed.
	Aborted bool
	Last    string // the last failure's message
}

func (e *FailedRequestsError) Error() string {
	s := fmt.Sprintf("gsm8k: %d of %d requests failed (more than 1%%)", e.Failed, e.Total)
	if e.Aborted {
		s += ", run aborted"
	}
	return s + ": last error: " + e.Last
}

// Retryable marks the error for callers that classify failures.
func (e *FailedRequestsError) Retryable() bool { return true }

// tooManyFailed is the stage rule: more than 1 % of requests failed.
func tooManyFailed(failed, total int) bool { return failed*100 > total }

// Run evaluates opts.Model on the GSM8K test split. It returns a Result even
// together with a *FailedRequestsError, so the partial run can be recorded.
// A low score is not an error: pass Result.Summary to Gate.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.BaseURL == "" {
		return nil, errors.New("gsm8k: Options.BaseURL is required")
	}
	if opts.Model == "" {
		return nil, errors.New("gsm8k: Options.Model is required")
	}
	if _, err := ParseMode(string(opts.Mode)); err != nil {
		return nil, err
	}
	if opts.Limit < 0 || opts.Concurrency < 0 || opts.MaxTokens < 0 {
		return nil, errors.New("gsm8k: Limit, Concurrency and MaxTokens must not be negative")
	}
	if opts.TestPath == "" || (opts.TrainPath == "" && opts.Mode != ModeCoT) {
		sp, err := Resolve(ctx, Source{CacheDir: opts.CacheDir})
		if err != nil {
			return nil, err
		}
		opts.TestPath = orDefault(opts.TestPath, sp.Test)
		opts.TrainPath = orDefault(opts.TrainPath, sp.Train)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 64
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Minute
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = 5
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = time.Second
	}
	if opts.Seed == 0 {
		opts.Seed = DefaultSeed
	}

	test, err := Load(opts.TestPath, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	var train []Doc
	if opts.Mode != ModeCoT {
		if train, err = Load(opts.TrainPath, opts.CacheDir); err != nil {
			return nil, err
		}
		if len(train) < NumFewshot {
			return nil, fmt.Errorf("gsm8k: train split %s has %d documents, need at least %d", opts.TrainPath, len(train), NumFewshot)
		}
	}
	if opts.Limit > 0 && opts.Limit < len(test) {
		test = test[:opts.Limit]
	}
	prompts := BuildPrompts(opts.Mode, test, train, opts.MaxTokens)

	hc := opts.HTTPClient
	if hc == nil {
		hc = newHTTPClient(opts.Concurrency)
	}
	c := &client{
		http: hc, model: opts.Model, apiKey: opts.APIKey, base: opts.BaseURL, seed: opts.Seed,
		timeout: opts.RequestTimeout, retries: opts.Retries, backoff: opts.RetryBackoff, sleepFunc: sleepCtx,
	}
	if opts.Mode == ModeInferenceX {
		one := 1.0 // InferenceX passes top_p=1 in --gen_kwargs
		c.topP = &one
	}

	start := time.Now()
	samples, failed, simulated, lastErr, aborted := dispatch(ctx, c, prompts, test, opts)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gsm8k: run cancelled after %d of %d documents: %w", countDone(samples), len(samples), err)
	}
	var done []Sample
	if aborted {
		done = make([]Sample, 0, len(samples))
		for _, s := range samples {
			if s.Attempts > 0 {
				done = append(done, s)
			}
		}
	} else {
		done = samples
	}
	res := &Result{
		Summary:        Summarize(opts.Mode, done),
		Samples:        done,
		FailedRequests: failed,
		Simulated:      simulated,
		Elapsed:        time.Since(start),
	}
	if tooManyFailed(failed, len(prompts)) {
		return res, &FailedRequestsError{Failed: failed, Total: len(prompts), Aborted: aborted, Last: lastErr}
	}
	return res, nil
}

func countDone(ss []Sample) int {
	n := 0
	for _, s := range ss {
		if s.Attempts > 0 {
			n++
		}
	}
	return n
}

func newHTTPClient(conc int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conc + 16
	tr.MaxIdleConnsPerHost = conc + 16 // keep every worker's connection alive between requests
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: tr}
}

// dispatch runs all prompts through a pool of opts.Concurrency workers and
// stops early once more than 1 % have failed, since the stage fails anyway.
func dispatch(ctx context.Context, c *client, prompts []Prompt, docs []Doc, opts Options) (samples []Sample, failed int, simulated bool, lastErr string, aborted bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	samples = make([]Sample, len(prompts))
	jobs := make(chan int)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for w := 0; w < min(opts.Concurrency, len(prompts)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := prompts[i]
				r, attempts, err := c.generate(ctx, p)
				if err != nil && ctx.Err() != nil {
					continue // cancelled: leave the sample unrecorded
				}
				s := Sample{DocID: p.DocID, Prompt: p.LogText(), FewshotIDs: p.FewshotIDs, Gold: docs[i].Answer, Attempts: attempts}
				if err != nil {
					s.Error = err.Error()
				} else {
					s.Response, s.FinishReason, s.UsedReasoning = r.text, r.finishReason, r.usedReasoning
					sc := Score(opts.Mode, r.text, docs[i].Answer)
					s.Extractions = Extractions{sc.StrictExtracted, sc.FlexibleExtracted}
					s.Matches = Matches{sc.StrictMatch, sc.FlexibleMatch}
				}
				mu.Lock()
				samples[i] = s
				done++
				if err != nil {
					failed++
					lastErr = s.Error
					if tooManyFailed(failed, len(prompts)) && !aborted {
						aborted = true
						cancel()
					}
				}
				simulated = simulated || r.simulated
				if opts.Progress != nil {
					opts.Progress(done, len(prompts))
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range prompts {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	// An abort is our own cancellation, not the caller's.
	return samples, failed, simulated, lastErr, aborted
}

// Summarize scores a set of samples; failed samples count towards
// FailedRequests but not towards NEff or the means.
func Summarize(mode Mode, samples []Sample) Summary {
	s := Summary{Task: mode.Task(), Mode: mode}
	var strict, flex, inv, invFlex int
	for _, x := range samples {
		if x.Failed() {
			s.FailedRequests++
			continue
		}
		s.NEff++
		strict += b2i(x.Matches.Strict)
		flex += b2i(x.Matches.Flexible)
		inv += b2i(x.Extractions.Strict == Invalid)
		invFlex += b2i(x.Extractions.Flexible == Invalid)
	}
	if s.NEff == 0 {
		return s
	}
	n := float64(s.NEff)
	s.EMStrict, s.EMStrictSE = meanSE(strict, s.NEff)
	s.EMFlexible, s.EMFlexibleSE = meanSE(flex, s.NEff)
	s.InvalidRate = float64(inv) / n
	s.InvalidRateFlexible = float64(invFlex) / n
	return s
}

// meanSE is lm-eval's mean and mean_stderr for 0/1 scores:
// sample_stddev/sqrt(n) = sqrt(p(1-p)/(n-1)); 0 when n < 2.
func meanSE(hits, n int) (float64, float64) {
	p := float64(hits) / float64(n)
	if n < 2 {
		return p, 0
	}
	return p, math.Sqrt(p * (1 - p) / float64(n-1))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
