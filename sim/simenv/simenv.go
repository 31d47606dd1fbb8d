// Package simenv names the environment variables a simulated role reads
// (package sim/simrole) and the worker sets (package activities): the seeds
// of the simulated benchmark and the chaos faults. It is a leaf, so the
// worker's stages need not link the simulated roles to set them.
package simenv

// The seeds the perf activity gives the simulated benchmark.
const (
	EnvSeed      = "SWEEPFLOW_SIM_SEED"
	EnvTraceSeed = "SWEEPFLOW_SIM_TRACE_SEED"
	// EnvCutStreams (a Go duration) cuts the replay's response streams from
	// that long into the run on (loadgen.Options.CutStreamsAfter).
	EnvCutStreams = "SWEEPFLOW_SIM_CUT_STREAMS_AFTER"
)

// EnvCrash makes engine worker roles die at start-up with the log tail a
// real engine prints for that failure, hang, or serve with an engine fault
// (zero-usage) (fault injection on the
// emulated partition: the failure classes' evidence path end to end).
//
// Its value is a comma-separated list of entries, each KIND (every worker
// role), KIND@node=NAME (only the task on the node SLURMD_NODENAME names)
// or KIND@job=SUBSTRING (only in a holder job whose name, EnvJob or else
// SLURM_JOB_NAME, e.g. "sweepflow.<sweep>.<point>", contains SUBSTRING).
// KIND is one of simrole.Crashes. The first entry that applies wins; when
// none applies the role runs normally. A malformed value is a usage error
// even where no entry applies, so a typo is never silent.
const EnvCrash = "SWEEPFLOW_SIM_CRASH"
