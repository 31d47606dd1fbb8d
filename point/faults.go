package point

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FaultStages are the stages a fault can be injected into (all but teardown,
// which must always run).
var FaultStages = []string{StageAllocate, StageCheckpoint, StageBringUp, StageWarmup, StagePerf, StageEval, StageUpload}

// faultForever is the Times of a fault given without one: the stage fails
// until an operator intervenes.
const faultForever = 1000000

// ParseFaults reads --inject-fault specs POINT:STAGE[:TIMES] against the
// names of a plan's points and returns the faults per point name. POINT is a
// point name, or a substring of exactly one. TIMES defaults to "until an
// operator intervenes".
func ParseFaults(specs, points []string) (map[string][]Fault, error) {
	out := map[string][]Fault{}
	for _, s := range specs {
		name, f, err := parseFault(s)
		if err != nil {
			return nil, err
		}
		match, err := matchPoint(name, points)
		if err != nil {
			return nil, fmt.Errorf("--inject-fault %q: %w", s, err)
		}
		out[match] = append(out[match], f)
	}
	return out, nil
}

// parseFault splits one POINT:STAGE[:TIMES] spec.
func parseFault(s string) (string, Fault, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return "", Fault{}, fmt.Errorf("--inject-fault %q: want POINT:STAGE[:TIMES]", s)
	}
	f := Fault{Stage: parts[1], Times: faultForever}
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n <= 0 {
			return "", Fault{}, fmt.Errorf("--inject-fault %q: TIMES must be a positive integer", s)
		}
		f.Times = n
	}
	if !slices.Contains(FaultStages, f.Stage) {
		return "", Fault{}, fmt.Errorf("--inject-fault %q: unknown stage %q (want one of %s)", s, f.Stage, strings.Join(FaultStages, ", "))
	}
	return parts[0], f, nil
}

// matchPoint resolves a POINT: an exact name wins, else it must be a
// substring of exactly one name.
func matchPoint(point string, names []string) (string, error) {
	var match []string
	for _, n := range names {
		if n == point {
			return n, nil
		}
		if strings.Contains(n, point) {
			match = append(match, n)
		}
	}
	if len(match) != 1 {
		return "", fmt.Errorf("point %q matches %d points", point, len(match))
	}
	return match[0], nil
}
