package checklist

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
	"github.com/sweepflow/sweepflow/internal/anynum"
)

// pin is one simulated-acceptance setting: what it makes the engine accept
// per step (TRT-LLM's knob counts draft tokens only, so AL = value + 1).
type pin struct {
	AL    float64
	Raw   string
	Knob  string // SGLANG_SIMULATE_ACC_LEN, SYNTHETIC_ACCEPTANCE_LENGTH, ...
	Pos   strictyaml.Pos
	Field string
	Bad   string // enabled without a usable value: why
}

const (
	knobRowFlag = "SYNTHETIC_ACCEPTANCE"
	knobRowLen  = "SYNTHETIC_ACCEPTANCE_LENGTH"
	knobSGLang  = "SGLANG_SIMULATE_ACC_LEN"
	knobTRT     = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"
	knobVLLM    = "synthetic_acceptance_length"
)

var vllmSyntheticRe = regexp.MustCompile(`"?synthetic_acceptance_length"?\s*[:=]\s*"?([0-9.]+)`)

// rowPins reads the row's additional-settings: InferenceX's launchers turn
// SYNTHETIC_ACCEPTANCE=true + SYNTHETIC_ACCEPTANCE_LENGTH into the engine's
// knob; single-node scripts may export the engine knobs directly.
func rowPins(row *matrix.Row) []pin {
	var out []pin
	set := settings(row)
	on := false
	for _, s := range set {
		if s.Key == knobRowFlag && truthy(s.Value) {
			on = true
		}
	}
	lenSeen := false
	for _, s := range set {
		switch {
		case s.Key == knobRowLen && on:
			lenSeen = true
			p := pin{Raw: s.Raw, Knob: knobRowLen, Pos: s.Pos, Field: s.Field}
			if v, err := strconv.ParseFloat(s.Value, 64); err == nil {
				p.AL = v
			} else {
				p.Bad = "not a number"
			}
			out = append(out, p)
		case s.Key == knobSGLang:
			out = append(out, parsedPin(s.Raw, knobSGLang, s.Value, 0, s.Pos, s.Field))
		case s.Key == knobTRT:
			out = append(out, parsedPin(s.Raw, knobTRT, s.Value, 1, s.Pos, s.Field))
		case strings.Contains(s.Raw, knobVLLM):
			if m := vllmSyntheticRe.FindStringSubmatch(s.Raw); m != nil {
				out = append(out, parsedPin(s.Raw, knobVLLM, m[1], 0, s.Pos, s.Field))
			}
		}
	}
	if on && !lenSeen {
		for _, s := range set {
			if s.Key == knobRowFlag {
				out = append(out, pin{Raw: s.Raw, Knob: knobRowFlag, Pos: s.Pos, Field: s.Field, Bad: "no SYNTHETIC_ACCEPTANCE_LENGTH next to it"})
			}
		}
	}
	return out
}

func parsedPin(raw, knob, value string, offset float64, pos strictyaml.Pos, field string) pin {
	p := pin{Raw: raw, Knob: knob, Pos: pos, Field: field}
	if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
		p.AL = v + offset
	} else {
		p.Bad = "not a number"
	}
	return p
}

// recipePins reads simulated acceptance from the recipe: environment blocks
// (SGLang, TRT-LLM) and vLLM's synthetic rejection sampling. With decodeOnly
// it reads only the blocks of the role that decodes, the one whose
// acceptance the benchmark measures.
func (rv *recipeView) pins(decodeOnly bool) []pin {
	var out []pin
	for _, b := range rv.envBlocks() {
		if decodeOnly && b.mode != "" && b.mode != rv.decodeRole() {
			continue
		}
		env := b.env
		for _, k := range []string{knobSGLang, knobTRT} {
			if _, v, pos, ok := rv.lookup(env, k); ok {
				off := 0.0
				if k == knobTRT {
					off = 1
				}
				out = append(out, parsedPin(k+"="+v, k, v, off, pos, env.Path+"."+k))
			}
		}
		if !decodeOnly {
			// Any simulation knob counts when the question is "is it simulated at all".
			for _, k := range env.Keys {
				if strings.HasPrefix(k, "SGLANG_SIMULATE_ACC") && k != knobSGLang {
					out = append(out, pin{Raw: k + "=" + textOf(env.Vals[k]), Knob: k, Pos: rv.at(env, k), Field: env.Path + "." + k, Bad: "simulation setting"})
				}
			}
		}
	}
	modes := []string{"prefill", "decode", "aggregated"}
	if decodeOnly {
		modes = []string{rv.decodeRole()}
	}
	for _, mode := range modes {
		cfg := rv.roleConfig(mode)
		if v, text, pos, ok := rv.lookup(cfg, "speculative-config", "speculative_config"); ok {
			sc := specConfig(v)
			if sc["rejection_sample_method"] == "synthetic" {
				p := pin{Raw: "speculative-config " + strings.TrimSpace(text), Knob: knobVLLM, Pos: pos, Field: mode + ".speculative-config"}
				if v, ok := anynum.Float(sc[knobVLLM]); ok {
					p.AL = v
				} else {
					p.Bad = "rejection_sample_method synthetic without synthetic_acceptance_length"
				}
				out = append(out, p)
			}
		}
	}
	return out
}

// acceptance applies check 11: agentic spec-decode rows simulate acceptance
// at the golden AL; non-agentic rows never simulate it.
func (c *checker) acceptance(row *matrix.Row, rv *recipeView) {
	e := row.Entry
	agentic := row.Scenario == matrix.AgenticCoding
	pins := rowPins(row)
	if rv != nil {
		pins = append(pins, rv.pins(agentic)...)
	}
	if !agentic {
		for _, p := range pins {
			c.add(Finding{Rule: RuleNonAgenticSimAL, Pos: p.Pos, Field: p.Field, ConfigKey: row.ConfigKey,
				Got: p.Raw, Want: "real acceptance on " + row.Scenario + " rows (no simulated-acceptance setting)"})
		}
		return
	}
	var d draft
	hasDraft := false
	if rv != nil {
		d, hasDraft = rv.speculative()
	}
	if row.Search.SpecDecoding == "none" && !hasDraft {
		return
	}
	eng := engineOf(e.Framework)
	mode := "thinking_off"
	if c.opts.Thinking {
		mode = "thinking_on"
	}
	golden, haveGolden, src := 0.0, false, ""
	switch {
	case c.golden == nil:
	case d.Tokens == 0 && rv == nil:
		c.note("%s: draft length unknown without a recipe; %s compares no value", row.ConfigKey, RuleAgenticGoldenAL)
	case d.Tokens == 0:
		c.note("%s: recipe %s names no draft length; %s compares no value", row.ConfigKey, rv.Path, RuleAgenticGoldenAL)
	default:
		al, from, err := c.golden.lookup(e.Model, e.ModelPrefix, d.Algorithm, c.opts.Thinking, d.Tokens)
		if err != nil {
			c.add(Finding{Rule: RuleAgenticGoldenAL, Pos: d.Pos, Field: d.Field, ConfigKey: row.ConfigKey,
				Got:  fmt.Sprintf("%s %s, %s, %d draft tokens: %v", e.Model, d.Algorithm, mode, d.Tokens, err),
				Want: "a committed golden AL for this model, thinking mode and draft length"})
			break
		}
		golden, haveGolden, src = al, true, from
	}
	// sweepflow's launcher injects SGLANG_SIMULATE_ACC_* from the sweep's
	// golden-al table into every SGLang worker for perf runs: that counts as
	// the row's setting, at the table's value.
	if c.inject != nil && eng == "sglang" && d.Tokens > 0 {
		if v, from, err := c.inject.lookup(e.Model, e.ModelPrefix, d.Algorithm, c.opts.Thinking, d.Tokens); err == nil {
			pins = append(pins, pin{AL: v, Raw: fmt.Sprintf("golden-al %s injects %s=%s", from, knobSGLang, fmtAL(v)), Knob: knobSGLang,
				Pos: row.Search.Pos, Field: row.Search.Path + " (golden-al injection)"})
		} else {
			c.note("%s: the sweep's golden-al table has no value to inject: %v", row.ConfigKey, err)
		}
	}
	if len(pins) == 0 && rv == nil {
		// The recipe or benchmark script that would carry the knob is not
		// here (no recipes root, or a single-node script): say so, not fail.
		c.note("%s: acceptance knobs live in its recipe or benchmark script, which was not read; %s could not confirm simulation", row.ConfigKey, RuleAgenticGoldenAL)
		return
	}
	if len(pins) == 0 {
		where := "the row's additional-settings"
		if rv != nil {
			where += " and recipe " + rv.Path
		}
		want := knobWant(eng, golden, haveGolden)
		c.add(Finding{Rule: RuleAgenticGoldenAL, Pos: row.Search.Pos, Field: row.Search.Path, ConfigKey: row.ConfigKey,
			Got: "real (unsimulated) acceptance: no simulated-acceptance setting in " + where, Want: want})
		return
	}
	for _, p := range pins {
		if p.Bad != "" {
			c.add(Finding{Rule: RuleAgenticGoldenAL, Pos: p.Pos, Field: p.Field, ConfigKey: row.ConfigKey,
				Got: p.Raw + " (" + p.Bad + ")", Want: knobWant(eng, golden, haveGolden)})
			continue
		}
		if haveGolden {
			c.report.GoldenCompared++
		}
		if haveGolden && math.Abs(p.AL-golden) > 1e-6 {
			c.add(Finding{Rule: RuleAgenticGoldenAL, Pos: p.Pos, Field: p.Field, ConfigKey: row.ConfigKey,
				Got:  fmt.Sprintf("%s (AL %s)", p.Raw, fmtAL(p.AL)),
				Want: fmt.Sprintf("%s (golden AL for %s, %s, %d draft tokens in %s)", pinWant(p.Knob, golden), e.Model, mode, d.Tokens, src)})
		}
	}
}

func fmtAL(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func pinWant(knob string, golden float64) string {
	if knob == knobTRT {
		return fmt.Sprintf("%s=%s", knob, fmtAL(math.Round((golden-1)*1e6)/1e6))
	}
	if knob == knobVLLM {
		return fmt.Sprintf("%s %s", knob, fmtAL(golden))
	}
	return fmt.Sprintf("%s=%s", knob, fmtAL(golden))
}

// knobWant names the engine's simulated-acceptance knob with the golden value.
func knobWant(eng string, golden float64, have bool) string {
	v := "<golden AL>"
	if have {
		v = fmtAL(golden)
	}
	switch eng {
	case "vllm":
		return fmt.Sprintf(`speculative-config with "rejection_sample_method": "synthetic", "synthetic_acceptance_length": %s`, v)
	case "trtllm":
		tv := "<golden AL - 1>"
		if have {
			tv = fmtAL(math.Round((golden-1)*1e6) / 1e6)
		}
		return knobTRT + "=" + tv + " in the decode environment"
	}
	return fmt.Sprintf("%s=%s in the decode/aggregated environment, or SYNTHETIC_ACCEPTANCE=true with SYNTHETIC_ACCEPTANCE_LENGTH=%s on the row", knobSGLang, v, v)
}

// specChat applies check 9: a spec-decode benchmark drives the model through
// its chat template, so acceptance follows real traffic.
func (c *checker) specChat(row *matrix.Row, rv *recipeView) {
	_, hasDraft := rv.speculative()
	if row.Search.SpecDecoding == "none" && !hasDraft {
		return
	}
	b := rv.Benchmark
	if b.Pos.File == "" {
		c.add(Finding{Rule: RuleSpecChat, Pos: strictyaml.Pos{File: rv.Display}, Field: "benchmark", ConfigKey: row.ConfigKey,
			Got: "no benchmark section", Want: "a benchmark with use_chat_template: true (chat-completions endpoint)"})
		return
	}
	if sa := b.SABench; sa != nil {
		if !sa.UseChatTemplate {
			c.add(Finding{Rule: RuleSpecChat, Pos: b.Pos, Field: "benchmark.use_chat_template", ConfigKey: row.ConfigKey,
				Got: "use_chat_template: false (raw completions)", Want: "use_chat_template: true"})
		}
		return
	}
	// Another benchmark says so in its own words: a chat setting, a chat
	// endpoint, or InferenceX's AgentX driver (aiperf --endpoint-type chat).
	chat := false
	for _, sc := range rv.Scalars() {
		if !sc.Benchmark {
			continue
		}
		if strings.Contains(strings.ToLower(sc.Key), "chat") && !strings.HasSuffix(sc.Path, "]") {
			if !truthy(sc.Value) {
				c.add(Finding{Rule: RuleSpecChat, Pos: sc.Pos, Field: sc.Path, ConfigKey: row.ConfigKey,
					Got: sc.Key + ": " + sc.Value + " (raw completions)", Want: "use_chat_template: true"})
				return
			}
			chat = true
		}
		low := strings.ToLower(sc.Value)
		if strings.Contains(low, "chat") || strings.Contains(low, "agentic_srt.sh") {
			chat = true
		}
	}
	if !chat {
		c.add(Finding{Rule: RuleSpecChat, Pos: b.Pos, Field: "benchmark", ConfigKey: row.ConfigKey,
			Got: "no chat template or chat endpoint in the benchmark", Want: "use_chat_template: true (chat-completions endpoint)"})
	}
}
