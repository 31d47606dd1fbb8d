package chaos

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/results"
)

// Summary is a chaos run's account: what it injected and whether the
// ledger holds exactly those faults (Reconcile).
type Summary struct {
	SweepID    string         `json:"sweep_id"`
	Seed       int64          `json:"seed"`
	Faults     []Injection    `json:"faults"`
	Counts     map[string]int `json:"counts,omitempty"` // points by final status
	Failed     int            `json:"failed_attempts"`  // the ledger's failed, lost and cancelled attempts
	Mismatches []string       `json:"mismatches"`
	Notes      []string       `json:"notes,omitempty"`
}

// Summarize reconciles the injections with the sweep's ledger attempts.
func Summarize(sweepID string, seed int64, inj []Injection, attempts []results.StageAttempt, counts map[string]int) Summary {
	s := Summary{SweepID: sweepID, Seed: seed, Faults: inj, Counts: counts, Mismatches: []string{}}
	for _, a := range attempts {
		if a.Failed() {
			s.Failed++
		}
	}
	mis, notes := Reconcile(inj, attempts)
	s.Mismatches = append(s.Mismatches, mis...)
	s.Notes = notes
	return s
}

// WriteText prints the summary: one row per fault, then the ledger check.
func (s Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "chaos seed %d on sweep %s: %d faults\n", s.Seed, s.SweepID, len(s.Faults))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tPOINT\tSTAGE\tEXPECT\tLANDED")
	for _, f := range s.Faults {
		kind := string(f.Kind)
		if f.Crash != "" {
			kind += ":" + f.Crash
		}
		landed := "by the point's first attempt of the stage"
		switch {
		case f.Missed != "":
			landed = "missed: " + f.Missed
		case !f.At.IsZero():
			landed = fmt.Sprintf("%s, attempt %d", f.At.UTC().Format("15:04:05"), f.Attempt)
			if f.Node != "" {
				landed += ", node " + f.Node + " DOWN"
			}
			if len(f.Hit) > 0 {
				landed += fmt.Sprintf(", %d attempts in flight: %s", len(f.Hit), hits(f.Hit))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", kind, f.Point, f.Stage, f.Expect, landed)
	}
	tw.Flush()
	if len(s.Counts) > 0 {
		fmt.Fprintf(w, "points: %v\n", s.Counts)
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if len(s.Mismatches) == 0 {
		fmt.Fprintf(w, "ledger: the %d failed attempts are exactly the faults injected\n", s.Failed)
		return
	}
	fmt.Fprintf(w, "ledger: %d mismatches against %d failed attempts:\n", len(s.Mismatches), s.Failed)
	for _, m := range s.Mismatches {
		fmt.Fprintln(w, "  "+m)
	}
}
