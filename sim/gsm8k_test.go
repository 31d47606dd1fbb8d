package sim

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/internal/reftest"
)

type gsmDoc struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

func readGSM(t testing.TB, path string) []gsmDoc {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []gsmDoc
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d gsmDoc
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
		out = append(out, d)
	}
	require.NoError(t, sc.Err())
	return out
}

func gold(d gsmDoc) string {
	_, g, _ := strings.Cut(d.Answer, "####")
	return strings.ReplaceAll(strings.TrimSpace(g), ",", "")
}

// lm-eval's filters and exact_match normalisation (lm-evaluation-harness's
// gsm8k task: strict-match and flexible-extract).
var (
	strictRe   = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)
	flexibleRe = regexp.MustCompile(`(-?[$0-9.,]{2,})|(-?[0-9]+)`)
	cotRe      = regexp.MustCompile(`The answer is (\-?[0-9\.\,]+).`)
)

func normAnswer(s string) string {
	s = strings.TrimSpace(s)
	s = strings.NewReplacer(",", "", "$", "").Replace(s)
	return strings.ToLower(strings.TrimSuffix(s, "."))
}

func strictOf(text string) string {
	m := strictRe.FindStringSubmatch(text)
	if m == nil {
		return "[invalid]"
	}
	return normAnswer(m[1])
}

func flexibleOf(text string) string {
	ms := flexibleRe.FindAllStringSubmatch(text, -1)
	if len(ms) == 0 {
		return "[invalid]"
	}
	last := ms[len(ms)-1]
	if last[1] != "" {
		return normAnswer(last[1])
	}
	return normAnswer(last[2])
}

const ixInstruction = "\nEnd your response with the answer on the last line, formatted as: #### [number]\nAnswer:"

// chatFewShot is InferenceX's lm-eval chat prompt with few-shot as multi-turn.
func chatFewShot(shots []gsmDoc, q string) map[string]any {
	var msgs []map[string]any
	for _, s := range shots {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": "Question: " + s.Question + ixInstruction},
			map[string]any{"role": "assistant", "content": s.Answer})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Question: " + q + ixInstruction})
	return map[string]any{
		"model": DefaultModel, "messages": msgs, "max_tokens": 16384, "temperature": 0, "seed": 1234,
		"stop": []string{"</s>", "<|im_end|>"},
	}
}

// checkAccuracy serves the questions in testPath and checks that strict
// exact_match is within 3σ of the configured accuracy for two seeds, that
// the seeds get different questions wrong, and that accuracies 1 and 0 are
// exact.
func checkAccuracy(t *testing.T, testPath string, shots []gsmDoc) {
	test := readGSM(t, testPath)
	run := func(seed int64, accuracy float64) (correct []bool) {
		_, url := startServer(t, Config{FastMode: true, GSM8KPath: testPath, Accuracy: accuracy, Seed: seed})
		res := runConcurrent(t, 16, len(test), func(i int) (string, any) {
			return url + "/v1/chat/completions", chatFewShot(shots, test[i].Question)
		})
		correct = make([]bool, len(test))
		for i, r := range res {
			require.NoError(t, r.readErr)
			require.Equal(t, 200, r.status, string(r.body))
			var m struct {
				Choices []struct {
					Message      struct{ Content string } `json:"message"`
					FinishReason string                   `json:"finish_reason"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(r.body, &m))
			text := m.Choices[0].Message.Content
			assert.Equal(t, "stop", m.Choices[0].FinishReason)
			strict, flex := strictOf(text), flexibleOf(text)
			require.NotEqual(t, "[invalid]", strict, "question %d: %q", i, text)
			assert.Equal(t, strict, flex, "strict and flexible agree (no format failures)")
			correct[i] = strict == gold(test[i])
		}
		return correct
	}
	rate := func(c []bool) float64 {
		n := 0
		for _, ok := range c {
			if ok {
				n++
			}
		}
		return float64(n) / float64(len(c))
	}
	a := run(42, 0.95)
	b := run(43, 0.95)
	n := len(test)
	sigma := math.Sqrt(0.95 * 0.05 / float64(n))
	t.Logf("strict exact_match at accuracy 0.95: seed 42 %.4f, seed 43 %.4f (n=%d, 3σ=%.4f)", rate(a), rate(b), n, 3*sigma)
	for _, c := range [][]bool{a, b} {
		assert.InDelta(t, 0.95, rate(c), 3*sigma, "score within 3σ of the configured accuracy")
	}
	differ := 0
	for i := range a {
		if a[i] != b[i] {
			differ++
		}
	}
	assert.Positive(t, differ, "another seed gets other questions wrong")
	// the extremes are exact
	assert.Equal(t, 1.0, rate(run(42, 1)))
	assert.Equal(t, 0.0, rate(run(42, 0)), "wrong answers are never accidentally right")
}

// Not parallel: CPU-heavy, so it runs before the timing-sensitive tests.
func TestGSM8KAccuracy(t *testing.T) {
	checkAccuracy(t, synthGSM8K(t, 600), readGSM(t, gsm8kTrainPath)[:5])
}

// TestGSM8KAccuracyOverTestSplit is the same check over the real 1,319
// questions (reference test). Not parallel, as above.
func TestGSM8KAccuracyOverTestSplit(t *testing.T) {
	dir := reftest.GSM8K(t)
	test := readGSM(t, filepath.Join(dir, "test.jsonl"))
	require.Len(t, test, 1319)
	checkAccuracy(t, filepath.Join(dir, "test.jsonl"), readGSM(t, filepath.Join(dir, "train.jsonl"))[:5])
}

func TestGSM8KPromptStyles(t *testing.T) {
	t.Parallel()
	test := readGSM(t, gsm8kTestPath)
	train := readGSM(t, gsm8kTrainPath)
	_, url := startServer(t, Config{FastMode: true, GSM8KPath: gsm8kTestPath, Accuracy: 1, Seed: 1})
	q := test[10] // not among the test[:8] shots below

	t.Run("lm-eval completion prompt with Question: stop", func(t *testing.T) {
		var b strings.Builder
		for _, s := range train[:5] {
			b.WriteString("Question: " + s.Question + "\nAnswer: " + s.Answer + "\n\n")
		}
		b.WriteString("Question: " + q.Question + "\nAnswer:")
		_, m, _ := postJSON(t, url+"/v1/completions", map[string]any{
			"prompt": b.String(), "max_tokens": 256, "temperature": 0, "stop": []string{"Question:", "</s>", "<|im_end|>"},
		})
		text := m["choices"].([]any)[0].(map[string]any)["text"].(string)
		assert.Equal(t, gold(q), strictOf(text))
	})
	t.Run("sglang few-shot from the test split answers the last question", func(t *testing.T) {
		var b strings.Builder
		for _, s := range test[:8] {
			b.WriteString("Question: " + s.Question + "\nAnswer: " + s.Answer + "\n\n")
		}
		b.WriteString("Question: " + q.Question + "\nAnswer:")
		_, m, _ := postJSON(t, url+"/v1/completions", map[string]any{"prompt": b.String(), "max_tokens": 512, "temperature": 0})
		text := m["choices"].([]any)[0].(map[string]any)["text"].(string)
		assert.Equal(t, gold(q), strictOf(text))
	})
	t.Run("gsm8k_cot Q:/A: gets The answer is N.", func(t *testing.T) {
		var b strings.Builder
		for _, s := range train[:8] {
			b.WriteString("Q: " + s.Question + "\nA: The answer is " + gold(s) + ".\n\n")
		}
		b.WriteString("Q: " + q.Question + "\nA:")
		_, m, _ := postJSON(t, url+"/v1/completions", map[string]any{"prompt": b.String(), "max_tokens": 256, "temperature": 0, "stop": []string{"Q:"}})
		text := m["choices"].([]any)[0].(map[string]any)["text"].(string)
		mm := cotRe.FindStringSubmatch(text)
		require.NotNil(t, mm, text)
		assert.Equal(t, gold(q), normAnswer(mm[1]))
	})
	t.Run("bare question as the only user message", func(t *testing.T) {
		_, m, _ := postJSON(t, url+"/v1/chat/completions", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "  " + q.Question + "\n"}}, "temperature": 0,
		})
		text := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		assert.Equal(t, gold(q), strictOf(text))
	})
	t.Run("unknown question gets a non-answer", func(t *testing.T) {
		_, m, _ := postJSON(t, url+"/v1/chat/completions", map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "Question: How many moons does the simulator have?\nAnswer:"}},
		})
		text := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		assert.Equal(t, "[invalid]", strictOf(text))
		assert.NotRegexp(t, `[0-9]`, text)
	})
	t.Run("max_tokens truncates the answer", func(t *testing.T) {
		_, m, _ := postJSON(t, url+"/v1/chat/completions", chatFewShot(train[:1], q.Question+""))
		full := m["usage"].(map[string]any)["completion_tokens"].(float64)
		body := chatFewShot(train[:1], q.Question)
		body["max_tokens"] = 3
		_, m, _ = postJSON(t, url+"/v1/chat/completions", body)
		assert.EqualValues(t, 3, m["usage"].(map[string]any)["completion_tokens"])
		assert.Equal(t, "length", m["choices"].([]any)[0].(map[string]any)["finish_reason"])
		assert.Greater(t, full, 3.0)
	})
}

func TestGSM8KReasoningStream(t *testing.T) {
	t.Parallel()
	test := readGSM(t, gsm8kTestPath)
	_, url := startServer(t, Config{FastMode: true, GSM8KPath: gsm8kTestPath, Accuracy: 1, Reasoning: true, AcceptanceLength: 2.5})
	q := test[7]
	body := chatFewShot(nil, q.Question)
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	res := post(t, url+"/v1/chat/completions", body)
	require.NoError(t, res.readErr)
	var reasoning, content strings.Builder
	seenContent := false
	for _, e := range res.events[:len(res.events)-2] {
		d := e.json["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		if r, ok := d["reasoning_content"].(string); ok {
			assert.False(t, seenContent, "reasoning comes before content")
			reasoning.WriteString(r)
		}
		if c, ok := d["content"].(string); ok {
			seenContent = true
			content.WriteString(c)
		}
	}
	assert.NotEmpty(t, reasoning.String())
	assert.Equal(t, gold(q), strictOf(content.String()))
	u := res.events[len(res.events)-2].json["usage"].(map[string]any)
	assert.EqualValues(t, CountTokens(reasoning.String())+CountTokens(content.String()), u["completion_tokens"],
		"reasoning tokens count as completion tokens")
}

func TestWrongNumberNeverGold(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"0", "1", "18", "-3", "1450000", "2.5"} {
		for h := range uint64(500) {
			w := wrongNumber(g, splitmix64(h))
			require.NotEqual(t, normAnswer(g), normAnswer(w), "gold %s", g)
		}
	}
}

func TestLoadGSM8KErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"bad json", "{\"question\":\"a\",\"answer\":\"#### 1\"}\n{oops\n", ":2: invalid JSON"},
		{"no question", "{\"answer\":\"#### 1\"}\n", ":1: field question"},
		{"no final answer", "{\"question\":\"q\",\"answer\":\"42\"}\n", ":1: field answer"},
		{"not a number", "{\"question\":\"q\",\"answer\":\"#### many\"}\n", ":1: field answer"},
		{"empty", "\n", "no questions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := dir + "/" + strings.ReplaceAll(tc.name, " ", "_") + ".jsonl"
			require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o644))
			_, err := New(Config{GSM8KPath: p})
			require.Error(t, err)
			assert.Contains(t, err.Error(), p)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
