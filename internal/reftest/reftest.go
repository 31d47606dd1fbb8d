// Package reftest finds the reference data that reference tests compare
// sweepflow against (an InferenceX checkout, the real GSM8K split, srt-slurm
// renders). Users do not have it, so it is never read from a fixed path: each
// kind comes from its own environment variable, and a test whose variable is
// unset skips with one line that names the variable.
//
// When SWEEPFLOW_REFSKIP_LOG names a file, every skip also appends one line
// to it, so scripts/test.sh can count the skipped reference tests and CI can
// fail when it had the data but a test still skipped.
package reftest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The variables that switch reference tests on.
const (
	EnvInferenceX = "SWEEPFLOW_INFERENCEX" // an InferenceX checkout (utils/, configs, expected matrices)
	EnvGSM8K      = "SWEEPFLOW_GSM8K_DIR"  // a directory holding GSM8K test.jsonl and train.jsonl
	EnvSrtSlurm   = "SWEEPFLOW_SRT_SLURM"  // srt-slurm's rendered process sets
	EnvSkipLog    = "SWEEPFLOW_REFSKIP_LOG"
)

// InferenceX returns the InferenceX reference directory, after checking that
// rel (a file or directory inside it) exists; otherwise it skips t.
func InferenceX(t testing.TB, rel ...string) string {
	return dir(t, EnvInferenceX, "an InferenceX checkout", rel...)
}

// GSM8K returns the directory holding the real GSM8K splits, or skips t.
func GSM8K(t testing.TB) string {
	return dir(t, EnvGSM8K, "a directory with GSM8K test.jsonl and train.jsonl", "test.jsonl", "train.jsonl")
}

// SrtSlurm returns srt-slurm's reference renders, after checking rel, or skips t.
func SrtSlurm(t testing.TB, rel ...string) string {
	return dir(t, EnvSrtSlurm, "srt-slurm's reference renders", rel...)
}

func dir(t testing.TB, env, what string, rel ...string) string {
	t.Helper()
	d := os.Getenv(env)
	if d == "" {
		skip(t, fmt.Sprintf("reference test skipped: set %s to %s", env, what))
	}
	for _, r := range rel {
		p := filepath.Join(d, r)
		if _, err := os.Stat(p); err != nil {
			// Set but wrong is a mistake, not a missing optional input.
			t.Fatalf("%s=%s: %s missing: %v", env, d, r, err)
		}
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// skip skips t with msg and records the skip in the skip log.
func skip(t testing.TB, msg string) {
	t.Helper()
	record(t.Name(), msg)
	t.Skip(msg)
}

func record(test, msg string) {
	path := os.Getenv(EnvSkipLog)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	// One short write per skip: O_APPEND keeps lines from parallel test
	// binaries whole.
	fmt.Fprintf(f, "%s\t%s\n", test, msg)
}
