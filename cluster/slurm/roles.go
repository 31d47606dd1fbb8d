package slurm

import (
	"strings"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
)

// RoleFor maps a rendered command to its simulator role: the first entry
// point whose words start the command's words, or, for `bash -c|-lc
// SCRIPT`, the words of SCRIPT (or of one of its `&&` parts); each also
// with its launcher words dropped (see withoutLaunchers).
func RoleFor(eps []config.Entrypoint, command []string) (string, bool) {
	words := [][]string{command}
	if len(command) == 3 && command[0] == "bash" && (command[1] == "-c" || command[1] == "-lc") {
		words = [][]string{strings.Fields(command[2])}
		for _, part := range strings.Split(command[2], "&&") {
			words = append(words, strings.Fields(part))
		}
	}
	var cands [][]string
	for _, w := range words {
		cands = append(cands, withoutLaunchers(w)...)
	}
	for _, e := range eps {
		want := strings.Fields(e.Match)
		for _, words := range cands {
			if hasPrefix(words, want) {
				return e.Role, true
			}
		}
	}
	return "", false
}

// numactlArg are numactl's options that take a value as the next word.
var numactlArg = map[string]bool{
	"-m": true, "--membind": true, "-N": true, "--cpunodebind": true, "-C": true, "--physcpubind": true,
	"-i": true, "--interleave": true, "-p": true, "--preferred": true, "-P": true, "--preferred-many": true,
	"-w": true, "--weighted-interleave": true,
}

// withoutLaunchers returns words, then words after each launcher prefix
// srt-slurm puts before an engine (TRTLLMProtocol.build_worker_command:
// `numactl -m 0,1` on GB200/GB300, then trtllm-llmapi-launch), so an entry
// point names the engine, not its wrappers.
func withoutLaunchers(words []string) [][]string {
	out := [][]string{words}
	w := words
	if len(w) > 0 && w[0] == "numactl" {
		i := 1
		for i < len(w) && strings.HasPrefix(w[i], "-") {
			if numactlArg[w[i]] {
				i++
			}
			i++
		}
		w = w[min(i, len(w)):]
		out = append(out, w)
	}
	if len(w) > 0 && w[0] == "trtllm-llmapi-launch" {
		out = append(out, w[1:])
	}
	return out
}

func hasPrefix(words, prefix []string) bool {
	if len(prefix) == 0 || len(words) < len(prefix) {
		return false
	}
	for i := range prefix {
		if words[i] != prefix[i] {
			return false
		}
	}
	return true
}

func isWorker(role string) bool {
	switch srtlaunch.Role(role) {
	case srtlaunch.RolePrefill, srtlaunch.RoleDecode, srtlaunch.RoleAgg:
		return true
	}
	return false
}

// simEnv is what a simulator role of this bring-up adds to its
// environment: the spec's SWEEPFLOW_SIM_* settings (a chaos run's crash of
// one bring-up); a real engine's step gets none.
func simEnv(s step, spec cluster.ServeSpec) []kv {
	if s.SimRole == "" {
		return nil
	}
	var out []kv
	for _, k := range sortedKeys(spec.Env) {
		if strings.HasPrefix(k, "SWEEPFLOW_SIM_") {
			out = append(out, kv{k, spec.Env[k]})
		}
	}
	return out
}
