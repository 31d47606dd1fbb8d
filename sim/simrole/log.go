package simrole

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// LogPrefix starts the two lines every role prints first (contract §4).
const LogPrefix = "sweepflow-sim-role: "

// Header writes the two contract lines: the rendered argv as received and
// the process environment without SWEEPFLOW_SIM_* and SLURM_* (environ is
// os.Environ()'s KEY=VALUE form).
func Header(w io.Writer, argv []string, environ []string) error {
	if argv == nil {
		argv = []string{}
	}
	a, err := json.Marshal(argv)
	if err != nil {
		return err
	}
	e, err := json.Marshal(ReportedEnv(environ))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%sargv=%s\n%senv=%s\n", LogPrefix, a, LogPrefix, e)
	return err
}

// ReportedEnv is environ as a map, minus the emulation's own variables
// (SWEEPFLOW_SIM_*) and Slurm's (SLURM_*), which are never compared.
func ReportedEnv(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.HasPrefix(k, "SWEEPFLOW_SIM_") || strings.HasPrefix(k, "SLURM_") {
			continue
		}
		m[k] = v
	}
	return m
}

// ParseLog reads a role's log and returns the argv and environment its two
// header lines report. Other lines are ignored; the first header line of
// each kind wins.
func ParseLog(r io.Reader) (argv []string, env map[string]string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	line := 0
	var haveArgv, haveEnv bool
	// A multi-node step's tasks share one output file, and a task's write can
	// land over another's, so a damaged line is skipped if an intact one of
	// the same kind follows; the first damage is the error otherwise.
	var damaged error
	for sc.Scan() {
		line++
		rest, ok := strings.CutPrefix(sc.Text(), LogPrefix)
		if !ok {
			continue
		}
		switch {
		case !haveArgv && strings.HasPrefix(rest, "argv="):
			if err := json.Unmarshal([]byte(rest[len("argv="):]), &argv); err != nil {
				argv = nil
				damaged = cmp.Or(damaged, fmt.Errorf("simrole: log line %d: argv: %v", line, err))
				continue
			}
			haveArgv = true
		case !haveEnv && strings.HasPrefix(rest, "env="):
			if err := json.Unmarshal([]byte(rest[len("env="):]), &env); err != nil {
				env = nil
				damaged = cmp.Or(damaged, fmt.Errorf("simrole: log line %d: env: %v", line, err))
				continue
			}
			haveEnv = true
		}
		if haveArgv && haveEnv {
			return argv, env, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("simrole: reading log: %w", err)
	}
	if damaged != nil {
		return nil, nil, damaged
	}
	switch {
	case !haveArgv && !haveEnv:
		return nil, nil, fmt.Errorf("simrole: no %q lines in the log (%d lines): not a simulator role's log, or it died before starting", LogPrefix, line)
	case !haveArgv:
		return nil, nil, fmt.Errorf("simrole: the log has no %sargv= line", LogPrefix)
	}
	return nil, nil, fmt.Errorf("simrole: the log has no %senv= line", LogPrefix)
}
