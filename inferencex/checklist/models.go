package checklist

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// Models is what InferenceX's MODELS.md says is deprecated: scenarios for
// every model (the Scenarios table) and models, scenarios, precisions and
// non-spec-decode arms per model prefix (the Model support matrix). It is
// parsed from the file at run time, so a new deprecation needs no release.
type Models struct {
	File      string
	Scenarios []Scenario
	Models    []ModelStatus
}

// Scenario is one row of the Scenarios table.
type Scenario struct {
	Name       string // "Single-turn 8k1k", "Agentic coding"
	ISL, OSL   int    // 0 for agentic coding
	Deprecated bool
	Since      time.Time // zero: no date given
	Line       int
}

// ModelStatus is one row of the Model support matrix.
type ModelStatus struct {
	Class    string
	Prefixes []string
	Active   string
	Retired  bool
	Since    time.Time // retirement date
	Deprec   []Deprecation
	Line     int
}

// Deprecation is one item of a model's "Deprecated scenarios" cell.
type Deprecation struct {
	Text       string
	Scenario   string // "" for every scenario
	Precision  string // "bf16" for "all bf16 recipes"
	NonSpecArm bool   // "non-MTP arm", "non-DSpark arm"
	Since      time.Time
}

var (
	dateRe      = regexp.MustCompile(`\b(20\d\d-\d\d-\d\d)\b`)
	prefixRe    = regexp.MustCompile("`([^`]+)`")
	islOslRe    = regexp.MustCompile(`(\d+)\s*/\s*(\d+)`)
	precisionRe = regexp.MustCompile(`(?i)\ball\s+\**(\w+)\**\s+recipes`)
	nonArmRe    = regexp.MustCompile(`(?i)\bnon-[\w-]+\s+arm\b`)
)

// LoadModels parses MODELS.md.
func LoadModels(file string) (*Models, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("MODELS.md: %w", err)
	}
	return ParseModels(strictyaml.DisplayPath(file), string(data))
}

// ParseModels parses MODELS.md text; display names the file in findings.
func ParseModels(display, text string) (*Models, error) {
	m := &Models{File: display}
	var header []string
	for i, line := range strings.Split(text, "\n") {
		cells, ok := tableCells(line)
		if !ok {
			header = nil
			continue
		}
		if header == nil {
			header = cells
			continue
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue // the |---|---| separator
		}
		switch {
		case len(header) >= 3 && header[0] == "Scenario":
			m.Scenarios = append(m.Scenarios, parseScenario(cells, i+1))
		case len(header) >= 5 && strings.HasPrefix(header[0], "Model architecture") && len(cells) >= 5:
			m.Models = append(m.Models, m.parseModel(cells, i+1))
		}
	}
	if len(m.Scenarios) == 0 || len(m.Models) == 0 {
		return nil, fmt.Errorf("%s: no Scenarios table or Model support matrix found (expected InferenceX's MODELS.md)", display)
	}
	return m, nil
}

func tableCells(line string) ([]string, bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "|") || !strings.HasSuffix(t, "|") || len(t) < 2 {
		return nil, false
	}
	parts := strings.Split(t[1:len(t)-1], "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, true
}

func firstDate(s string) time.Time {
	if m := dateRe.FindStringSubmatch(s); m != nil {
		if t, err := time.Parse("2006-01-02", m[1]); err == nil {
			return t
		}
	}
	return time.Time{}
}

func parseScenario(cells []string, line int) Scenario {
	s := Scenario{Name: strings.Trim(cells[0], "* "), Line: line}
	if m := islOslRe.FindStringSubmatch(cells[1]); m != nil {
		fmt.Sscan(m[1], &s.ISL)
		fmt.Sscan(m[2], &s.OSL)
	}
	if strings.Contains(strings.ToLower(cells[2]), "deprecated for all") {
		s.Deprecated = true
		s.Since = firstDate(cells[2])
	}
	return s
}

func (m *Models) parseModel(cells []string, line int) ModelStatus {
	ms := ModelStatus{Class: cells[0], Active: cells[3], Line: line}
	for _, p := range prefixRe.FindAllStringSubmatch(cells[1], -1) {
		ms.Prefixes = append(ms.Prefixes, p[1])
	}
	if strings.HasPrefix(strings.TrimSpace(cells[3]), "None") {
		ms.Retired = true
		ms.Since = firstDate(cells[3])
	}
	for _, item := range splitTop(cells[4]) {
		d := Deprecation{Text: item, Since: firstDate(item)}
		low := strings.ToLower(item)
		for _, s := range m.Scenarios {
			if strings.HasPrefix(low, strings.ToLower(s.Name)) {
				d.Scenario = s.Name
			}
		}
		if p := precisionRe.FindStringSubmatch(item); p != nil {
			d.Precision = strings.ToLower(p[1])
		}
		d.NonSpecArm = nonArmRe.MatchString(item)
		if d.Scenario == "" && d.Precision == "" {
			continue // prose the rule cannot apply
		}
		ms.Deprec = append(ms.Deprec, d)
	}
	return ms
}

// splitTop splits a cell at commas outside parentheses and brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// scenarioOf names the MODELS.md scenario of a row.
func (m *Models) scenarioOf(row *matrix.Row) *Scenario {
	for i := range m.Scenarios {
		s := &m.Scenarios[i]
		if row.Scenario == matrix.AgenticCoding {
			if strings.HasPrefix(strings.ToLower(s.Name), "agentic") {
				return s
			}
			continue
		}
		if s.ISL == row.Int("isl") && s.OSL == row.Int("osl") && s.ISL > 0 {
			return s
		}
	}
	return nil
}

// effective: a dated deprecation applies from its date on; an undated one
// applies now.
func effective(since, today time.Time) bool { return since.IsZero() || !today.Before(since) }

func (c *checker) deprecated(row *matrix.Row) {
	m, e, today := c.models, row.Entry, c.opts.Today
	sc := m.scenarioOf(row)
	name := row.Scenario
	if sc != nil {
		name = sc.Name
	}
	got := fmt.Sprintf("%s %s (%s)", e.ModelPrefix, name, e.Precision)
	at := func(line int, why string) {
		c.add(Finding{Rule: RuleDeprecated, Pos: row.Search.Pos, Field: row.Search.Path, ConfigKey: row.ConfigKey,
			Got: got, Want: fmt.Sprintf("an active model and scenario (%s:%d: %s)", m.File, line, why)})
	}
	if sc != nil && sc.Deprecated && effective(sc.Since, today) {
		at(sc.Line, fmt.Sprintf("%s deprecated for all models since %s", sc.Name, dateText(sc.Since)))
	}
	var ms *ModelStatus
	for i := range m.Models {
		for _, p := range m.Models[i].Prefixes {
			if p == e.ModelPrefix {
				ms = &m.Models[i]
			}
		}
	}
	if ms == nil {
		c.note("%s: model prefix %s has no row in %s; %s cannot judge it", row.ConfigKey, e.ModelPrefix, m.File, RuleDeprecated)
		return
	}
	if ms.Retired && effective(ms.Since, today) {
		at(ms.Line, fmt.Sprintf("%s retired %s", ms.Class, dateText(ms.Since)))
		return
	}
	for _, d := range ms.Deprec {
		if !effective(d.Since, today) {
			continue
		}
		if d.Scenario != "" && (sc == nil || d.Scenario != sc.Name) {
			continue
		}
		if d.Precision != "" && !strings.EqualFold(d.Precision, e.Precision) {
			continue
		}
		if d.NonSpecArm && row.Search.SpecDecoding != "none" {
			continue
		}
		at(ms.Line, "deprecated: "+d.Text)
	}
}

func dateText(t time.Time) string {
	if t.IsZero() {
		return "(no date)"
	}
	return t.Format("2006-01-02")
}
