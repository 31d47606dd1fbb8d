package gsm8k

import "strings"

// FewshotSeed is lm-eval's default fewshot_random_seed.
const FewshotSeed = 1234

// DefaultSeed is the request seed lm-eval's OpenAI-compatible clients send.
const DefaultSeed = 1234

// Shots per mode: gsm8k (and InferenceX's copy of it) is 5-shot, gsm8k_cot is 8-shot.
const (
	NumFewshot    = 5
	NumFewshotCoT = 8
)

// inferencexInstruction is the line InferenceX adds to gsm8k's doc_to_text.
const inferencexInstruction = "End your response with the answer on the last line, formatted as: #### [number]"

// FewshotIndices returns, for test documents 0..nDocs-1, the train-split
// indices lm-eval's default sampler puts in front of each one, in prompt
// order. lm-eval's gsm8k task sets fewshot_split: train and no sampler, so the
// "default" ContextSampler calls random.Random(1234).sample(train_docs, 5)
// once per test document, in document order, on one shared generator: every
// document gets its own five exemplars. (first_n is gsm8k_cot's sampler, not
// gsm8k's.) For the 7,473-row train split the first draws are
//
//	doc 0: 6374 3610 957 61 742
//	doc 1: 7462 6610 4769 286 5501
//	doc 2: 5677 687 806 6279 2905
//
// A --limit run sees the same exemplars for its documents as a full run.
func FewshotIndices(nDocs, nTrain, k int) [][]int {
	r := newPyRandom(FewshotSeed)
	out := make([][]int, nDocs)
	for i := range out {
		out[i] = r.sample(nTrain, k)
	}
	return out
}

// CoTExemplar is one of gsm8k_cot's fixed chain-of-thought exemplars.
type CoTExemplar struct{ Question, Target string }

// CoTExemplars are the eight math-word-problem chain-of-thought exemplars of
// Wei et al. (2022), "Chain-of-Thought Prompting Elicits Reasoning in Large
// Language Models", in the order lm-eval's gsm8k_cot task uses them (sampler
// first_n, so every document gets all eight in this order).
var CoTExemplars = [NumFewshotCoT]CoTExemplar{
	{"There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. How many trees did the grove workers plant today?",
		"There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6. The answer is 6."},
	{"If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
		"There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5."},
	{"Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
		"Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39."},
	{"Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
		"Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. The answer is 8."},
	{"Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
		"Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. The answer is 9."},
	{"There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. How many computers are now in the server room?",
		"There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29."},
	{"Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
		"Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33."},
	{"Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
		"Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8."},
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Prompt is the request for one test document.
type Prompt struct {
	DocID int
	// Text is the completion prompt (lm-eval, cot); empty in chat mode.
	Text string
	// Messages is the chat conversation (inferencex); nil otherwise.
	Messages   []Message
	FewshotIDs []int
	Stop       []string
	MaxTokens  int
}

// Chat reports whether the prompt goes to /v1/chat/completions.
func (p Prompt) Chat() bool { return p.Messages != nil }

// LogText is the prompt as recorded in the sample log: the completion prompt,
// or the final user turn of a chat (the few-shot turns are FewshotIDs).
func (p Prompt) LogText() string {
	if p.Chat() {
		return p.Messages[len(p.Messages)-1].Content
	}
	return p.Text
}

// Per-mode generation settings. lm-eval's API models default to 256 new
// tokens; InferenceX passes max_tokens=min(ctx-4096, 16384) so thinking
// models have room.
var (
	stopLMEval     = []string{"Question:", "</s>", "<|im_end|>"}
	stopInferenceX = []string{"</s>", "<|im_end|>"}
	stopCoT        = []string{"Q:", "</s>", "<|im_end|>"}
)

// DefaultMaxTokens is the max_tokens a mode sends when Options.MaxTokens is 0.
func (m Mode) DefaultMaxTokens() int {
	if m == ModeInferenceX {
		return 16384
	}
	return 256
}

func gsm8kText(q string) string { return "Question: " + q + "\nAnswer:" }

func inferencexText(q string) string {
	return "Question: " + q + "\n" + inferencexInstruction + "\nAnswer:"
}

// BuildPrompts renders the requests for test docs exactly as lm-eval would
// (target delimiter " ", few-shot delimiter "\n\n"; chat few-shot as
// alternating user/assistant turns, as --fewshot_as_multiturn does). The
// few-shot draw depends on the test document's position, so test must start
// at document 0 of the split (a --limit prefix). train is unused in cot mode.
func BuildPrompts(mode Mode, test, train []Doc, maxTokens int) []Prompt {
	if maxTokens <= 0 {
		maxTokens = mode.DefaultMaxTokens()
	}
	var shots [][]int
	if mode != ModeCoT {
		shots = FewshotIndices(len(test), len(train), NumFewshot)
	}
	out := make([]Prompt, len(test))
	for i, d := range test {
		p := Prompt{DocID: d.ID, MaxTokens: maxTokens}
		switch mode {
		case ModeCoT:
			var b strings.Builder
			for _, ex := range CoTExemplars {
				b.WriteString("Q: " + ex.Question + "\nA: " + ex.Target + "\n\n")
			}
			b.WriteString("Q: " + d.Question + "\nA:")
			p.Text, p.Stop = b.String(), stopCoT
		case ModeInferenceX:
			p.FewshotIDs = shots[i]
			p.Messages = make([]Message, 0, 2*NumFewshot+1)
			for _, j := range shots[i] {
				p.Messages = append(p.Messages,
					Message{Role: "user", Content: inferencexText(train[j].Question)},
					Message{Role: "assistant", Content: train[j].Answer})
			}
			p.Messages = append(p.Messages, Message{Role: "user", Content: inferencexText(d.Question)})
			p.Stop = stopInferenceX
		default:
			p.FewshotIDs = shots[i]
			var b strings.Builder
			for _, j := range shots[i] {
				b.WriteString(gsm8kText(train[j].Question) + " " + train[j].Answer + "\n\n")
			}
			b.WriteString(gsm8kText(d.Question))
			p.Text, p.Stop = b.String(), stopLMEval
		}
		out[i] = p
	}
	return out
}
