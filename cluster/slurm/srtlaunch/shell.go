package srtlaunch

import (
	"regexp"
	"strings"

	"github.com/sweepflow/sweepflow/config"
)

// placeholderRe matches the reference renders' path placeholders. They stand
// for plain paths, which shlex.quote leaves bare, so they count as safe.
var placeholderRe = regexp.MustCompile(`\{[A-Z_]+(:[A-Za-z0-9._-]+)?\}`)

// shQuote is Python's shlex.quote, which srt-slurm uses for exports and
// the command line inside `bash -c`.
func shQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range placeholderRe.ReplaceAllString(s, "x") {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// shJoin is Python's shlex.join.
func shJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shQuote(a)
	}
	return strings.Join(q, " ")
}

// cloneMap copies a process's string map (empty for nil): environment
// order is part of what srt-slurm launches, and each process gets its own.
func cloneMap(m *config.Map) *config.Map {
	if m == nil {
		return config.NewMap()
	}
	return m.Clone()
}

// keysOf is m's keys in order (none for nil).
func keysOf(m *config.Map) []string {
	if m == nil {
		return nil
	}
	return m.Keys
}

// strMap is a recipe mapping of scalars as srt-slurm hands it to a process:
// every value through Python's str(), in order (empty for nil).
func strMap(m *config.Map) *config.Map {
	out := config.NewMap()
	for _, k := range keysOf(m) {
		out.Set(k, pyStr(m.Vals[k]))
	}
	return out
}
