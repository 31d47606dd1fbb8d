package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// starterCall is a starter invocation in a script: bin/starter, "$SF"
	// (the real-GPU script's name for its copy) or "$work/bin/starter", then
	// the rest of the shell command up to a pipe, redirection or list
	// operator.
	starterCall = regexp.MustCompile(`(?:bin/starter|"\$SF"|"\$work/bin/starter") ([a-z][^|>;&)]*)`)
	cliWord     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// TestScriptsCallRealCommands: every starter command and --flag that
// scripts/*.sh run exists in the command tree. A renamed command costs a
// script its run where nobody watches: the real-GPU script called
// `starter eval` after it had become `starter eval gsm8k`, and lost the
// GSM8K step of a device call.
func TestScriptsCallRealCommands(t *testing.T) {
	scripts, err := filepath.Glob("../scripts/*.sh")
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	root := newRoot()
	calls := 0
	for _, script := range scripts {
		raw, err := os.ReadFile(script)
		require.NoError(t, err)
		name := filepath.Base(script)
		for line := range strings.SplitSeq(strings.ReplaceAll(string(raw), "\\\n", " "), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, ix := range starterCall.FindAllStringSubmatchIndex(line, -1) {
				if strings.Contains(line[:ix[0]], "echo ") {
					continue // a message that names a command
				}
				words := strings.Fields(line[ix[2]:ix[3]])
				var sub []string
				for _, w := range words {
					w = strings.TrimRight(w, `"'`) // the end of a quoted pattern
					if !cliWord.MatchString(w) {
						break
					}
					sub = append(sub, w)
				}
				cmd, rest, err := root.Find(sub)
				group := cmd.Annotations[annotationGroup] == "true"
				if err != nil || len(rest) > 0 || cmd == root || (group && len(words) > len(sub)) {
					t.Errorf("%s: starter %s: no such command: %s", name, strings.Join(sub, " "), strings.TrimSpace(line))
					continue
				}
				calls++
				for _, w := range words {
					flag, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
					if strings.HasPrefix(w, "--") && cliWord.MatchString(flag) && cmd.Flags().Lookup(flag) == nil {
						t.Errorf("%s: %s has no flag --%s: %s", name, cmd.CommandPath(), flag, strings.TrimSpace(line))
					}
				}
			}
		}
	}
	assert.Greater(t, calls, 20, "the scripts' starter calls were found")
}
