package nodehealth

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints the nodes as `starter nodes` shows them: one line per
// node with its verdict, then its evidence, newest first, and the policy.
func WriteText(w io.Writer, p Policy, nodes []Node) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCLUSTER\tVERDICT\tFAULTS\tLAST")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", n.Node, n.Cluster, n.Verdict, len(n.Faults), n.Faults[0].At.UTC().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range nodes {
		fmt.Fprintf(w, "\n%s (%s):\n", n.Node, n.Verdict)
		for _, f := range n.Faults {
			where := strings.TrimSpace(f.WorkflowID + " " + f.Stage)
			if f.JobID != "" {
				where += ", slurm job " + f.JobID
			}
			fmt.Fprintf(w, "  %s  %s  %s\n    %s\n", f.At.UTC().Format(time.DateTime), f.Class, where, f.Excerpt)
		}
	}
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no node has a hardware-like failure that counts")
	}
	fmt.Fprintf(w, "\npolicy: %s\n", p)
	return nil
}

// String states the policy in a sentence.
func (p Policy) String() string {
	if p.Attempts == 0 {
		return fmt.Sprintf("no node is excluded (bad-nodes.attempts 0); nodes with hardware-like failures (node-fail, gpu-xid, nccl, nvlink) within %s are listed as suspect", p.Window)
	}
	return fmt.Sprintf("a node named in %d failed attempts with hardware-like evidence (node-fail, gpu-xid, nccl, nvlink) within %s is excluded from new allocations; `starter nodes clear NAME` lets it back in", p.Attempts, p.Window)
}

// jsonNode is a node as --json prints it.
type jsonNode struct {
	Cluster   string      `json:"cluster"`
	Node      string      `json:"node"`
	Verdict   Verdict     `json:"verdict"`
	ClearedAt *time.Time  `json:"cleared_at,omitempty"`
	Faults    []jsonFault `json:"faults"`
}

type jsonFault struct {
	At         time.Time `json:"at"`
	Class      string    `json:"class"`
	Excerpt    string    `json:"excerpt"`
	WorkflowID string    `json:"workflow_id,omitempty"`
	Stage      string    `json:"stage,omitempty"`
	JobID      string    `json:"job_id,omitempty"`
}

// WriteJSON prints the policy and the nodes for machines.
func WriteJSON(w io.Writer, p Policy, nodes []Node) error {
	out := struct {
		Policy struct {
			Attempts int     `json:"attempts"`
			WindowH  float64 `json:"window_hours"`
		} `json:"policy"`
		Nodes []jsonNode `json:"nodes"`
	}{Nodes: []jsonNode{}}
	out.Policy.Attempts, out.Policy.WindowH = p.Attempts, p.Window.Hours()
	for _, n := range nodes {
		j := jsonNode{Cluster: n.Cluster, Node: n.Node, Verdict: n.Verdict}
		if !n.ClearedAt.IsZero() {
			t := n.ClearedAt.UTC()
			j.ClearedAt = &t
		}
		for _, f := range n.Faults {
			j.Faults = append(j.Faults, jsonFault{At: f.At.UTC(), Class: string(f.Class), Excerpt: f.Excerpt, WorkflowID: f.WorkflowID, Stage: f.Stage, JobID: f.JobID})
		}
		out.Nodes = append(out.Nodes, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
