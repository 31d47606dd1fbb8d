package gsm8k

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFewshotIndicesMatchPython pins the draws to CPython's
// random.Random(1234).sample(range(7473), 5), called 1319 times in a row
// (values produced by CPython 3.11).
func TestFewshotIndicesMatchPython(t *testing.T) {
	t.Parallel()
	got := FewshotIndices(1319, 7473, 5)
	assert.Equal(t, []int{6374, 3610, 957, 61, 742}, got[0])
	assert.Equal(t, []int{7462, 6610, 4769, 286, 5501}, got[1])
	assert.Equal(t, []int{6785, 2401, 3493, 2787, 1211}, got[100])
	assert.Equal(t, []int{220, 4179, 6064, 5599, 5541}, got[1318])
	parts := make([]string, len(got))
	for i, d := range got {
		parts[i] = strings.Trim(strings.ReplaceAll(fmt.Sprint(d), " ", ","), "[]")
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, ";")))
	assert.Equal(t, "78d2096923e53eeb471a73d03d965087610465c7b9e8d0c00c3befa72f83ada0", hex.EncodeToString(sum[:]))
}

func TestPyRandomKnownValues(t *testing.T) {
	t.Parallel()
	// CPython: random.Random(1234).sample(range(10), 5), then .sample(range(20), 8)
	// on the same generator (exercises the pool strategy and k > 5).
	r := newPyRandom(1234)
	assert.Equal(t, []int{7, 1, 0, 9, 4}, r.sample(10, 5))
	assert.Equal(t, []int{1, 2, 3, 11, 7, 0, 14, 12}, r.sample(20, 8))
	// A seed wider than 32 bits: random.Random(2**40+5).sample(range(7473), 5)
	assert.Equal(t, []int{4131, 4234, 2200, 5437, 224}, newPyRandom(1<<40+5).sample(7473, 5))
}

// splitSources are the splits prompt tests run on: the fixture, and the real
// split as a reference test (skipped without SWEEPFLOW_GSM8K_DIR).
var splitSources = []struct {
	name string
	load func(t testing.TB) (test, train []Doc)
	// the few-shot draws for documents 0 and 1: CPython's
	// random.Random(1234).sample(range(len(train)), 5), twice
	shots0, shots1 []int
}{
	{"fixture", fixtureSplits, []int{7, 1, 0, 9, 4}, []int{0, 1, 8, 6, 2}},
	{"real split", func(t testing.TB) (test, train []Doc) {
		test, train, _, _ = realSplits(t)
		return test, train
	}, []int{6374, 3610, 957, 61, 742}, []int{7462, 6610, 4769, 286, 5501}},
}

func TestBuildPromptsLMEval(t *testing.T) {
	t.Parallel()
	for _, src := range splitSources {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			test, train := src.load(t)
			ps := BuildPrompts(ModeLMEval, test[:3], train, 0)
			require.Len(t, ps, 3)
			p := ps[0]
			assert.False(t, p.Chat())
			assert.Equal(t, src.shots0, p.FewshotIDs)
			assert.Equal(t, []string{"Question:", "</s>", "<|im_end|>"}, p.Stop)
			assert.Equal(t, 256, p.MaxTokens)
			var want strings.Builder
			for _, j := range p.FewshotIDs {
				want.WriteString("Question: " + train[j].Question + "\nAnswer: " + train[j].Answer + "\n\n")
			}
			want.WriteString("Question: " + test[0].Question + "\nAnswer:")
			assert.Equal(t, want.String(), p.Text)
			assert.Equal(t, p.Text, p.LogText())
			assert.Equal(t, src.shots1, ps[1].FewshotIDs)
		})
	}
}

func TestBuildPromptsInferenceX(t *testing.T) {
	t.Parallel()
	for _, src := range splitSources {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			test, train := src.load(t)
			p := BuildPrompts(ModeInferenceX, test[:1], train, 0)[0]
			require.True(t, p.Chat())
			assert.Equal(t, src.shots0, p.FewshotIDs)
			require.Len(t, p.Messages, 11)
			for i, m := range p.Messages[:10] {
				j := p.FewshotIDs[i/2]
				if i%2 == 0 {
					assert.Equal(t, "user", m.Role)
					assert.Equal(t, "Question: "+train[j].Question+"\nEnd your response with the answer on the last line, formatted as: #### [number]\nAnswer:", m.Content)
				} else {
					assert.Equal(t, "assistant", m.Role)
					assert.Equal(t, train[j].Answer, m.Content)
				}
			}
			last := p.Messages[10]
			assert.Equal(t, "user", last.Role)
			assert.True(t, strings.HasPrefix(last.Content, "Question: "+test[0].Question+"\n"))
			assert.Equal(t, last.Content, p.LogText())
			assert.Equal(t, []string{"</s>", "<|im_end|>"}, p.Stop, "InferenceX drops the Question: stop")
			assert.Equal(t, 16384, p.MaxTokens)
		})
	}
}

func TestBuildPromptsCoT(t *testing.T) {
	t.Parallel()
	test, _ := fixtureSplits(t)
	p := BuildPrompts(ModeCoT, test[:1], nil, 512)[0]
	assert.Nil(t, p.FewshotIDs)
	assert.Equal(t, 512, p.MaxTokens)
	assert.Equal(t, []string{"Q:", "</s>", "<|im_end|>"}, p.Stop)
	assert.True(t, strings.HasPrefix(p.Text, "Q: There are 15 trees in the grove."))
	assert.True(t, strings.HasSuffix(p.Text, "The answer is 8.\n\nQ: "+test[0].Question+"\nA:"))
	assert.Equal(t, 9, strings.Count(p.Text, "Q: "))
	assert.Equal(t, 8, strings.Count(p.Text, "The answer is "))
	// every exemplar's own answer passes the gsm8k_cot strict filter
	for _, ex := range CoTExemplars {
		s := Score(ModeCoT, ex.Target, ex.Target[strings.LastIndex(ex.Target, " ")+1:])
		assert.True(t, s.StrictMatch, ex.Target)
	}
}
