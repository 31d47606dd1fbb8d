package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"github.com/sweepflow/sweepflow/sim"
)

func TestEvalGSM8KScoreCLI(t *testing.T) {
	t.Parallel()
	in := `{"doc_id": 0, "response": "16 - 3 - 4 = 9, 9 * 2 = $18.\n#### 18", "gold": "Janet sells 9 eggs.\n#### 18"}
{"doc_id": 1, "response": "#### 2\nactually\n#### 3", "gold": "#### 3"}
{"doc_id": 2, "response": "The total is 1,000 dollars.", "gold": "#### 1,000"}
`
	p := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(in), 0o644))
	cases := []struct {
		mode       string
		strict     float64
		doc1Strict string
	}{
		{"lm-eval", 1.0 / 3, "2"},
		{"inferencex", 2.0 / 3, "3"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		require.NoError(t, evalGSM8KScore([]string{"--mode", tc.mode, "--samples", p}, nil, &out))
		var got struct {
			Summary map[string]float64 `json:"summary"`
			Samples []map[string]any   `json:"samples"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		assert.Len(t, got.Summary, 3, "summary has exactly em_strict, em_flexible, n_eff")
		assert.InDelta(t, tc.strict, got.Summary["em_strict"], 1e-12)
		assert.InDelta(t, 1.0, got.Summary["em_flexible"], 1e-12)
		assert.Equal(t, 3.0, got.Summary["n_eff"])
		require.Len(t, got.Samples, 3)
		assert.Equal(t, map[string]any{"doc_id": 1.0, "strict_extracted": tc.doc1Strict, "flexible_extracted": "3",
			"strict_match": tc.mode == "inferencex", "flexible_match": true}, got.Samples[1])
	}
	// stdin works too
	var out bytes.Buffer
	require.NoError(t, evalGSM8KScore([]string{"--mode", "lm-eval", "--samples", "-"}, strings.NewReader(in), &out))
	assert.Contains(t, out.String(), `"n_eff":3`)
}

func TestEvalGSM8KCLIUsageErrors(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"doc_id": 0, "gold": "1"}`), 0o644))
	cases := []struct {
		name string
		run  func() error
		code int
		want string
	}{
		{"score no mode", func() error { return evalGSM8KScore([]string{"--samples", bad}, nil, &bytes.Buffer{}) }, 2, "--mode and --samples are required"},
		{"score bad mode", func() error { return evalGSM8KScore([]string{"--mode", "x", "--samples", bad}, nil, &bytes.Buffer{}) }, 2, "unknown mode"},
		{"score bad line", func() error {
			return evalGSM8KScore([]string{"--mode", "lm-eval", "--samples", bad}, nil, &bytes.Buffer{})
		}, 0, "bad.jsonl:1: field response: missing"},
		{"eval missing flags", func() error { return evalGSM8K([]string{"--model", "m"}, &bytes.Buffer{}, &bytes.Buffer{}) }, 2, "--base-url, --model and --mode are required"},
		{"eval bad mode", func() error {
			return evalGSM8K([]string{"--base-url", "http://x", "--model", "m", "--mode", "chat"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, 2, "unknown mode"},
		{"eval bad concurrency", func() error {
			return evalGSM8K([]string{"--base-url", "http://x", "--model", "m", "--mode", "cot", "--concurrency", "0"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, 2, "--concurrency >= 1"},
		{"eval bad identity", func() error {
			return evalGSM8K([]string{"--identity", "novalue"}, &bytes.Buffer{}, &bytes.Buffer{})
		}, 2, "want key=value"},
		{"eval bad thresholds", func() error {
			return evalGSM8K([]string{"--base-url", "http://x", "--model", "m", "--mode", "cot", "--thresholds", bad}, &bytes.Buffer{}, &bytes.Buffer{})
		}, 0, "bad.jsonl"},
	}
	for _, tc := range cases {
		err := tc.run()
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		var ee *exitError
		if tc.code != 0 {
			require.True(t, errors.As(err, &ee), tc.name)
			assert.Equal(t, tc.code, ee.code, tc.name)
		} else {
			assert.False(t, errors.As(err, &ee), tc.name)
		}
	}
}

func TestParseScalar(t *testing.T) {
	t.Parallel()
	assert.Equal(t, int64(64), parseScalar("64"))
	assert.Equal(t, 0.5, parseScalar("0.5"))
	assert.Equal(t, true, parseScalar("true"))
	assert.Equal(t, "gb200", parseScalar("gb200"))
	assert.Equal(t, "True", parseScalar("True"))
}

// The project's own floors (dsv4: 0.91).
var evalThresholds = filepath.Join("..", "configs", "thresholds.yaml")

// evalSplits is the real GSM8K split when SWEEPFLOW_GSM8K_DIR names it, else
// a generated one of ours with enough questions for a 300-question eval.
func evalSplits(t *testing.T) (test, train string) {
	d := gsm8kfixture.Dir(t)
	return filepath.Join(d, "test.jsonl"), filepath.Join(d, "train.jsonl")
}

// TestEvalGSM8KCLIAgainstSim drives `starter eval gsm8k` end to end against
// the simulator over HTTP, then rescores its sample log with
// `starter eval gsm8k-score` and checks both agree.
func TestEvalGSM8KCLIAgainstSim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		accuracy float64
		mode     string
		pass     bool
	}{
		{"passes dsv4 floor", 0.97, "inferencex", true},
		{"below dsv4 floor", 0.6, "lm-eval", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evalTestSplit, evalTrainSplit := evalSplits(t)
			s, err := sim.New(sim.Config{GSM8KPath: evalTestSplit, Accuracy: tc.accuracy, Seed: 3, FastMode: true, Model: "sim"})
			require.NoError(t, err)
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			dir := t.TempDir()
			outJSON, samples := filepath.Join(dir, "eval.json"), filepath.Join(dir, "samples.jsonl")
			var stdout, stderr bytes.Buffer
			err = evalGSM8K([]string{
				"--base-url", srv.URL, "--model", "sim", "--mode", tc.mode, "--limit", "300", "--concurrency", "32",
				"--test", evalTestSplit, "--train", evalTrainSplit,
				"--thresholds", evalThresholds, "--model-prefix", "dsv4",
				"--identity", "hw=gb200", "--identity", "conc=64", "--identity", "is_multinode=true",
				"--output-json", outJSON, "--samples-jsonl", samples, "--json",
			}, &stdout, &stderr)
			if tc.pass {
				require.NoError(t, err)
			} else {
				var ee *exitError
				require.True(t, errors.As(err, &ee), "got %v", err)
				assert.Equal(t, 3, ee.code)
				assert.Contains(t, ee.msg, "eval-failed: em_strict")
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &rec))
			fileRec, err := os.ReadFile(outJSON)
			require.NoError(t, err)
			assert.JSONEq(t, stdout.String(), string(fileRec))
			assert.Equal(t, "gsm8k", rec["task"])
			assert.Equal(t, 300.0, rec["n_eff"])
			assert.Equal(t, "em_strict", rec["score_name"])
			assert.Equal(t, rec["em_strict"], rec["score"])
			assert.Equal(t, "dsv4", rec["model_prefix"])
			assert.Equal(t, "gb200", rec["hw"])
			assert.Equal(t, 64.0, rec["conc"])
			assert.Equal(t, true, rec["is_multinode"])
			assert.Equal(t, true, rec["simulated"])
			gate := rec["gate"].(map[string]any)
			assert.Equal(t, tc.pass, gate["passed"])
			assert.Equal(t, 0.91, gate["floor"])
			assert.InDelta(t, tc.accuracy, rec["em_strict"].(float64), 0.1)

			var rescored bytes.Buffer
			require.NoError(t, evalGSM8KScore([]string{"--mode", tc.mode, "--samples", samples}, nil, &rescored))
			var re struct {
				Summary map[string]float64 `json:"summary"`
			}
			require.NoError(t, json.Unmarshal(rescored.Bytes(), &re))
			assert.Equal(t, rec["em_strict"], re.Summary["em_strict"])
			assert.Equal(t, rec["em_flexible"], re.Summary["em_flexible"])
			assert.Equal(t, 300.0, re.Summary["n_eff"])
			assert.Empty(t, stderr.String(), "no progress line when stderr is not a terminal")
		})
	}
}

func TestEvalGSM8KCLITable(t *testing.T) {
	t.Parallel()
	evalTestSplit, _ := evalSplits(t)
	s, err := sim.New(sim.Config{GSM8KPath: evalTestSplit, Accuracy: 1, Seed: 1, FastMode: true, Model: "sim"})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	var stdout bytes.Buffer
	require.NoError(t, evalGSM8K([]string{"--base-url", srv.URL + "/v1", "--model", "sim", "--mode", "cot", "--limit", "20",
		"--test", evalTestSplit, "--floor", "0.5"}, &stdout, &bytes.Buffer{}))
	out := stdout.String()
	for _, want := range []string{"gsm8k_cot (cot mode)", "em_strict", "1.0000 ± 0.0000", "n_eff", "20", "simulated", "gate", "PASS"} {
		assert.Contains(t, out, want)
	}
}
