package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// gsmItem is one GSM8K test question with its gold number and the worked
// solution (calculator annotations removed), used as the simulated reasoning.
type gsmItem struct {
	question string
	gold     string
	steps    []string
}

type gsm8kIndex struct {
	byQuestion map[string]*gsmItem
}

var calcAnnotation = regexp.MustCompile(`<<[^>]*>>`)

// loadGSM8K reads a GSM8K JSONL split ({"question","answer"} per line, the
// answer ending in "#### N"). Errors name the file, line and field.
func loadGSM8K(path string) (*gsm8kIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx := &gsm8kIndex{byQuestion: map[string]*gsmItem{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		raw := strings.TrimSpace(sc.Text())
		if raw == "" {
			continue
		}
		var rec struct {
			Question *string `json:"question"`
			Answer   *string `json:"answer"`
		}
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: invalid JSON: %v", path, line, err)
		}
		if rec.Question == nil || strings.TrimSpace(*rec.Question) == "" {
			return nil, fmt.Errorf("%s:%d: field question: missing or empty", path, line)
		}
		if rec.Answer == nil {
			return nil, fmt.Errorf("%s:%d: field answer: missing", path, line)
		}
		work, gold, ok := strings.Cut(*rec.Answer, "####")
		gold = strings.ReplaceAll(strings.TrimSpace(gold), ",", "")
		if !ok || gold == "" {
			return nil, fmt.Errorf("%s:%d: field answer: does not end with \"#### N\"", path, line)
		}
		if _, err := strconv.ParseFloat(gold, 64); err != nil {
			return nil, fmt.Errorf("%s:%d: field answer: final answer %q is not a number", path, line, gold)
		}
		item := &gsmItem{question: *rec.Question, gold: gold}
		for _, s := range strings.Split(calcAnnotation.ReplaceAllString(work, ""), "\n") {
			if s = strings.TrimSpace(s); s != "" {
				item.steps = append(item.steps, s)
			}
		}
		idx.byQuestion[normQuestion(*rec.Question)] = item
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, line+1, err)
	}
	if len(idx.byQuestion) == 0 {
		return nil, fmt.Errorf("%s: no questions", path)
	}
	return idx, nil
}

// normQuestion collapses whitespace and case so a question matches however
// the client's template spaced it.
func normQuestion(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

type answerStyle int

const (
	styleLMEval answerStyle = iota // "...\n#### N" (lm-eval gsm8k, InferenceX's YAML)
	styleCoT                       // "... The answer is N." (gsm8k_cot, "Q: ...\nA:")
)

// find locates the test question a prompt asks: the text after the LAST
// "Question:" or "Q:" marker (few-shot prompts list exemplars first), up to
// the end of its line. Without a marker it tries the whole prompt and then
// each line from the end. marker reports whether the prompt looked like a
// GSM8K prompt at all.
func (g *gsm8kIndex) find(prompt string) (item *gsmItem, style answerStyle, marker bool) {
	qi := lastMarker(prompt, "Question:")
	ci := lastMarker(prompt, "Q:")
	pos, mlen := qi, len("Question:")
	if ci > qi {
		pos, mlen, style = ci, len("Q:"), styleCoT
	}
	if pos >= 0 {
		rest := prompt[pos+mlen:]
		line, _, _ := strings.Cut(strings.TrimLeft(rest, " \t"), "\n")
		if it := g.byQuestion[normQuestion(line)]; it != nil {
			return it, style, true
		}
		for _, suffix := range []string{"Answer:", "A:"} {
			if i := strings.LastIndex(rest, suffix); i > 0 {
				if it := g.byQuestion[normQuestion(rest[:i])]; it != nil {
					return it, style, true
				}
			}
		}
		return nil, style, true
	}
	if it := g.byQuestion[normQuestion(prompt)]; it != nil {
		return it, styleLMEval, false
	}
	lines := strings.Split(prompt, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if it := g.byQuestion[normQuestion(lines[i])]; it != nil {
			return it, styleLMEval, false
		}
	}
	return nil, styleLMEval, false
}

// lastMarker finds the last m that starts the prompt or follows whitespace.
func lastMarker(s, m string) int {
	for end := len(s); end > 0; {
		i := strings.LastIndex(s[:end], m)
		if i < 0 {
			return -1
		}
		if i == 0 || strings.ContainsAny(s[i-1:i], " \t\r\n") {
			return i
		}
		end = i
	}
	return -1
}

// wrongNumber returns a plausible wrong answer near gold (gold ± a few
// percent, at least 1), never equal to it after lm-eval normalisation.
func wrongNumber(gold string, h uint64) string {
	if g, err := strconv.ParseInt(gold, 10, 64); err == nil {
		span := max(g/10, -g/10, 3)
		d := 1 + int64(splitmix64(h)%uint64(span))
		w := g + d
		if h&1 == 0 && g-d >= 0 {
			w = g - d
		}
		return strconv.FormatInt(w, 10)
	}
	g, _ := strconv.ParseFloat(gold, 64)
	d := 1 + float64(splitmix64(h)%3)
	return strconv.FormatFloat(g+d, 'f', -1, 64)
}

// gsmAnswer builds the reply: reasoning (may be empty) and content.
func gsmAnswer(it *gsmItem, style answerStyle, correct, reasoning bool, h uint64) (thinking, content string) {
	num := it.gold
	steps := it.steps
	if !correct {
		num = wrongNumber(it.gold, h)
		// drop the last step, which usually states the right result
		if len(steps) > 1 {
			steps = steps[:len(steps)-1]
		} else {
			steps = []string{"Working through the quantities in the question step by step."}
		}
	}
	var final string
	switch style {
	case styleCoT:
		final = "The answer is " + num + "."
	default:
		final = "#### " + num
	}
	if reasoning {
		thinking = "Let me solve this step by step.\n" + strings.Join(steps, "\n")
		if style == styleCoT {
			return thinking, final
		}
		return thinking, "The answer is " + num + ".\n" + final
	}
	if style == styleCoT {
		return "", strings.Join(steps, " ") + " " + final
	}
	return "", strings.Join(steps, "\n") + "\n" + final
}

// nonAnswer is the reply to a GSM8K-looking prompt whose question is not in
// the loaded split: no number, so it scores as invalid rather than wrong.
const nonAnswer = "I cannot find this problem in the simulated engine's question set, so I cannot give an answer."
