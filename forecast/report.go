package forecast

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Report is a forecast over one or more clusters: what each runs, and the
// keys no cluster serves.
type Report struct {
	Sweep       string      `json:"sweep"`
	Assumptions Assumptions `json:"-"`
	FromLedger  bool        `json:"from_ledger"`
	Clusters    []*Cluster  `json:"clusters"`
	// NotServed are the keys no given profile serves.
	NotServed []Finding `json:"not_served"`
	// Notes say what the forecast could not look at (a check rule that
	// did not run, ...).
	Notes []string `json:"notes,omitempty"`
}

// MarshalJSON writes the assumptions in minutes, as the sources do.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	a := r.Assumptions
	return json.Marshal(struct {
		*plain
		Assumptions map[string]float64 `json:"assumptions_minutes"`
	}{(*plain)(r), map[string]float64{"warmup": a.Warmup.Minutes(), "eval": a.Eval.Minutes(), "perf": a.Perf.Minutes(),
		"queue_wait": a.QueueWait.Minutes(), "checkpoint": a.Checkpoint.Minutes(), "teardown": a.Teardown.Minutes()}})
}

// stageNames are the stage kinds as the table shows them.
var stageNames = map[string]string{KindBringUp: "bring-up", KindWarmup: "warmup", KindPerf: "perf",
	KindEvalRestart: "eval restart", KindEval: "eval", KindTeardown: "teardown"}

// Write prints the report for people.
func (r *Report) Write(out io.Writer) error {
	a := r.Assumptions
	fmt.Fprintf(out, "forecast of sweep %s\n", r.Sweep)
	fmt.Fprintf(out, "assumed: --warmup %s per point, --eval %s per eval, --perf %s for rows without a duration, --queue-wait %s, --checkpoint %s, --teardown %s per allocation",
		fmtDur(a.Warmup), fmtDur(a.Eval), fmtDur(a.Perf), fmtDur(a.QueueWait), fmtDur(a.Checkpoint), fmtDur(a.Teardown))
	if r.FromLedger {
		fmt.Fprint(out, "; measured stage times from the ledger replace them where it has some")
	}
	fmt.Fprintln(out)
	var total, gpu float64
	for _, c := range r.Clusters {
		fmt.Fprintln(out)
		if err := c.write(out); err != nil {
			return err
		}
		total += c.NodeHours
		gpu += c.GPUHours
	}
	if len(r.Clusters) > 1 {
		fmt.Fprintf(out, "\nall clusters: %.1f node-hours, %.1f GPU-hours\n", total, gpu)
	}
	if len(r.NotServed) > 0 {
		fmt.Fprintf(out, "\nnot forecast, costs nothing: %d key%s no given profile serves\n", len(r.NotServed), plural(len(r.NotServed)))
		for _, f := range r.NotServed {
			fmt.Fprintf(out, "  %s: %s\n", f.Key, f.Reason)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	return nil
}

func (c *Cluster) write(out io.Writer) error {
	with := ""
	if c.Canary != nil && c.Canary.Headline {
		with = ", canaries first"
	}
	fmt.Fprintf(out, "cluster %s (%d nodes x %d GPUs%s): %d points, %d deployments, %d bring-ups, %d eval restarts\n",
		c.Name, c.Nodes, c.GPUsPerNode, with, c.Points, c.Deployments, c.BringUps, c.EvalRestarts)
	if c.Points > 0 {
		fmt.Fprintf(out, "  %-12s %11s %11s\n", "STAGE", "NODE-HOURS", "GPU-HOURS")
		for _, k := range Kinds {
			fmt.Fprintf(out, "  %-12s %11.1f %11.1f\n", stageNames[k], c.NodeHoursByStage[k], c.GPUHoursByStage[k])
		}
		fmt.Fprintf(out, "  %-12s %11.1f %11.1f\n", "total", c.NodeHours, c.GPUHours)
		fmt.Fprintf(out, "  makespan %s on %d nodes; lower bound %s = max(longest deployment %s, node-hours / nodes %s); makespan / lower bound %.3f\n",
			hm(c.MakespanHours), c.Nodes, hm(c.LowerBoundHours), hm(c.LongestDeploymentHours), hm(c.NodeBoundHours), c.Ratio)
		multiKey, canary := false, ""
		for _, s := range c.CriticalPath {
			multiKey = multiKey || s.ConfigKey != c.CriticalPath[0].ConfigKey
			if s.Canary {
				canary = ", or its canary passes"
			}
		}
		fmt.Fprintf(out, "  critical path (each starts when the one before releases its nodes%s):\n", canary)
		for _, s := range c.CriticalPath {
			key := ""
			if multiKey || len(c.CriticalPath) == 1 {
				key = " " + s.ConfigKey
			}
			dep := s.Deployment
			if s.Canary {
				dep += " canary"
			}
			fmt.Fprintf(out, "    %s-%s  %s %s c%s, %d nodes%s\n", hm(s.StartHours), hm(s.EndHours), dep, s.Topology, concs(s.Concs), s.Nodes, key)
		}
		c.Adaptive.write(out)
		c.Canary.write(out)
		fmt.Fprintln(out, "  where the figures come from:")
		for _, s := range c.Sources {
			fmt.Fprintf(out, "    %-12s %8s  %s, %d run%s\n", s.Time, fmtDur(minutes(s.Minutes)), s.From, s.Runs, plural(s.Runs))
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(out, "  note: %s\n", n)
	}
	if n := len(c.NotForecast); n > 0 {
		fmt.Fprintf(out, "  not forecast, costs nothing on %s:\n", c.Name)
		for _, f := range c.NotForecast {
			pts := ""
			if f.Points > 0 {
				pts = fmt.Sprintf(" (%d point%s)", f.Points, plural(f.Points))
			}
			fmt.Fprintf(out, "    %s %s%s: %s\n", f.Key, f.Kind, pts, f.Reason)
		}
	}
	return nil
}

// hm prints hours as h:mm.
func hm(h float64) string {
	m := int(h*60 + 0.5)
	return fmt.Sprintf("%d:%02d", m/60, m%60)
}

func concs(cs []int) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// write prints the canary comparison: the figures with canaries and what
// they add, then each canary and what its failure would save.
func (cf *Canary) write(out io.Writer) {
	if cf == nil {
		return
	}
	head := "with canaries (--canary)"
	if cf.Headline {
		head = "canaries first, against none"
	}
	fmt.Fprintf(out, "  %s: %d canar%s; makespan %s, %s; %.1f node-hours, %+.1f (%+d bring-up%s, %+d eval restart%s)\n",
		head, len(cf.Groups), map[bool]string{true: "y", false: "ies"}[len(cf.Groups) == 1], hm(cf.MakespanHours), later(cf.DelayHours),
		cf.NodeHours, cf.ExtraNodeHours, cf.ExtraBringUps, plural(abs(cf.ExtraBringUps)), cf.ExtraEvalRestarts, plural(abs(cf.ExtraEvalRestarts)))
	for _, g := range cf.Groups {
		fails := "the only point of its image and backend"
		if n := g.Points - 1; n > 0 {
			fails = fmt.Sprintf("if it fails: %d point%s not started, %.1f node-hours saved", n, plural(n), g.SavedNodeHours)
		}
		fmt.Fprintf(out, "    %s-%s  canary %s c%d, %d nodes, %.1f node-hours (%s %s); %s\n",
			hm(g.StartHours), hm(g.EndHours), g.Topology, g.Conc, g.Nodes, g.NodeHours, g.Backend, g.Image, fails)
	}
}

// later says how much later (or sooner) a sweep ends, in h:mm.
func later(h float64) string {
	switch {
	case hm(h) == "0:00" || hm(-h) == "0:00":
		return "ends no later"
	case h < 0:
		return hm(-h) + " sooner"
	}
	return hm(h) + " later"
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
