package forecast

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/point"
)

// Assumptions are the stage times no file states; each is a flag of
// `starter forecast` with its default shown.
type Assumptions struct {
	Warmup time.Duration `json:"warmup"` // per point
	Eval   time.Duration `json:"eval"`   // one GSM8K run
	// Perf is the perf time of a point whose matrix row has no duration
	// (fixed-seq-len rows run a prompt count, not a time).
	Perf time.Duration `json:"perf"`
	// QueueWait is the wait for an allocation before its nodes are held:
	// it delays the sweep but costs no node-hours.
	QueueWait  time.Duration `json:"queue_wait"`
	Checkpoint time.Duration `json:"checkpoint"` // staging before bring-up
	Teardown   time.Duration `json:"teardown"`
}

// DefaultAssumptions are those of `starter bench nodeminutes`: warmup 5m
// and eval 10m, no queue wait, staging or teardown time.
func DefaultAssumptions() Assumptions {
	return Assumptions{Warmup: 5 * time.Minute, Eval: 10 * time.Minute, Perf: 10 * time.Minute}
}

// Validate refuses negative times.
func (a Assumptions) Validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"warmup", a.Warmup}, {"eval", a.Eval}, {"perf", a.Perf}, {"queue-wait", a.QueueWait}, {"checkpoint", a.Checkpoint}, {"teardown", a.Teardown}} {
		if d.v < 0 {
			return fmt.Errorf("--%s must not be negative, got %s", d.flag, d.v)
		}
	}
	return nil
}

// Profile is what a forecast needs of a cluster profile.
type Profile struct {
	Name        string        `json:"name"`
	Nodes       int           `json:"nodes"`
	GPUsPerNode int           `json:"gpus_per_node"`
	BringUp     time.Duration `json:"bring_up"` // bring-up-time; 0: not set
	Path        string        `json:"-"`        // for messages
}

// Times are the stage times of one deployment (perf comes from each
// point's row) and, by time name, where each came from.
type Times struct {
	QueueWait, Checkpoint, BringUp, Warmup, EvalRestart, Eval, Teardown time.Duration
	From                                                                map[string]string
}

// Time names in Times.From and Sources.
const (
	TimeQueueWait   = "queue wait"
	TimeCheckpoint  = "checkpoint"
	TimeBringUp     = "bring-up"
	TimeWarmup      = "warmup"
	TimePerf        = "perf"
	TimeEvalRestart = "eval restart"
	TimeEval        = "eval"
	TimeTeardown    = "teardown"
)

var timeNames = []string{TimeQueueWait, TimeCheckpoint, TimeBringUp, TimeWarmup, TimePerf, TimeEvalRestart, TimeEval, TimeTeardown}

func (t *Times) set(name string, v time.Duration, from string) {
	switch name {
	case TimeQueueWait:
		t.QueueWait = v
	case TimeCheckpoint:
		t.Checkpoint = v
	case TimeBringUp:
		t.BringUp = v
	case TimeWarmup:
		t.Warmup = v
	case TimeEvalRestart:
		t.EvalRestart = v
	case TimeEval:
		t.Eval = v
	case TimeTeardown:
		t.Teardown = v
	}
	t.From[name] = from
}

// Measured are a deployment's stage times from the ledger: by time name,
// the median of the runs and how many runs it comes from.
type Measured struct {
	Median map[string]time.Duration `json:"median"`
	Runs   map[string]int           `json:"runs"`
}

// Inputs are the durations a forecast draws on besides the points.
type Inputs struct {
	Profile     Profile
	Assumptions Assumptions
	// HealthBound is, by deployment key, the recipe's health_check budget:
	// a bring-up cannot take longer.
	HealthBound map[string]time.Duration
	// Measured is, by deployment key, what the ledger measured; its
	// figures replace the assumptions and the profile's bring-up-time.
	Measured map[string]Measured
}

// StageClock is the forecast's Clock: stage times by deployment.
type StageClock struct {
	times map[string]*Times
	perf  time.Duration
}

// NewStageClock resolves the stage times of every deployment of pts.
func NewStageClock(pts []point.Spec, in Inputs) (*StageClock, error) {
	c := &StageClock{times: map[string]*Times{}, perf: in.Assumptions.Perf}
	a := in.Assumptions
	for _, p := range pts {
		key := p.DeploymentKey()
		if c.times[key] != nil {
			continue
		}
		t := &Times{From: map[string]string{}}
		t.set(TimeQueueWait, a.QueueWait, "assumed (--queue-wait)")
		t.set(TimeCheckpoint, a.Checkpoint, "assumed (--checkpoint)")
		t.set(TimeWarmup, a.Warmup, "assumed (--warmup)")
		t.set(TimeEval, a.Eval, "assumed (--eval)")
		t.set(TimeTeardown, a.Teardown, "assumed (--teardown)")
		bound := in.HealthBound[key]
		switch {
		case in.Profile.BringUp > 0 && bound > 0 && bound < in.Profile.BringUp:
			t.set(TimeBringUp, bound, "recipe health_check budget (below the profile's bring-up-time)")
		case in.Profile.BringUp > 0:
			t.set(TimeBringUp, in.Profile.BringUp, "profile bring-up-time")
		case bound > 0:
			t.set(TimeBringUp, bound, "recipe health_check budget (upper bound: the profile has no bring-up-time)")
		default:
			return nil, fmt.Errorf("point %s: no bring-up time: set bring-up-time in cluster profile %s, or health_check in its recipe", p.PointID, profileName(in.Profile))
		}
		t.set(TimeEvalRestart, t.BringUp, t.From[TimeBringUp])
		if m, ok := in.Measured[key]; ok {
			for _, name := range timeNames {
				if v, ok := m.Median[name]; ok && name != TimePerf {
					t.set(name, v, fmt.Sprintf("ledger (median of %d run%s)", m.Runs[name], plural(m.Runs[name])))
				}
			}
			if _, ok := m.Median[TimeEvalRestart]; !ok {
				if _, ok := m.Median[TimeBringUp]; ok {
					t.set(TimeEvalRestart, t.BringUp, "ledger bring-up (no eval restart measured)")
				}
			}
		}
		c.times[key] = t
	}
	return c, nil
}

func profileName(p Profile) string {
	if p.Path != "" {
		return p.Path
	}
	return p.Name
}

// Duration is a stage's forecast time.
func (c *StageClock) Duration(call Call) time.Duration {
	t := c.times[call.Point.DeploymentKey()]
	if t == nil {
		return 0
	}
	switch call.Kind {
	case KindQueue:
		return t.QueueWait
	case KindBringUp:
		if call.Activity == "StageCheckpoint" {
			return t.Checkpoint
		}
		return t.BringUp
	case KindWarmup:
		return t.Warmup
	case KindPerf:
		return c.perfTime(call.Point)
	case KindEvalRestart:
		return t.EvalRestart
	case KindEval:
		return t.Eval
	case KindTeardown:
		return t.Teardown
	}
	return 0
}

func (c *StageClock) perfTime(p point.Spec) time.Duration {
	if p.DurationSec > 0 {
		return time.Duration(p.DurationSec) * time.Second
	}
	return c.perf
}

// Source is one figure's origin and how many stage runs of the simulated
// sweep took it.
type Source struct {
	Time    string  `json:"time"`
	Minutes float64 `json:"minutes"`
	From    string  `json:"from"`
	Runs    int     `json:"runs"`
}

// describe names a stage call's time and where its value came from.
func (c *StageClock) describe(call Call) (name, from string) {
	t := c.times[call.Point.DeploymentKey()]
	if t == nil {
		return "", ""
	}
	switch call.Kind {
	case KindQueue:
		name = TimeQueueWait
	case KindBringUp:
		name = TimeBringUp
		if call.Activity == "StageCheckpoint" {
			name = TimeCheckpoint
		}
	case KindWarmup:
		name = TimeWarmup
	case KindPerf:
		if call.Point.DurationSec > 0 {
			return TimePerf, "row duration"
		}
		return TimePerf, "assumed (--perf; the row has no duration)"
	case KindEvalRestart:
		name = TimeEvalRestart
	case KindEval:
		name = TimeEval
	case KindTeardown:
		name = TimeTeardown
	default:
		return "", ""
	}
	return name, t.From[name]
}

// sources lists, per time name in stage order, each distinct (value,
// origin) the timeline's stage runs took, with how many took it.
func (c *StageClock) sources(tl *Timeline) []Source {
	type k struct {
		name, from string
		v          time.Duration
	}
	count := map[k]int{}
	for _, e := range tl.Events {
		name, from := c.describe(e.Call)
		if name != "" {
			// To the second, as the simulation counted it.
			count[k{name, from, c.Duration(e.Call).Round(Grid)}]++
		}
	}
	var out []Source
	for _, name := range timeNames {
		var ks []k
		for x := range count {
			if x.name == name {
				ks = append(ks, x)
			}
		}
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].v != ks[j].v {
				return ks[i].v < ks[j].v
			}
			return ks[i].from < ks[j].from
		})
		for _, x := range ks {
			out = append(out, Source{Time: x.name, Minutes: x.v.Minutes(), From: x.from, Runs: count[x]})
		}
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fmtDur prints a duration as hours, minutes and seconds, leaving out
// zero parts ("7h55m", "20m", "1h", "0s").
func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteString("-")
		d = -d
	}
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
