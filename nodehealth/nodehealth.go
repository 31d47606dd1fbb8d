// Package nodehealth keeps bad nodes out of new allocations. Every failed
// stage attempt whose evidence names a node and points at its hardware (a
// node failure, a GPU Xid, NCCL or NVLink errors; failure.Hardware) is a
// Fault against that node; a node with Policy.Attempts faults within
// Policy.Window is excluded from new holder jobs (sbatch --exclude), one with
// fewer is suspect. An operator lets a node back in with a Clear: only faults
// after the latest clear count.
package nodehealth

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sweepflow/sweepflow/failure"
)

// Policy says when a node is excluded. The cluster profile may change it
// (yaml "bad-nodes: {attempts: 2, window: 24h}").
type Policy struct {
	// Attempts is how many failed attempts with hardware-like evidence
	// naming the node exclude it (0: never exclude, only list suspects).
	Attempts int
	// Window is how far back faults count.
	Window time.Duration
}

// DefaultPolicy: two attempts within a day. One Xid can be a job's bad luck
// (a retry on the same node often passes); a second on the same node within
// a day is the node, and a day is longer than any sweep, so a sweep does not
// get the node back while it runs.
var DefaultPolicy = Policy{Attempts: 2, Window: 24 * time.Hour}

// Validate refuses a policy that cannot be applied.
func (p Policy) Validate() error {
	if p.Attempts < 0 {
		return fmt.Errorf("attempts %d: want 0 (never exclude) or more", p.Attempts)
	}
	if p.Window <= 0 {
		return fmt.Errorf("window %s: want a positive duration such as 24h", p.Window)
	}
	return nil
}

// Fault is one failed stage attempt whose evidence names the node.
type Fault struct {
	// Cluster is the profile name the node belongs to: node names are
	// unique within a cluster only.
	Cluster, Node string
	Class         failure.Class
	Excerpt       string
	// Where the attempt ran: the point workflow, stage and Slurm job.
	WorkflowID, Stage, JobID string
	At                       time.Time
	// Key makes recording idempotent: one fault per node and attempt
	// (workflow, activity, attempt).
	Key string
}

// Clear lets a node back in: faults at or before At no longer count.
type Clear struct {
	Cluster, Node string
	At            time.Time
	By            string // who cleared it (the operator's user name)
}

// Verdict is what the policy makes of a node.
type Verdict string

const (
	Excluded Verdict = "excluded"
	Suspect  Verdict = "suspect"
)

// Node is one node with faults that count, and the verdict.
type Node struct {
	Cluster, Node string
	Verdict       Verdict
	// Faults that count (within the window, after the latest clear),
	// newest first.
	Faults []Fault
	// ClearedAt is the latest clear (zero: never cleared).
	ClearedAt time.Time
}

// Judge applies the policy at now to a cluster's faults and clears: every
// node with at least one counting hardware-like fault, excluded nodes
// first, then by most faults and name.
func Judge(p Policy, faults []Fault, clears []Clear, now time.Time) []Node {
	type key struct{ cluster, node string }
	cleared := map[key]time.Time{}
	for _, c := range clears {
		k := key{c.Cluster, c.Node}
		if c.At.After(cleared[k]) {
			cleared[k] = c.At
		}
	}
	since := now.Add(-p.Window)
	byNode := map[key]*Node{}
	for _, f := range faults {
		k := key{f.Cluster, f.Node}
		if !failure.Hardware(f.Class) || f.Node == "" || f.At.Before(since) || !f.At.After(cleared[k]) {
			continue
		}
		n := byNode[k]
		if n == nil {
			n = &Node{Cluster: f.Cluster, Node: f.Node, ClearedAt: cleared[k]}
			byNode[k] = n
		}
		n.Faults = append(n.Faults, f)
	}
	out := make([]Node, 0, len(byNode))
	for _, n := range byNode {
		sort.SliceStable(n.Faults, func(i, j int) bool { return n.Faults[i].At.After(n.Faults[j].At) })
		n.Verdict = Suspect
		if p.Attempts > 0 && len(n.Faults) >= p.Attempts {
			n.Verdict = Excluded
		}
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Verdict != b.Verdict {
			return a.Verdict == Excluded
		}
		if len(a.Faults) != len(b.Faults) {
			return len(a.Faults) > len(b.Faults)
		}
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		return a.Node < b.Node
	})
	return out
}

// ExcludedNodes are the names of the excluded nodes, sorted.
func ExcludedNodes(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if n.Verdict == Excluded {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out
}

// Faults are the faults err's evidence charges to nodes: one per node its
// failure names, when the class is hardware-like (nil otherwise).
func Faults(err error) []Fault {
	f, ok := failure.Of(err)
	if !ok || !failure.Hardware(f.Class) {
		return nil
	}
	var out []Fault
	for _, n := range f.Nodes {
		if n != "" {
			out = append(out, Fault{Node: n, Class: f.Class, Excerpt: f.Excerpt})
		}
	}
	return out
}
