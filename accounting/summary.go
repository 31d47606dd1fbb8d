package accounting

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sweepflow/sweepflow/loadgen"
)

// Summary is Books as `starter stats` prints them (--json: this struct).
type Summary struct {
	Sweeps           []string `json:"sweeps"`
	TotalNodeMinutes float64  `json:"total_node_minutes"`
	// AllocationNodeMinutes is the allocations' node-minutes, counted from
	// their grant and end; it equals the total up to float rounding.
	AllocationNodeMinutes float64            `json:"allocation_node_minutes"`
	Allocations           int                `json:"allocations"`
	Categories            map[string]float64 `json:"categories"`
	// CategoryOrder lists the categories in display order.
	CategoryOrder     []string        `json:"category_order"`
	UsefulNodeMinutes float64         `json:"useful_node_minutes"`
	UsefulFraction    float64         `json:"useful_fraction"`
	FailureClasses    []ClassSummary  `json:"failure_classes"`
	Saved             SavedSummary    `json:"saved"`
	Timings           []TimingSummary `json:"timings"`
	Notes             []string        `json:"notes,omitempty"`
	// Energy is the GPU energy of the perf windows beside the node-hours
	// (nil: not loaded).
	Energy *EnergySummary `json:"energy,omitempty"`
}

// ClassSummary is one failure class, ranked by node-minutes lost.
type ClassSummary struct {
	Class       string  `json:"class"`
	Attempts    int     `json:"attempts"`
	NodeMinutes float64 `json:"node_minutes"`
}

// SavedSummary is what reused outputs saved, at what they cost when measured.
type SavedSummary struct {
	Stages      int     `json:"stages"`
	NodeMinutes float64 `json:"node_minutes"` // of the stages whose cost is known
	Unknown     int     `json:"unknown"`      // reused stages whose original run is not in the ledger
}

// TimingSummary is the queue wait (the allocate stage: submit to granted)
// and the bring-up time of one cluster and deployment, in seconds.
type TimingSummary struct {
	Cluster    string  `json:"cluster"`
	Deployment string  `json:"deployment"`
	ConfigKey  string  `json:"config_key"`
	QueueN     int     `json:"queue_wait_n"`
	QueueP50   float64 `json:"queue_wait_p50_s"`
	QueueP90   float64 `json:"queue_wait_p90_s"`
	BringUpN   int     `json:"bring_up_n"`
	BringUpP50 float64 `json:"bring_up_p50_s"`
	BringUpP90 float64 `json:"bring_up_p90_s"`
}

// categoryOrder is the display order of the fixed categories.
var categoryOrder = []string{Staging, BringUp, Warmup, Perf, EvalRestart, Eval, Teardown, Held}

// Summarize turns books into the printed summary. The total is the sum of
// the category minutes in CategoryOrder, so the categories add up to it.
func Summarize(b *Books, sweeps []string) Summary {
	s := Summary{Sweeps: sweeps, Categories: map[string]float64{}, Allocations: len(b.Allocations),
		AllocationNodeMinutes: b.AllocationTime().Minutes(), UsefulNodeMinutes: b.Useful.Minutes(),
		UsefulFraction: b.UsefulFraction(), Notes: b.Notes, FailureClasses: []ClassSummary{}}
	if s.Sweeps == nil {
		s.Sweeps = []string{}
	}
	var failed []string
	for c := range b.Categories {
		if strings.HasPrefix(c, FailedPrefix) {
			failed = append(failed, c)
		}
	}
	slices.SortFunc(failed, func(x, y string) int {
		return cmp.Or(cmp.Compare(b.Categories[y], b.Categories[x]), cmp.Compare(x, y))
	})
	order := slices.Clone(categoryOrder)
	if _, ok := b.Categories[Adaptive]; ok {
		order = append(order, Adaptive) // only sweeps with adaptive points show it
	}
	for _, c := range append(order, failed...) {
		if _, ok := b.Categories[c]; !ok && strings.HasPrefix(c, FailedPrefix) {
			continue
		}
		m := b.Categories[c].Minutes()
		s.Categories[c] = m
		s.CategoryOrder = append(s.CategoryOrder, c)
		s.TotalNodeMinutes += m
	}
	for _, c := range b.Classes {
		s.FailureClasses = append(s.FailureClasses, ClassSummary{Class: string(c.Class), Attempts: c.Attempts, NodeMinutes: c.NodeTime.Minutes()})
	}
	for _, sv := range b.Saved {
		s.Saved.Stages++
		if sv.Known {
			s.Saved.NodeMinutes += sv.NodeTime.Minutes()
		} else {
			s.Saved.Unknown++
		}
	}
	s.Timings = timings(b)
	return s
}

func timings(b *Books) []TimingSummary {
	type key struct{ cluster, dep, ck string }
	q, u := map[key][]time.Duration{}, map[key][]time.Duration{}
	var keys []key
	add := func(m map[key][]time.Duration, s Sample) {
		k := key{s.Cluster, s.Deployment, s.ConfigKey}
		if _, ok1 := q[k]; !ok1 {
			if _, ok2 := u[k]; !ok2 {
				keys = append(keys, k)
			}
		}
		m[k] = append(m[k], s.D)
	}
	for _, s := range b.QueueWait {
		add(q, s)
	}
	for _, s := range b.BringUpTime {
		add(u, s)
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.cluster, y.cluster), cmp.Compare(x.ck, y.ck), cmp.Compare(x.dep, y.dep))
	})
	out := []TimingSummary{}
	for _, k := range keys {
		out = append(out, TimingSummary{Cluster: k.cluster, Deployment: k.dep, ConfigKey: k.ck,
			QueueN: len(q[k]), QueueP50: loadgen.PercentileOf(q[k], 50, loadgen.NearestRank).Seconds(), QueueP90: loadgen.PercentileOf(q[k], 90, loadgen.NearestRank).Seconds(),
			BringUpN: len(u[k]), BringUpP50: loadgen.PercentileOf(u[k], 50, loadgen.NearestRank).Seconds(), BringUpP90: loadgen.PercentileOf(u[k], 90, loadgen.NearestRank).Seconds()})
	}
	return out
}

// WriteJSON prints the summary as indented JSON.
func (s Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText prints the summary as tables.
func (s Summary) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%.1f node-minutes (%.2f node-hours) in %d allocations of %d sweeps\n",
		s.TotalNodeMinutes, s.TotalNodeMinutes/60, s.Allocations, len(s.Sweeps))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tNODE-MIN\tSHARE")
	for _, c := range s.CategoryOrder {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\n", c, s.Categories[c], pct(s.Categories[c], s.TotalNodeMinutes))
	}
	fmt.Fprintf(tw, "total\t%.1f\t\n", s.TotalNodeMinutes)
	tw.Flush()
	fmt.Fprintf(w, "\nuseful fraction: %s (%.1f node-min of perf and eval that ended in a stored figure)\n",
		pct(s.UsefulNodeMinutes, s.TotalNodeMinutes), s.UsefulNodeMinutes)
	if s.Energy != nil {
		s.Energy.WriteText(w)
	}
	if s.Saved.Stages > 0 {
		fmt.Fprintf(w, "saved by reuse: %d stages, %.1f node-min at what they cost when measured", s.Saved.Stages, s.Saved.NodeMinutes)
		if s.Saved.Unknown > 0 {
			fmt.Fprintf(w, " (%d unknown: their run is not in the ledger)", s.Saved.Unknown)
		}
		fmt.Fprintln(w)
	}
	if len(s.FailureClasses) == 0 {
		fmt.Fprintln(w, "\nfailure classes by node-minutes lost: none (no failed attempt)")
	} else {
		fmt.Fprintln(w, "\nfailure classes by node-minutes lost:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLASS\tATTEMPTS\tNODE-MIN")
		for _, c := range s.FailureClasses {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\n", c.Class, c.Attempts, c.NodeMinutes)
		}
		tw.Flush()
	}
	if len(s.Timings) > 0 {
		fmt.Fprintln(w, "\nqueue wait (allocate) and bring-up, seconds, per cluster and deployment:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tCONFIG-KEY\tDEPLOYMENT\tQUEUE N\tP50\tP90\tBRING-UP N\tP50\tP90")
		for _, t := range s.Timings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.1f\n", orDash(t.Cluster), orDash(t.ConfigKey), short(t.Deployment),
				t.QueueN, t.QueueP50, t.QueueP90, t.BringUpN, t.BringUpP50, t.BringUpP90)
		}
		tw.Flush()
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func pct(x, total float64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*x/total)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(h string) string { return orDash(h[:min(8, len(h))]) }
