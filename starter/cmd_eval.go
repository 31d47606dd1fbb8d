package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/gsm8k"
)

func init() {
	register("eval gsm8k", newEvalGSM8KCmd)
	register("eval gsm8k-score", newEvalGSM8KScoreCmd)
}

// identityFlags collects repeated --identity key=value pairs.
type identityFlags map[string]any

func (f identityFlags) String() string { return fmt.Sprint(map[string]any(f)) }

func (f identityFlags) Type() string { return "key=value" }

func (f identityFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	f[k] = parseScalar(v)
	return nil
}

// parseScalar keeps numbers and booleans typed in the eval JSON (conc, tp,
// is_multinode) the way collect_eval_results writes them.
func parseScalar(v string) any {
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		return b
	}
	return v
}

const evalGSM8KUsage = `usage: starter eval gsm8k --base-url URL --model M --mode lm-eval|inferencex|cot [flags]

Runs GSM8K against an OpenAI-compatible server and scores it exactly as
lm-evaluation-harness does. Exit status: 0 done (and gate passed, if gated),
3 score below the floor (eval-failed; still written), 1 error or more than 1%
failed requests.

The splits default to $SWEEPFLOW_GSM8K_DIR (a directory holding test.jsonl
and train.jsonl), else the verified cache in $XDG_CACHE_HOME/sweepflow/gsm8k,
else one download from the public GSM8K JSONL files, checked by size and
sha256:
  test:  ` + gsm8k.DefaultTestURL + `
  train: ` + gsm8k.DefaultTrainURL

// evalGSM8K runs `starter eval gsm8k args` in-process.
func evalGSM8K(args []string, stdout, stderr io.Writer) error {
	return execute(nil, newEvalGSM8KCmd(), args, stdout, stderr)
}

func newEvalGSM8KCmd() *cobra.Command {
	c := &cobra.Command{Use: "gsm8k", Short: "score an OpenAI-compatible endpoint on GSM8K (lm-eval scoring)", Long: evalGSM8KUsage, Args: noArgs}
	fs := c.Flags()
	baseURL := fs.String("base-url", "", "server base URL, e.g. http://127.0.0.1:8000 (required)")
	model := fs.String("model", "", "model name sent in requests (required)")
	modeS := fs.String("mode", "", "lm-eval | inferencex | cot (required)")
	limit := fs.Int("limit", 0, "score only the first N test questions (0 = all)")
	conc := fs.Int("concurrency", 64, "requests in flight")
	maxTokens := fs.Int("max-tokens", 0, "max_tokens per request (0 = 256, or 16384 in inferencex mode)")
	timeout := fs.Duration("timeout", 30*time.Minute, "per-request timeout")
	retries := fs.Int("retries", 5, "retries on 429/5xx/network errors (0 = none)")
	seed := fs.Int64("seed", gsm8k.DefaultSeed, "request seed")
	testPath := fs.String("test", "", "test split JSONL path or URL (default: see above)")
	trainPath := fs.String("train", "", "train split JSONL path or URL, for few-shot exemplars (default: see above)")
	cacheDir := fs.String("cache-dir", "", "dataset cache directory (default $XDG_CACHE_HOME/sweepflow/gsm8k)")
	outJSON := fs.String("output-json", "", "write the eval JSON record here")
	samplesOut := fs.String("samples-jsonl", "", "write the per-sample log here")
	thresholds := fs.String("thresholds", "", "thresholds.yaml (InferenceX format) to gate on")
	prefix := fs.String("model-prefix", "", "model prefix for threshold overrides (e.g. dsv4); also recorded as model_prefix")
	floor := fs.Float64("floor", 0, "gate on this floor instead of a thresholds file")
	asJSON := fs.Bool("json", false, "print the eval JSON record on stdout instead of a table")
	identity := identityFlags{}
	fs.Var(identity, "identity", "point identity field key=value for the eval JSON (repeatable), e.g. hw=gb200 conc=64")
	c.RunE = func(c *cobra.Command, _ []string) error {
		stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
		if *baseURL == "" || *model == "" || *modeS == "" {
			return &exitError{code: 2, msg: "--base-url, --model and --mode are required"}
		}
		mode, err := gsm8k.ParseMode(*modeS)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		if *limit < 0 || *conc < 1 || *maxTokens < 0 || *retries < 0 || *floor < 0 || *floor > 1 {
			return &exitError{code: 2, msg: "--limit, --max-tokens and --retries must be >= 0, --concurrency >= 1, --floor in [0, 1]"}
		}
		var th *gsm8k.Thresholds
		if *thresholds != "" {
			if th, err = gsm8k.LoadThresholds(*thresholds); err != nil {
				return err
			}
		}
		if *prefix != "" {
			identity["model_prefix"] = *prefix
		}
		if _, ok := identity["model"]; !ok {
			identity["model"] = *model
		}

		opts := gsm8k.Options{
			BaseURL: *baseURL, Model: *model, Mode: mode, Limit: *limit, Concurrency: *conc,
			MaxTokens: *maxTokens, RequestTimeout: *timeout, Retries: *retries, Seed: *seed,
			TrainPath: *trainPath, TestPath: *testPath, CacheDir: *cacheDir,
			APIKey: os.Getenv("OPENAI_API_KEY"),
		}
		if *retries == 0 {
			opts.Retries = -1
		}
		prog := newProgressLine(stderr, "gsm8k "+string(mode))
		opts.Progress = prog.update

		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		res, runErr := gsm8k.Run(ctx, opts)
		prog.finish()
		var fre *gsm8k.FailedRequestsError
		if runErr != nil && !errors.As(runErr, &fre) {
			return runErr
		}

		var verdict *gsm8k.Verdict
		if f, ok := gsm8k.GateFloor(*floor, th, res.Summary.Task, *prefix); ok {
			v := gsm8k.Gate(res.Summary, f)
			verdict = &v
		}
		rec := gsm8k.EvalRecord(res.Summary, identity, res.Simulated, verdict)
		if *outJSON != "" {
			if err := writeJSONFile(*outJSON, rec); err != nil {
				return err
			}
		}
		if *samplesOut != "" {
			if err := gsm8k.WriteSamplesFile(*samplesOut, res.Samples); err != nil {
				return err
			}
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rec); err != nil {
				return err
			}
		} else {
			res.WriteTable(stdout, verdict)
		}
		if fre != nil {
			return fre
		}
		if verdict != nil && !verdict.Passed {
			return &exitError{code: 3, msg: "eval-failed: " + verdict.Reason}
		}
		return nil
	}
	return c
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// progressLine redraws one status line on a terminal; on anything else it
// stays silent so logs are not flooded.
type progressLine struct {
	w     io.Writer
	label string
	tty   bool
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressLine(w io.Writer, label string) *progressLine {
	tty := false
	if f, ok := w.(*os.File); ok {
		st, err := f.Stat()
		tty = err == nil && st.Mode()&os.ModeCharDevice != 0
	}
	return &progressLine{w: w, label: label, tty: tty, start: time.Now()}
}

func (p *progressLine) update(done, total int) {
	if !p.tty {
		return
	}
	now := time.Now()
	if done != total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	rate := float64(done) / now.Sub(p.start).Seconds()
	fmt.Fprintf(p.w, "\r\x1b[K%s: %d/%d (%.0f%%) %.1f q/s", p.label, done, total, 100*float64(done)/float64(total), rate)
	p.drawn = true
}

func (p *progressLine) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// evalGSM8KScore runs `starter eval gsm8k-score args` in-process.
func evalGSM8KScore(args []string, stdin io.Reader, stdout io.Writer) error {
	c := newEvalGSM8KScoreCmd()
	if stdin != nil {
		c.SetIn(stdin)
	}
	return execute(nil, c, args, stdout, nil)
}

func newEvalGSM8KScoreCmd() *cobra.Command {
	c := &cobra.Command{Use: "gsm8k-score", Short: "rescore a GSM8K samples JSONL offline", Args: noArgs,
		Long: `usage: starter eval gsm8k-score --mode lm-eval|inferencex|cot --samples F.jsonl

Rescores responses offline. Each line is {"doc_id": int, "response": str,
"gold": str}; gold may be the full dataset answer or "#### N". A samples log
from "starter eval gsm8k --samples-jsonl" is accepted as is. Prints JSON.`}
	fs := c.Flags()
	modeS := fs.String("mode", "", "lm-eval | inferencex | cot (required)")
	samples := fs.String("samples", "", "samples JSONL file, or - for stdin (required)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		stdin, stdout := c.InOrStdin(), c.OutOrStdout()
		if *modeS == "" || *samples == "" {
			return &exitError{code: 2, msg: "--mode and --samples are required"}
		}
		mode, err := gsm8k.ParseMode(*modeS)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		r := stdin
		name := "<stdin>"
		if *samples != "-" {
			f, err := os.Open(*samples)
			if err != nil {
				return err
			}
			defer f.Close()
			r, name = f, *samples
		}
		out, err := gsm8k.RescoreJSONL(r, name, mode)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	}
	return c
}
