package failure

// ErrorType is the type of the Temporal application error a stage fails
// with: retry policies name the non-retryable ones, and an error that
// carries no failure details (one from an older worker) gets its class from
// its type.
type ErrorType string

// The error types of the stages and the ledger.
const (
	ErrBadConfig        ErrorType = "BadConfig"
	ErrChecksumMismatch ErrorType = "ChecksumMismatch"
	ErrOutOfMemory      ErrorType = "OutOfMemory"
	// ErrRecipeMismatch: the point names a recipe this worker will not
	// launch, one outside the cluster profile's recipes root or whose bytes
	// are not the ones the point identity was computed from.
	ErrRecipeMismatch ErrorType = "RecipeMismatch"
	// ErrResultConflict: the ledger already holds different figures for the
	// same (sweep, identity, stage); writing them again cannot succeed.
	ErrResultConflict ErrorType = "ResultConflict"
	// ErrAllocationLost: the nodes went away; the point re-allocates.
	ErrAllocationLost ErrorType = "AllocationLost"
	// ErrAllocationReleased: the operator gate released the nodes while the
	// point waited; the point allocates again.
	ErrAllocationReleased ErrorType = "AllocationReleased"
	// ErrInjectedFault: --inject-fault made the stage fail on purpose.
	ErrInjectedFault ErrorType = "InjectedFault"
	// ErrInvalidResult: the perf validity gate refused the figures.
	ErrInvalidResult ErrorType = "InvalidResult"
	// ErrPowerInvalid: the power gate refused the window's power while the
	// worker requires power (--require-power); the perf figures stand, no
	// retry of the same window can fix it.
	ErrPowerInvalid ErrorType = "PowerInvalid"
	// ErrTransient: an error no evidence explains; retried.
	ErrTransient ErrorType = "Transient"
	// ErrCanceled is the type the ledger records for an attempt that ended
	// by cancellation (the workflow's, or a lost heartbeat).
	ErrCanceled ErrorType = "Canceled"
	// ErrPointAborted: an operator (or the operator timeout) aborted the
	// point.
	ErrPointAborted ErrorType = "PointAborted"
	// ErrPointUnrecorded: the point ran but the ledger could not record its
	// final status.
	ErrPointUnrecorded ErrorType = "PointUnrecorded"
)

// typeRule is what an error type implies.
type typeRule struct {
	t     ErrorType
	class Class
	// byType: the type decides the class even when the error's details name
	// another (the validity gate's and --inject-fault's own errors).
	byType bool
	// final: no retry can fix it; retry policies list it as non-retryable.
	final bool
}

// typeRules is the one table from error type to failure class. Types it
// does not name are transient.
var typeRules = []typeRule{
	{t: ErrBadConfig, class: ConfigError, final: true},
	{t: ErrChecksumMismatch, class: Checksum, final: true},
	{t: ErrOutOfMemory, class: HostOOM, final: true},
	{t: ErrRecipeMismatch, class: ConfigError, final: true},
	{t: ErrResultConflict, class: ConfigError, final: true},
	{t: ErrAllocationLost, class: JobLost},
	{t: ErrInjectedFault, class: Injected, byType: true},
	{t: ErrInvalidResult, class: InvalidResult, byType: true},
	{t: ErrPowerInvalid, class: InvalidResult, byType: true, final: true},
}

func ruleOf(t ErrorType) typeRule {
	for _, r := range typeRules {
		if r.t == t {
			return r
		}
	}
	return typeRule{t: t, class: Transient}
}

// Class is the failure class an error of type t implies.
func (t ErrorType) Class() Class { return ruleOf(t).class }

// ByType reports whether t decides its error's class even when the error's
// details name another.
func (t ErrorType) ByType() bool { return ruleOf(t).byType }

// Final reports whether no retry can fix an error of type t.
func (t ErrorType) Final() bool { return ruleOf(t).final }

// NonRetryable lists the error types no retry can fix, in table order, for
// a retry policy's NonRetryableErrorTypes.
func NonRetryable() []string {
	var out []string
	for _, r := range typeRules {
		if r.final {
			out = append(out, string(r.t))
		}
	}
	return out
}
