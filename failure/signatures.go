package failure

import (
	"fmt"
	"regexp"
	"strings"
)

// Signature recognises a class from one line of a role's log.
type Signature struct {
	Class   Class
	Pattern *regexp.Regexp
	// Source says where the signature comes from ("built-in" or the
	// profile's file:line), for `starter check` and error messages.
	Source string
}

// Table is an ordered list of signatures: the first one with a matching
// line names the class. Profile signatures come before the built-ins.
type Table []Signature

// TailLines is how much of a log a table reads: the end, where a crash
// writes its last words.
const TailLines = 200

func sig(c Class, pattern string) Signature {
	return Signature{Class: c, Pattern: regexp.MustCompile(pattern), Source: "built-in"}
}

// builtin is the one table of engine-crash signatures. Order matters: a
// CUDA OOM is also a Python exception, and an NCCL warning may follow an Xid
// or an NVLink fault that caused it, so the hardware's own words come first.
var builtin = Table{
	// The kernel driver's report (dmesg, or forwarded into the job log):
	// "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus."
	sig(GPUXid, `NVRM: Xid\b|\bXid:? \d+`),
	sig(GPUXid, `GPU has fallen off the bus`), // the driver's line when it printed no Xid
	sig(NVLink, `(?i)nvlink.*\b(?:error|fault|fatal|down|inactive|uncorrectable)\b|cudaErrorNvlinkUncorrectable`),
	sig(CUDAOOM, `CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED`),
	// NCCL INFO lines are printed by every healthy run: only warnings,
	// errors and the watchdog's timeouts count.
	sig(NCCL, `NCCL WARN|NCCL error|nccl(?:System|Internal|Remote|InvalidUsage|UnhandledCuda)Error|ProcessGroupNCCL.*(?:[Tt]imeout|[Ee]rror)|Watchdog caught collective operation timeout`),
	// argparse refusing the engine's flags: "PROG: error: MESSAGE" after
	// its usage line ("python3 -m sglang.launch_server: error:
	// unrecognized arguments: --foo").
	sig(RefusedFlag, `^[\w./ -]+: error: |\berror: (?:unrecognized arguments|argument -|the following arguments are required|invalid choice)`),
	// A Python traceback's last line: the exception and its message.
	sig(PythonError, `^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)(?::\s.*)?$`),
}

// Builtin returns the built-in signatures (a copy).
func Builtin() Table { return append(Table(nil), builtin...) }

// With returns the table with extra signatures ahead of t's.
func (t Table) With(extra ...Signature) Table {
	return append(append(Table(nil), extra...), t...)
}

// Match names the class of a log: for each signature in order, the last
// line of the log's tail it matches; the first signature that matches wins
// and its line is the excerpt.
func (t Table) Match(log string) (Failure, bool) {
	lines := tail(log, TailLines)
	for _, s := range t {
		for i := len(lines) - 1; i >= 0; i-- {
			if s.Pattern.MatchString(lines[i]) {
				return Failure{Class: s.Class, Excerpt: Clip(lines[i])}, true
			}
		}
	}
	return Failure{}, false
}

func tail(log string, n int) []string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	return lines
}

// NewSignature checks a profile's signature: a class name and a regular
// expression (Go RE2 syntax, matched against one log line).
func NewSignature(class, pattern, source string) (Signature, error) {
	if !ValidClass(class) {
		return Signature{}, fmt.Errorf("class %q: want lower-case letters, digits and '-' (e.g. %s)", class, CUDAOOM)
	}
	if strings.TrimSpace(pattern) == "" {
		return Signature{}, fmt.Errorf("pattern must not be empty")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Signature{}, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	if re.MatchString("") {
		return Signature{}, fmt.Errorf("pattern %q matches an empty line, so every log", pattern)
	}
	return Signature{Class: Class(class), Pattern: re, Source: source}, nil
}
