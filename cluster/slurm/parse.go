package slurm

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/hostlist"
)

// JobState is a Slurm job state as squeue and sacct print it (long form).
type JobState string

// The states sweepflow tells apart. squeue prints the long names; sacct may
// append detail ("CANCELLED by 0"), which ParseState strips.
const (
	StatePending     JobState = "PENDING"
	StateConfiguring JobState = "CONFIGURING"
	StateRunning     JobState = "RUNNING"
	StateCompleting  JobState = "COMPLETING"
	StateCompleted   JobState = "COMPLETED"
	StateSuspended   JobState = "SUSPENDED"
	StateRequeued    JobState = "REQUEUED"
	StateFailed      JobState = "FAILED"
	StateCancelled   JobState = "CANCELLED"
	StateNodeFail    JobState = "NODE_FAIL"
	StateTimeout     JobState = "TIMEOUT"
	StateOOM         JobState = "OUT_OF_MEMORY"
	StatePreempted   JobState = "PREEMPTED"
	StateBootFail    JobState = "BOOT_FAIL"
	StateDeadline    JobState = "DEADLINE"
)

// shortStates maps squeue's compact codes (%t) to long names.
var shortStates = map[string]JobState{
	"PD": StatePending, "CF": StateConfiguring, "R": StateRunning, "CG": StateCompleting,
	"CD": StateCompleted, "S": StateSuspended, "RQ": StateRequeued, "F": StateFailed,
	"CA": StateCancelled, "NF": StateNodeFail, "TO": StateTimeout, "OOM": StateOOM,
	"PR": StatePreempted, "BF": StateBootFail, "DL": StateDeadline,
}

// ParseState normalises a state printed by squeue (%T or %t), sacct or
// scontrol ("CANCELLED by 0", "CANCELLED+", "NF").
func ParseState(s string) (JobState, error) {
	s = strings.TrimSpace(s)
	if f := strings.Fields(s); len(f) > 0 {
		s = f[0]
	}
	s = strings.TrimRight(s, "+*")
	if s == "" {
		return "", fmt.Errorf("slurm: empty job state")
	}
	if st, ok := shortStates[s]; ok {
		return st, nil
	}
	st := JobState(strings.ToUpper(s))
	switch st {
	case StatePending, StateConfiguring, StateRunning, StateCompleting, StateCompleted, StateSuspended,
		StateRequeued, StateFailed, StateCancelled, StateNodeFail, StateTimeout, StateOOM, StatePreempted,
		StateBootFail, StateDeadline, "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "REVOKED",
		"SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED":
		return st, nil
	}
	return "", fmt.Errorf("slurm: unknown job state %q", s)
}

// Active reports whether a job in this state holds or waits for nodes.
func (s JobState) Active() bool {
	switch s {
	case StatePending, StateConfiguring, StateRunning, StateCompleting, StateSuspended, StateRequeued, "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD":
		return true
	}
	return false
}

// Holding reports whether the job has its nodes now.
func (s JobState) Holding() bool { return s == StateRunning || s == StateConfiguring }

// StateError classifies a holder job that is no longer running. nil means
// the job is alive (running or still starting). Node failure, preemption,
// external cancel and a failed holder are cluster.ErrAllocationLost: a
// fresh allocation may succeed. OOM is cluster.ErrOOM and a job that hit its
// time limit is cluster.ErrBadConfig: the same request would end the same way.
func StateError(jobID string, st JobState, reason string) error {
	detail := fmt.Sprintf("slurm job %s is %s", jobID, st)
	if reason != "" && reason != "None" {
		detail += " (" + reason + ")"
	}
	switch st {
	case StateRunning, StateConfiguring, StateSuspended, "RESIZING", "SIGNALING":
		return nil
	case StateOOM:
		return failure.Wrap(fmt.Errorf("%w: %s", cluster.ErrOOM, detail), failure.HostOOM, detail)
	case StateTimeout, StateDeadline:
		return failure.Wrap(fmt.Errorf("%w: %s: the time limit is too short for this point (raise slurm.time_limit in the recipe or default-time-limit in the cluster profile)", cluster.ErrBadConfig, detail),
			failure.SlurmTimeout, detail)
	case StateNodeFail, StateBootFail:
		return failure.Wrap(fmt.Errorf("%w: %s", cluster.ErrAllocationLost, detail), failure.NodeFail, detail)
	case StatePreempted:
		return failure.Wrap(fmt.Errorf("%w: %s", cluster.ErrAllocationLost, detail), failure.Preempted, detail)
	case StateCancelled:
		return failure.Wrap(fmt.Errorf("%w: %s: cancelled outside sweepflow", cluster.ErrAllocationLost, detail), failure.Cancelled, detail)
	case StatePending, StateRequeued, "REQUEUE_HOLD":
		return failure.Wrap(fmt.Errorf("%w: %s: the job was requeued and lost its nodes", cluster.ErrAllocationLost, detail), failure.JobLost, detail)
	}
	// FAILED, COMPLETED (the holder exited), COMPLETING and anything else:
	// the nodes are gone or going. Slurm says NodeDown while it is still
	// ending a job whose node failed (COMPLETING before NODE_FAIL): that is
	// a node failure.
	if reason == "NodeDown" {
		return failure.Wrap(fmt.Errorf("%w: %s", cluster.ErrAllocationLost, detail), failure.NodeFail, detail)
	}
	return failure.Wrap(fmt.Errorf("%w: %s", cluster.ErrAllocationLost, detail), failure.JobLost, detail)
}

var sbatchRe = regexp.MustCompile(`^\s*(?:Submitted batch job\s+)?(\d+)(?:;(\S+))?\s*$`)

// ParseSbatch reads the job id from sbatch's output, either the default
// "Submitted batch job N" or --parsable's "N" / "N;cluster". Warnings on
// other lines are ignored.
func ParseSbatch(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		if m := sbatchRe.FindStringSubmatch(line); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("slurm: no job id in sbatch output %q", clip(out))
}

// QueueEntry is one line of `squeue -o %i|%T|%r|%N|%j`.
type QueueEntry struct {
	JobID  string
	State  JobState
	Reason string
	Nodes  string // compressed hostlist, empty while pending
	Name   string
}

// sinfoFormat is what the backend asks sinfo -N for: node, long state and
// the reason (ParseSinfoNodes).
const sinfoFormat = "%N|%T|%E"

// NodeState is one node as sinfo -N lists it.
type NodeState struct {
	Name, State, Reason string
}

// Bad reports a node slurmctld took out of service: down (an admin or an
// unresponsive slurmd), drained or draining, or failing. Slurm appends
// flags such as "*" (not responding) or "+drain" to the long state.
func (n NodeState) Bad() bool {
	s := strings.ToLower(n.State)
	return strings.Contains(s, "down") || strings.Contains(s, "drain") || strings.Contains(s, "fail")
}

// ParseSinfoNodes reads sinfo -h -N -o sinfoFormat output; a node listed
// once per partition is kept once.
func ParseSinfoNodes(out string) []NodeState {
	var nodes []NodeState
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(l), "|", 3)
		if len(f) < 2 || f[0] == "" || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		n := NodeState{Name: f[0], State: f[1]}
		if len(f) == 3 && f[2] != "none" {
			n.Reason = f[2]
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// describeNodes is the evidence line of bad nodes: "node gb200-07 down
// (reason)".
func describeNodes(nodes []NodeState) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = "node " + n.Name + " " + n.State
		if n.Reason != "" {
			parts[i] += " (" + n.Reason + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// squeueFormat is what the backend asks squeue for; ParseSqueue reads it.
const squeueFormat = "%i|%T|%r|%N|%j"

// ParseSqueue reads squeue -h -o squeueFormat output.
func ParseSqueue(out string) ([]QueueEntry, error) {
	var entries []QueueEntry
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "|", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("slurm: squeue line %d: want 5 |-separated fields, got %q", i+1, line)
		}
		st, err := ParseState(f[1])
		if err != nil {
			return nil, fmt.Errorf("slurm: squeue line %d: %w", i+1, err)
		}
		e := QueueEntry{JobID: f[0], State: st, Reason: f[2], Nodes: f[3], Name: f[4]}
		if e.Nodes == "(null)" {
			e.Nodes = ""
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ParseSacct reads `sacct -n -P -X -o JobID,State,Reason,NodeList` output
// and returns the allocation line of jobID (steps such as "12.batch" are
// skipped).
func ParseSacct(jobID, out string) (QueueEntry, bool, error) {
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 2 {
			return QueueEntry{}, false, fmt.Errorf("slurm: sacct line %d: want |-separated fields, got %q", i+1, line)
		}
		if f[0] != jobID {
			continue
		}
		st, err := ParseState(f[1])
		if err != nil {
			return QueueEntry{}, false, fmt.Errorf("slurm: sacct line %d: %w", i+1, err)
		}
		e := QueueEntry{JobID: f[0], State: st}
		if len(f) > 2 {
			e.Reason = f[2]
		}
		if len(f) > 3 && f[3] != "None assigned" {
			e.Nodes = f[3]
		}
		return e, true, nil
	}
	return QueueEntry{}, false, nil
}

// ExpandHostlist expands squeue's node list; a job without nodes has none.
func ExpandHostlist(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	nodes, err := hostlist.Expand(s)
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return nodes, nil
}

// FormatTimeLimit renders a duration as sbatch --time (D-HH:MM:SS or
// HH:MM:SS), rounding up to whole minutes as Slurm does.
func FormatTimeLimit(d time.Duration) string {
	mins := int((d + time.Minute - 1) / time.Minute)
	if mins < 1 {
		mins = 1
	}
	days, h, m := mins/(24*60), (mins/60)%24, mins%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:00", days, h, m)
	}
	return fmt.Sprintf("%02d:%02d:00", h, m)
}

// JobName is the Slurm job name of a point: namespaced by sweep and point so
// `squeue --name` finds a retry's job and never another sweep's.
func JobName(prefix, sweepID, pointID string) string {
	clean := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			ok := c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			if !ok {
				b[i] = '_'
			}
		}
		return string(b)
	}
	return prefix + "." + clean(sweepID) + "." + clean(pointID)
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
