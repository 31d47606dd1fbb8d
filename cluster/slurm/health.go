package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/failure"
)

// phaseMarkers are log lines that say how far a server got, checked in
// order; the furthest one seen is the phase reported while waiting.
var phaseMarkers = []struct {
	re    *regexp.Regexp
	phase string
}{
	{regexp.MustCompile(`(?i)load(ing)? (model )?weights`), "loading weights"},
	{regexp.MustCompile(`(?i)captur(e|ing) cuda graph`), "capturing graphs"},
	{regexp.MustCompile(`(?i)listening on`), "listening"},
	{regexp.MustCompile(`(?i)server is fired up|application startup complete`), "ready"},
}

// oomRe recognises an out-of-memory death in a step's log.
var oomRe = regexp.MustCompile(`(?i)out of memory|OutOfMemoryError|oom-kill|OUT_OF_MEMORY`)

// refusedRe recognises an engine refusing its arguments (argparse's
// "error: ..." after its usage line, sglang's ValueError on bad flags): no
// retry on fresh nodes can fix that.
var refusedRe = regexp.MustCompile(`(?m)^(usage: .*|.*: error: .*|ValueError: .*|AssertionError: .*)$`)

// stepDied explains a step that ended: the job's own state first, then an
// OOM or a refused configuration in its log, else a lost server, with the
// tail of the log.
func (b *Backend) stepDied(ctx context.Context, alloc cluster.Allocation, name, logPath string) error {
	if err := b.Check(ctx, alloc); err != nil {
		return err
	}
	data, _ := os.ReadFile(logPath)
	role := strings.TrimPrefix(strings.TrimPrefix(name, stepPrefix), benchPrefix)
	last := tail(logPath, 5)
	if last == "" {
		// Nothing from the process: srun's own output says why.
		srunLog := filepath.Join(filepath.Dir(logPath), "srun-"+role+".log")
		data, _ = os.ReadFile(srunLog)
		if last = tail(srunLog, 5); last == "" {
			last = "(empty log)"
		} else {
			logPath = srunLog
		}
	}
	// The retry decision stays with the coarse patterns; the class and its
	// evidence come from the signature table.
	f, ok := b.cfg.Signatures.Match(string(data))
	if !ok {
		f = failure.Failure{Class: failure.EngineExit, Excerpt: role + ": " + last}
	}
	var err error
	switch {
	case oomRe.Match(data):
		err = fmt.Errorf("%w: %s of slurm job %s ran out of memory (%s): %s", cluster.ErrOOM, role, alloc.JobID, logPath, last)
	case refusedRe.Match(data):
		err = fmt.Errorf("%w: %s of slurm job %s refused its configuration (%s): %s", cluster.ErrBadConfig, role, alloc.JobID, logPath, last)
	default:
		err = fmt.Errorf("%w: %s of slurm job %s exited (%s): %s", cluster.ErrAllocationLost, role, alloc.JobID, logPath, last)
	}
	return failure.WithNodes(failure.Wrap(err, f.Class, f.Excerpt), namedNodes(f.Excerpt, alloc.Nodes)...)
}

// namedNodes are the allocation's nodes an evidence line names as a whole
// word: NCCL prefixes its lines with the host, syslog forwards a driver's
// Xid with it.
func namedNodes(line string, nodes []string) []string {
	var out []string
	for _, n := range nodes {
		for i := 0; n != ""; {
			j := strings.Index(line[i:], n)
			if j < 0 {
				break
			}
			j += i
			end := j + len(n)
			if (j == 0 || !nameByte(line[j-1])) && (end == len(line) || !nameByte(line[end])) {
				out = append(out, n)
				break
			}
			i = j + 1
		}
	}
	return out
}

func nameByte(c byte) bool {
	return c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// errNotReady: the deployment is still coming up (the activity keeps
// polling and heartbeating the phase).
var errNotReady = errors.New("not ready")

// Health checks the job, then every step of the bring-up, then the public
// frontend's /health as srt-slurm's wait_for_model reads it: ready once the
// expected prefill and decode workers have registered. Past the recipe's
// health_check budget it fails with the tail of a worker that has not
// registered.
func (b *Backend) Health(ctx context.Context, alloc cluster.Allocation, srv cluster.Server) (string, error) {
	if err := b.Check(ctx, alloc); err != nil {
		return "job lost", err
	}
	dir := filepath.Join(alloc.WorkDir, srv.Handle)
	st, err := readState(dir)
	if err != nil {
		return "starting", fmt.Errorf("%w: bring-up state: %v", cluster.ErrAllocationLost, err)
	}
	running, err := b.steps(ctx, alloc, stepPrefix)
	if err != nil {
		return "starting", err
	}
	have := map[string]bool{}
	for _, n := range running {
		have[n] = true
	}
	for _, s := range st.Steps {
		if !have[s.Name] {
			return "exited", b.stepDied(ctx, alloc, s.Name, s.Output)
		}
	}
	phase := logPhase(st.Steps)
	gotP, gotD := 0, 0
	herr := func() error {
		var err error
		if gotP, gotD, err = frontendWorkers(ctx, srv.URL, st.Frontend); err != nil {
			return err
		}
		if gotP < st.Prefill || gotD < st.Decode {
			return errNotReady
		}
		return nil
	}()
	line := fmt.Sprintf("%d/%d workers registered (prefill %d/%d, decode %d/%d), phase %s",
		min(gotP, st.Prefill)+min(gotD, st.Decode), st.Prefill+st.Decode, gotP, st.Prefill, gotD, st.Decode, phase)
	if herr == nil {
		return "ready: " + line, nil
	}
	if !errors.Is(herr, errNotReady) {
		line = "frontend not answering (" + clip(herr.Error()) + "); " + line
	}
	if budget := time.Duration(st.BudgetSec * float64(time.Second)); budget > 0 && time.Since(st.Started) > budget {
		failing := st.Steps[0]
		for _, s := range st.Steps {
			if (s.Role == string(srtlaunch.RolePrefill) && gotP < st.Prefill) ||
				((s.Role == string(srtlaunch.RoleDecode) || s.Role == string(srtlaunch.RoleAgg)) && gotD < st.Decode) {
				failing = s
				break
			}
		}
		// Every step still runs (a dead one is stepDied's): the budget is
		// the evidence, with how far the deployment got.
		return line, failure.Wrap(fmt.Errorf("%w: slurm job %s: not healthy within the recipe's health_check budget %s: %s; %s: %s",
			cluster.ErrAllocationLost, alloc.JobID, budget, line, filepath.Base(failing.Output), tail(failing.Output, 5)),
			failure.HealthBudget, fmt.Sprintf("budget %s ran out: %s", budget, line))
	}
	return line, fmt.Errorf("%s", line)
}

// logPhase is the furthest marker any step's log shows.
func logPhase(steps []step) string {
	best := -1
	for _, s := range steps {
		data, err := os.ReadFile(s.Output)
		if err != nil {
			continue
		}
		for i, m := range phaseMarkers {
			if i > best && m.re.Match(data) {
				best = i
			}
		}
	}
	if best < 0 {
		return "starting"
	}
	return phaseMarkers[best].phase
}

// healthBudget is the recipe's health-check budget, or the bring-up's
// shorter one (cluster.ServeSpec.HealthBudget), in seconds.
func healthBudget(recipe time.Duration, spec cluster.ServeSpec) float64 {
	if spec.HealthBudget > 0 && (recipe <= 0 || spec.HealthBudget < recipe) {
		return spec.HealthBudget.Seconds()
	}
	return recipe.Seconds()
}
