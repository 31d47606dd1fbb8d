package gsm8k

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scoreCases were cross-checked against a Python re-implementation of
// lm-eval's RegexFilter and exact_match (Python's re, same regexes and
// regexes_to_ignore); see TestScoreTable.
var scoreCases = []struct {
	name                 string
	mode                 Mode
	response, gold       string
	strict, flexible     string
	strictOK, flexibleOK bool
}{
	{"plain full answer gold", ModeLMEval, "She makes 9 * 2 = $18 every day.\n#### 18",
		"Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18",
		"18", "18", true, true},
	{"commas in both", ModeLMEval, "#### 1,080", "#### 1,080", "1,080", "1,080", true, true},
	{"commas only in response", ModeLMEval, "#### 1,000,000", "1000000", "1,000,000", "1,000,000", true, true},
	{"dollar after hashes breaks strict", ModeLMEval, "The total is $1,234.\n#### $1,234", "#### 1,234",
		Invalid, "$1,234", false, true},
	{"dollar in flexible", ModeLMEval, "It costs $5", "#### 5", Invalid, "$5", false, true},
	{"trailing period", ModeLMEval, "#### 42.", "#### 42", "42.", "42.", true, true},
	{"trailing comma", ModeLMEval, "#### 5,", "#### 5", "5,", "5,", true, true},
	{"two dots keep one", ModeLMEval, "Answer: 42...", "#### 42", Invalid, "42...", false, false},
	{"several hashes lm-eval takes first", ModeLMEval, "#### 7\nwait, redo\n#### 42", "#### 42", "7", "42", false, true},
	{"several hashes inferencex takes last", ModeInferenceX, "#### 7\nwait, redo\n#### 42", "#### 42", "42", "42", true, true},
	{"recited few-shot answer first", ModeLMEval, "Question: x\nAnswer: #### 72\n#### 18", "#### 18", "72", "18", false, true},
	{"negative", ModeLMEval, "The change is -5 degrees.\n#### -5", "#### -5", "-5", "-5", true, true},
	{"negative single digit flexible", ModeLMEval, "temperature fell to -3", "#### -3", Invalid, "-3", false, true},
	{"decimal vs integer gold is a miss", ModeLMEval, "#### 18.00", "#### 18", "18.00", "18.00", false, false},
	{"decimal gold", ModeLMEval, "so it is 2.5", "#### 2.5", Invalid, "2.5", false, true},
	{"negative decimal", ModeInferenceX, "#### -0.5", "#### -0.5", "-0.5", "-0.5", true, true},
	{"no number", ModeLMEval, "I don't know.", "#### 3", Invalid, Invalid, false, false},
	{"empty response", ModeInferenceX, "", "#### 3", Invalid, Invalid, false, false},
	{"hashes without space", ModeLMEval, "####42", "#### 42", Invalid, "42", false, true},
	{"reasoning text inferencex", ModeInferenceX,
		"<think>Let me compute 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.</think>\nShe earns 18 dollars.\n#### 18", "#### 18",
		"18", "18", true, true},
	{"reasoning ending in a sentence", ModeLMEval, "First 3 + 4 = 7, then 7 * 6 = 42 apples in total.", "#### 42",
		Invalid, "42", false, true},
	{"flexible last number wins", ModeLMEval, "#### 42\nCheck: 6 * 7 = 42, ok 1", "#### 42", "42", "1", true, false},
	{"flexible first non-empty group", ModeLMEval, "The answer is $1,234.50.", "#### 1234.50", Invalid, "$1,234.50.", false, true},
	{"cot answer is", ModeCoT, "3 + 4 = 7. 7 * 6 = 42. The answer is 42.", "#### 42", "42", "42.", true, true},
	{"cot first match swallows period", ModeCoT, "The answer is 8. The answer is 1,000.", "8", "8.", "1,000.", true, false},
	{"cot needs a char after the number", ModeCoT, "The answer is 8", "#### 8", Invalid, "8", false, true},
	{"cot gold is text after last hashes", ModeCoT, "The answer is 1,000.\n", "blah\n#### 1,000", "1,000", "1,000.", true, true},
	{"cot ignores hashes format", ModeCoT, "#### 42", "#### 42", Invalid, "42", false, true},
	{"ignore case", ModeLMEval, "#### 42", "#### 42", "42", "42", true, true},
	{"trailing newline in gold is kept by Python $", ModeLMEval, "#### 42.", "#### 42.\n", "42.", "42.", false, false},
	{"trailing newline response line", ModeLMEval, "#### 42.\n", "#### 42", "42.", "42.", true, true},
}

func TestScoreTable(t *testing.T) {
	t.Parallel()
	for _, tc := range scoreCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Score(tc.mode, tc.response, tc.gold)
			assert.Equal(t, tc.strict, got.StrictExtracted, "strict extraction")
			assert.Equal(t, tc.flexible, got.FlexibleExtracted, "flexible extraction")
			assert.Equal(t, tc.strictOK, got.StrictMatch, "strict match")
			assert.Equal(t, tc.flexibleOK, got.FlexibleMatch, "flexible match")
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"1,234", "1234"},
		{"$1,234.50", "1234.50"},
		{"42.", "42"},
		{"42..", "42."},
		// Python's `$` also matches before a final newline: "\.$" removes
		// the dot but the newline stays.
		{"42.\n", "42\n"},
		{"42.\n\n", "42.\n\n"},
		{".\n.", ".\n"},
		{"42\n", "42\n"},
		{"Janet sells 9.\n#### 18", "18"},
		{"#### 1\n#### 2", "2"},
		{"ABC", "abc"},
		{"7\x00", "7"},
		{Invalid, Invalid},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Normalize(tc.in), "Normalize(%q)", tc.in)
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"lm-eval", "inferencex", "cot"} {
		m, err := ParseMode(s)
		require.NoError(t, err)
		assert.Equal(t, Mode(s), m)
	}
	_, err := ParseMode("gsm8k")
	require.ErrorContains(t, err, `unknown mode "gsm8k"`)
	assert.Equal(t, "gsm8k_cot", ModeCoT.Task())
	assert.Equal(t, "gsm8k", ModeInferenceX.Task())
}

// FuzzScore checks invariants that hold for any input: extractions are
// "[invalid]" or a trimmed substring of the response, and a response that
// ends with "#### <gold>" always strict-matches in inferencex mode.
func FuzzScore(f *testing.F) {
	for _, tc := range scoreCases {
		f.Add(tc.response, tc.gold)
	}
	f.Fuzz(func(t *testing.T, response, gold string) {
		for _, m := range []Mode{ModeLMEval, ModeInferenceX, ModeCoT} {
			s := Score(m, response, gold)
			for _, x := range []string{s.StrictExtracted, s.FlexibleExtracted} {
				if x != Invalid && !strings.Contains(response, x) {
					t.Fatalf("mode %s: extraction %q not in response %q", m, x, response)
				}
			}
		}
		num := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, gold)
		if num == "" {
			return
		}
		s := Score(ModeInferenceX, response+"\n#### "+num, "#### "+num)
		if !s.StrictMatch {
			t.Fatalf("self answer %q did not strict-match: %+v", num, s)
		}
	})
}

// TestScoreGolden replays responses scored by a plain-Python copy of lm-eval's
// filters and metric (testdata/gen_score_golden.py), so any divergence between
// Go's regexp and Python's re on these patterns shows up here.
func TestScoreGolden(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/score_golden.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		var row struct {
			Mode     Mode   `json:"mode"`
			Response string `json:"response"`
			Gold     string `json:"gold"`
			SampleScore
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), "line %d", n)
		got := Score(row.Mode, row.Response, row.Gold)
		assert.Equal(t, row.SampleScore, got, "line %d: mode %s response %q gold %q", n, row.Mode, row.Response, row.Gold)
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 600, n)
}
