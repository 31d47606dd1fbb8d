package gsm8k

import (
	"fmt"
	"regexp"
	"strings"
)

// Mode selects the prompt format, endpoint and strict-match rule.
type Mode string

const (
	// ModeLMEval is lm-eval's `gsm8k` task: 5-shot "Question: ...\nAnswer:"
	// completions, strict-match takes the FIRST "#### N".
	ModeLMEval Mode = "lm-eval"
	// ModeInferenceX is InferenceX's chat variant (utils/evals/gsm8k.yaml with
	// --apply_chat_template): few-shot as multi-turn chat, an instruction to
	// end with "#### [number]", strict-match takes the LAST "#### N".
	ModeInferenceX Mode = "inferencex"
	// ModeCoT is lm-eval's `gsm8k_cot`: the 8 Wei et al. exemplars as
	// "Q: ...\nA:" completions, strict-match on "The answer is N.".
	ModeCoT Mode = "cot"
)

// ParseMode validates a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeLMEval, ModeInferenceX, ModeCoT:
		return m, nil
	}
	return "", fmt.Errorf("gsm8k: unknown mode %q (want lm-eval, inferencex or cot)", s)
}

// Task is the lm-eval task name reported for the mode.
func (m Mode) Task() string {
	if m == ModeCoT {
		return "gsm8k_cot"
	}
	return "gsm8k"
}

// Invalid is lm-eval's RegexFilter fallback when nothing matches.
const Invalid = "[invalid]"

// The filter regexes, verbatim from the lm-eval task YAMLs. RE2 and Python's
// re agree on them: both pick the leftmost match and, within it, the
// alternative and repetition a backtracking engine would take first.
var (
	strictHashRe = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)
	strictCoTRe  = regexp.MustCompile(`The answer is (\-?[0-9\.\,]+).`)
	flexibleRe   = regexp.MustCompile(`(-?[$0-9.,]{2,})|(-?[0-9]+)`)
	upToHashRe   = regexp.MustCompile(`(?s).*#### `)
)

// SampleScore is the result of both lm-eval filters on one response.
type SampleScore struct {
	StrictExtracted   string `json:"strict_extracted"`
	FlexibleExtracted string `json:"flexible_extracted"`
	StrictMatch       bool   `json:"strict_match"`
	FlexibleMatch     bool   `json:"flexible_match"`
}

// Score applies the strict-match and flexible-extract filters of mode to a
// response and compares each with gold using lm-eval's exact_match settings.
// gold may be the full dataset answer, "#### N" or just N.
func Score(mode Mode, response, gold string) SampleScore {
	var strict string
	switch mode {
	case ModeInferenceX:
		strict = regexExtract(strictHashRe, response, true)
	case ModeCoT:
		strict = regexExtract(strictCoTRe, response, false)
	default:
		strict = regexExtract(strictHashRe, response, false)
	}
	flexible := regexExtract(flexibleRe, response, true)
	ref := gold
	if mode == ModeCoT {
		// gsm8k_cot's doc_to_target: answer.split('####')[-1].strip()
		if i := strings.LastIndex(ref, "####"); i >= 0 {
			ref = strings.TrimSpace(ref[i+len("####"):])
		}
	}
	ref = Normalize(ref)
	return SampleScore{
		StrictExtracted:   strict,
		FlexibleExtracted: flexible,
		StrictMatch:       Normalize(strict) == ref,
		FlexibleMatch:     Normalize(flexible) == ref,
	}
}

// regexExtract is lm-eval's RegexFilter: re.findall, then group_select 0
// (first) or -1 (last); a tuple of groups yields its first non-empty group;
// the result is strip()ped; no match gives "[invalid]".
func regexExtract(re *regexp.Regexp, s string, last bool) string {
	ms := re.FindAllStringSubmatch(s, -1)
	if len(ms) == 0 {
		return Invalid
	}
	m := ms[0]
	if last {
		m = ms[len(ms)-1]
	}
	groups := m[1:]
	var v string
	switch len(groups) {
	case 0:
		v = m[0]
	case 1:
		v = groups[0]
	default:
		v = Invalid
		for _, g := range groups {
			if g != "" {
				v = g
				break
			}
		}
	}
	return strings.TrimSpace(v)
}

// Normalize is lm-eval's exact_match preprocessing for the gsm8k tasks:
// re.sub each of ",", "\$", "(?s).*#### " and "\.$" with "", then lower-case.
func Normalize(s string) string {
	s = strings.ReplaceAll(s, ",", "")
	s = strings.ReplaceAll(s, "$", "")
	s = upToHashRe.ReplaceAllString(s, "")
	s = stripTrailingDotPy(s)
	// numpy's fixed-width unicode arrays, which exact_match builds, cannot
	// hold trailing NULs; mirror that so the comparison sees what numpy sees.
	s = strings.TrimRight(s, "\x00")
	return strings.ToLower(s)
}

// stripTrailingDotPy is Python's re.sub(r"\.$", "", s). Python's `$` (without
// MULTILINE) matches at the very end AND just before a final "\n", while Go's
// `$` matches only at the very end, so "42.\n" must become "42\n" here too.
func stripTrailingDotPy(s string) string {
	if strings.HasSuffix(s, ".") {
		return s[:len(s)-1]
	}
	if strings.HasSuffix(s, ".\n") {
		return s[:len(s)-2] + "\n"
	}
	return s
}
