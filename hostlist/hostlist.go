// Package hostlist expands Slurm's hostlist syntax, which both sbatch/squeue
// output and the engine launcher's allocations use.
package hostlist

import (
	"fmt"
	"strconv"
	"strings"
)

// Expand expands Slurm hostlist syntax: "gb200-[01-18]",
// "gb200-01,gb200-02", "rack[1-2]-n[01,03]". Zero padding follows the
// range's start ("[01-18]" gives 01..18), as scontrol does. An empty list,
// an empty entry or a node named twice is an error.
func Expand(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty node list")
	}
	var out []string
	for _, item := range splitTop(s) {
		if item == "" {
			return nil, fmt.Errorf("node list %q has an empty entry", s)
		}
		names, err := expandHost(item)
		if err != nil {
			return nil, fmt.Errorf("node list %q: %v", s, err)
		}
		out = append(out, names...)
	}
	seen := map[string]bool{}
	for _, n := range out {
		if seen[n] {
			return nil, fmt.Errorf("node list %q names %s twice", s, n)
		}
		seen[n] = true
	}
	return out, nil
}

// splitTop splits on commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

func expandHost(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("unbalanced ']' in %q", item)
		}
		return []string{item}, nil
	}
	closeIdx := strings.IndexByte(item[open:], ']')
	if closeIdx < 0 {
		return nil, fmt.Errorf("unbalanced '[' in %q", item)
	}
	closeIdx += open
	prefix, body, rest := item[:open], item[open+1:closeIdx], item[closeIdx+1:]
	tails, err := expandHost(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if lo == "" || hi == "" || err1 != nil || err2 != nil || a > b || a < 0 {
			return nil, fmt.Errorf("bad range %q in %q", r, item)
		}
		if b-a > 100000 {
			return nil, fmt.Errorf("range %q in %q is too large", r, item)
		}
		width := len(lo)
		for i := a; i <= b; i++ {
			num := fmt.Sprintf("%0*d", width, i)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}
