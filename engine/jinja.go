package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// A small Jinja2 renderer for srt-slurm's own templates (nginx.conf.j2),
// with jinja2.Environment's defaults: block tags vanish but the text around
// them, newlines included, stays (no trim_blocks / lstrip_blocks), and one
// trailing newline of the template is dropped. It knows what those
// templates use: if/elif/else, for, set, {{ }}, "~", the lower, upper and
// replace filters, string literals and variables (string, bool, int,
// []string).

type jinjaNode struct {
	text  string // literal text, or the expression / statement
	kind  byte   // 't' text, 'e' expression, 's' statement
	where int    // line
}

func jinjaRender(src string, vars map[string]any) (string, error) {
	src = strings.TrimSuffix(src, "\n")
	var nodes []jinjaNode
	line := 1
	for len(src) > 0 {
		i := strings.Index(src, "{")
		for i >= 0 && i+1 < len(src) && !strings.ContainsRune("{%#", rune(src[i+1])) {
			j := strings.Index(src[i+1:], "{")
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 || i+1 >= len(src) {
			nodes = append(nodes, jinjaNode{text: src, kind: 't', where: line})
			break
		}
		if i > 0 {
			nodes = append(nodes, jinjaNode{text: src[:i], kind: 't', where: line})
			line += strings.Count(src[:i], "\n")
		}
		open := src[i+1]
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[open]
		end := strings.Index(src[i+2:], closer)
		if end < 0 {
			return "", fmt.Errorf("template line %d: unclosed tag", line)
		}
		body := src[i+2 : i+2+end]
		if strings.HasPrefix(body, "-") || strings.HasSuffix(body, "-") {
			return "", fmt.Errorf("template line %d: whitespace control is not supported", line)
		}
		switch open {
		case '{':
			nodes = append(nodes, jinjaNode{text: strings.TrimSpace(body), kind: 'e', where: line})
		case '%':
			nodes = append(nodes, jinjaNode{text: strings.TrimSpace(body), kind: 's', where: line})
		}
		line += strings.Count(body, "\n")
		src = src[i+2+end+2:]
	}
	var b strings.Builder
	if _, err := jinjaExec(&b, nodes, 0, copyVars(vars), ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

// jinjaExec runs nodes from i until a statement whose keyword is in stop
// ("endif|elif|else", "endfor"); it returns that statement's index.
func jinjaExec(b *strings.Builder, nodes []jinjaNode, i int, vars map[string]any, stop string) (int, error) {
	for ; i < len(nodes); i++ {
		n := nodes[i]
		switch n.kind {
		case 't':
			if b != nil {
				b.WriteString(n.text)
			}
		case 'e':
			if b == nil {
				continue
			}
			v, err := jinjaEval(n.text, vars)
			if err != nil {
				return 0, fmt.Errorf("template line %d: %v", n.where, err)
			}
			b.WriteString(jinjaStr(v))
		case 's':
			kw, rest, _ := strings.Cut(n.text, " ")
			if stop != "" && strings.Contains("|"+stop+"|", "|"+kw+"|") {
				return i, nil
			}
			switch kw {
			case "if":
				var err error
				if i, err = jinjaIf(b, nodes, i, vars, rest); err != nil {
					return 0, err
				}
			case "for":
				name, list, ok := strings.Cut(rest, " in ")
				if !ok {
					return 0, fmt.Errorf("template line %d: bad for", n.where)
				}
				lv, err := jinjaEval(list, vars)
				if err != nil {
					return 0, fmt.Errorf("template line %d: %v", n.where, err)
				}
				items, _ := lv.([]string)
				end, err := jinjaExec(nil, nodes, i+1, vars, "endfor")
				if err != nil {
					return 0, err
				}
				for _, it := range items {
					inner := copyVars(vars)
					inner[strings.TrimSpace(name)] = it
					if _, err := jinjaExec(b, nodes, i+1, inner, "endfor"); err != nil {
						return 0, err
					}
				}
				i = end
			case "set":
				name, expr, ok := strings.Cut(rest, "=")
				if !ok {
					return 0, fmt.Errorf("template line %d: bad set", n.where)
				}
				if b != nil {
					v, err := jinjaEval(expr, vars)
					if err != nil {
						return 0, fmt.Errorf("template line %d: %v", n.where, err)
					}
					vars[strings.TrimSpace(name)] = v
				}
			default:
				return 0, fmt.Errorf("template line %d: unsupported statement %q", n.where, kw)
			}
		}
	}
	if stop != "" {
		return 0, fmt.Errorf("template: missing %s", stop)
	}
	return i, nil
}

// jinjaIf renders the taken branch of an if/elif/else chain starting at i
// and returns the index of its endif.
func jinjaIf(b *strings.Builder, nodes []jinjaNode, i int, vars map[string]any, cond string) (int, error) {
	done := false
	for {
		take := false
		if !done {
			if cond == "" {
				take = true
			} else {
				v, err := jinjaEval(cond, vars)
				if err != nil {
					return 0, fmt.Errorf("template line %d: %v", nodes[i].where, err)
				}
				take = jinjaTruthy(v)
			}
		}
		var out *strings.Builder
		if take && b != nil {
			out = b
		}
		end, err := jinjaExec(out, nodes, i+1, vars, "endif|elif|else")
		if err != nil {
			return 0, err
		}
		done = done || take
		kw, rest, _ := strings.Cut(nodes[end].text, " ")
		switch kw {
		case "endif":
			return end, nil
		case "elif":
			cond = rest
		case "else":
			cond = ""
		}
		i = end
	}
}

func copyVars(m map[string]any) map[string]any {
	c := make(map[string]any, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

func jinjaTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int:
		return x != 0
	case []string:
		return len(x) > 0
	}
	return true
}

func jinjaStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case nil:
		return "None"
	}
	return fmt.Sprint(v)
}

// jinjaEval evaluates expr: operands joined by "~", each a literal, a
// variable or a parenthesised expression, followed by filters.
func jinjaEval(expr string, vars map[string]any) (any, error) {
	p := &jinjaParser{s: strings.TrimSpace(expr), vars: vars}
	v, err := p.concat()
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i != len(p.s) {
		return nil, fmt.Errorf("unsupported expression %q", expr)
	}
	return v, nil
}

type jinjaParser struct {
	s    string
	i    int
	vars map[string]any
}

func (p *jinjaParser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *jinjaParser) concat() (any, error) {
	v, err := p.filtered()
	if err != nil {
		return nil, err
	}
	for p.skip(); p.i < len(p.s) && p.s[p.i] == '~'; p.skip() {
		p.i++
		w, err := p.filtered()
		if err != nil {
			return nil, err
		}
		v = jinjaStr(v) + jinjaStr(w)
	}
	return v, nil
}

func (p *jinjaParser) filtered() (any, error) {
	v, err := p.operand()
	if err != nil {
		return nil, err
	}
	for p.skip(); p.i < len(p.s) && p.s[p.i] == '|'; p.skip() {
		p.i++
		p.skip()
		name := p.ident()
		var args []any
		if p.skip(); p.i < len(p.s) && p.s[p.i] == '(' {
			p.i++
			for {
				p.skip()
				if p.i < len(p.s) && p.s[p.i] == ')' {
					p.i++
					break
				}
				a, err := p.concat()
				if err != nil {
					return nil, err
				}
				args = append(args, a)
				if p.skip(); p.i < len(p.s) && p.s[p.i] == ',' {
					p.i++
				}
			}
		}
		s := jinjaStr(v)
		switch {
		case name == "lower":
			v = strings.ToLower(s)
		case name == "upper":
			v = strings.ToUpper(s)
		case name == "replace" && len(args) == 2:
			v = strings.ReplaceAll(s, jinjaStr(args[0]), jinjaStr(args[1]))
		default:
			return nil, fmt.Errorf("unsupported filter %q", name)
		}
	}
	return v, nil
}

func (p *jinjaParser) ident() string {
	j := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
		p.i++
	}
	return p.s[j:p.i]
}

func (p *jinjaParser) operand() (any, error) {
	p.skip()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("expression %q ends early", p.s)
	}
	switch c := p.s[p.i]; {
	case c == '(':
		p.i++
		v, err := p.concat()
		if err != nil {
			return nil, err
		}
		if p.skip(); p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, fmt.Errorf("missing ) in %q", p.s)
		}
		p.i++
		return v, nil
	case c == '"' || c == '\'':
		end := strings.IndexByte(p.s[p.i+1:], c)
		if end < 0 {
			return nil, fmt.Errorf("unterminated string in %q", p.s)
		}
		v := p.s[p.i+1 : p.i+1+end]
		p.i += end + 2
		return v, nil
	default:
		name := p.ident()
		if name == "" {
			return nil, fmt.Errorf("unsupported expression %q", p.s)
		}
		v, ok := p.vars[name]
		if !ok {
			return nil, fmt.Errorf("undefined template variable %q", name) // jinja2 would print ""; refuse instead
		}
		return v, nil
	}
}
