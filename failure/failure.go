// Package failure names why a stage attempt failed: one class from evidence
// (a Slurm job state, a health phase, a signature in a role's log tail, the
// validity gate, a heartbeat timeout, a configuration error) and a short
// excerpt of that evidence. Backends attach a Failure to the errors they
// return (Wrap); activities carry it to the workflow as application error
// details; status, the ledger and the report show it.
package failure

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// Class is a failure class, the value of the FailureClass search attribute.
type Class string

// The built-in classes. Profiles may add their own names (ValidClass).
const (
	// Slurm job states of the holder job.
	NodeFail     Class = "node-fail"     // NODE_FAIL, BOOT_FAIL
	Preempted    Class = "preempted"     // PREEMPTED
	SlurmTimeout Class = "slurm-timeout" // TIMEOUT, DEADLINE: the time limit was too short
	HostOOM      Class = "host-oom"      // OUT_OF_MEMORY (the cgroup, not the GPU)
	Cancelled    Class = "cancelled"     // CANCELLED by someone else (an external scancel)
	JobLost      Class = "job-lost"      // requeued, failed or vanished holder job
	// HealthBudget: the recipe's health_check budget ran out; the excerpt
	// says how far the deployment got ("3/4 workers registered").
	HealthBudget Class = "health-budget"
	// Engine crashes, from a signature in the role's log tail.
	CUDAOOM     Class = "cuda-oom"
	NCCL        Class = "nccl"
	NVLink      Class = "nvlink"
	GPUXid      Class = "gpu-xid"
	RefusedFlag Class = "refused-flag"
	PythonError Class = "python-error" // a traceback's last line
	EngineExit  Class = "engine-exit"  // a role exited and its log names no signature
	// InvalidResult: the perf validity gate refused the figures.
	InvalidResult Class = "invalid-result"
	// LostWorker: no heartbeat within the heartbeat timeout (a dead worker,
	// a cut network, a restarted server).
	LostWorker Class = "lost-worker"
	// OperatorCancel: the workflow cancelled the attempt (an operator
	// cancelled the sweep or the point).
	OperatorCancel Class = "operator-cancel"
	// StageTimeout: the stage's start-to-close timeout ran out while its
	// worker was alive.
	StageTimeout Class = "stage-timeout"
	// ConfigError: no retry can fix it (bad recipe, missing checkpoint,
	// queue wait exceeded, recipe bytes changed).
	ConfigError Class = "config-error"
	Checksum    Class = "checksum"
	Injected    Class = "injected" // --inject-fault
	// Transient: an error no evidence explains (a refused connection, a
	// failed poll).
	Transient Class = "transient"
)

// Failure is a class with its evidence.
type Failure struct {
	Class   Class  `json:"class"`
	Excerpt string `json:"excerpt,omitempty"`
	// Nodes are the nodes the evidence names (a NODE_FAIL's down node, the
	// host on an Xid or NCCL line); package nodehealth counts them.
	Nodes []string `json:"nodes,omitempty"`
}

// MaxExcerpt bounds an excerpt: it goes into search-attribute-adjacent
// status lines and ledger rows, not whole logs.
const MaxExcerpt = 240

// Clip trims s to one line of at most MaxExcerpt bytes.
func Clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > MaxExcerpt {
		cut := MaxExcerpt - 3
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Error is an error with its failure class; it unwraps to the error it
// carries, so the backend's sentinel (cluster.ErrAllocationLost, ...) and
// its retry decision stay as they were.
type Error struct {
	Failure
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Wrap attaches a class and excerpt to err (nil stays nil). An error that
// already has a class keeps it: the innermost evidence wins.
func Wrap(err error, c Class, excerpt string) error {
	if err == nil {
		return nil
	}
	if _, ok := Of(err); ok {
		return err
	}
	return &Error{Failure: Failure{Class: c, Excerpt: Clip(excerpt)}, Err: err}
}

// WithNodes records on err's failure the nodes its evidence names (err
// unchanged when it has no failure or nodes is empty).
func WithNodes(err error, nodes ...string) error {
	var fe *Error
	if len(nodes) > 0 && errors.As(err, &fe) {
		fe.Nodes = append([]string(nil), nodes...)
	}
	return err
}

// Amend adds more evidence to the excerpt of err's failure ("; more").
func Amend(err error, more string) error {
	var fe *Error
	if more != "" && errors.As(err, &fe) {
		fe.Excerpt = Clip(fe.Excerpt + "; " + more)
	}
	return err
}

// Hardware reports whether a class points at a node's hardware (a node
// failure, a GPU Xid, NCCL or NVLink errors): the classes that count
// against the node the evidence names.
func Hardware(c Class) bool {
	switch c {
	case NodeFail, GPUXid, NCCL, NVLink:
		return true
	}
	return false
}

// Of returns the failure attached to err, if any.
func Of(err error) (Failure, bool) {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Failure, true
	}
	return Failure{}, false
}

var classRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// ValidClass reports whether s can name a class: lower-case letters, digits
// and '-', at most 40 bytes (it is a search attribute keyword).
func ValidClass(s string) bool { return classRe.MatchString(s) }

// Attempt is one failed attempt of a stage as the point workflow saw it:
// the class, its evidence and when the attempt ended. Stage runs list
// them; the ledger keeps one row each.
type Attempt struct {
	Failure
	At time.Time `json:"at"`
}
