package plan

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// SummaryCluster is the cluster as a plan summary shows it.
type SummaryCluster struct {
	Name        string `json:"name"`
	Backend     string `json:"backend"`
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus-per-node"`
	TaskQueue   string `json:"task-queue"`
	Launcher    string `json:"launcher"`
}

// Summary is `starter plan --json`: the plan with its cluster, node
// allocations, bring-ups and eval restarts.
type Summary struct {
	*Plan
	Cluster         SummaryCluster `json:"cluster"`
	NodeAllocations int            `json:"node-allocations"`
	// BringUps are the plan's deployments: each is one allocation and one
	// perf bring-up shared by its points; EvalRestarts the eval-mode
	// restarts (one per deployment with an eval).
	BringUps     []BringUpGroup `json:"bring-ups"`
	EvalRestarts int            `json:"eval-restarts"`
}

// WriteTable prints the plan as `starter plan` shows it: a table of the
// points, then node-allocations, evals and the shared bring-ups.
func (p *Plan) WriteTable(out io.Writer) error {
	c := p.Cluster
	fmt.Fprintf(out, "sweep %s on %s (%s, %d nodes x %d GPUs)\n", p.SweepName, c.Name, c.Backend, c.Nodes, c.GPUsPerNode)
	// Recipes usually share a directory; print it once and keep the column short.
	dir := ""
	for i, pt := range p.Points {
		d := path.Dir(pt.RecipePath)
		if i == 0 {
			dir = d
		} else if d != dir {
			dir = ""
			break
		}
	}
	if dir != "" {
		fmt.Fprintf(out, "recipes in %s/\n", path.Join(strictyaml.DisplayPath(p.RecipesRoot), dir))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tEXP-NAME\tTOPOLOGY\tCONC\tNODES\tGPUS\tEVAL\tBRING-UP\tRECIPE")
	largest := 0
	for _, pt := range p.Points {
		recipe := pt.RecipePath
		if dir != "" {
			recipe = path.Base(recipe)
		}
		eval := "no"
		switch {
		case pt.EvalOnly:
			eval = "eval-only"
		case pt.Eval:
			eval = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\tB%d\t%s\n", pt.Index+1, pt.ExpName, pt.Topology, pt.Conc, pt.Nodes, pt.GPUs, eval, pt.BringUpGroup, recipe)
		largest = max(largest, pt.Nodes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d points, %d node-allocations, %d with eval; largest point needs %d of %d nodes\n",
		len(p.Points), p.NodeAllocations(), p.Evals(), largest, c.Nodes)
	if n := p.EvalOnlyPoints(); n > 0 {
		fmt.Fprintf(out, "%d eval-only points (an evals-only or all-evals changelog entry): the eval runs without the throughput benchmark\n", n)
	}
	groups := p.BringUpGroups()
	fmt.Fprintf(out, "%d bring-ups (one per deployment; points with the same B share its allocation and server), %d eval restarts\n",
		len(groups), p.EvalRestarts())
	for _, g := range groups {
		if len(g.Points) > 1 {
			concs := make([]string, len(g.Concs))
			for i, c := range g.Concs {
				concs[i] = "c" + strconv.Itoa(c)
			}
			fmt.Fprintf(out, "  B%d %s: %s on one %d-node allocation\n", g.Group, g.Topology, strings.Join(concs, ", "), g.Nodes)
		}
	}
	return nil
}

// Summary is the plan with what `starter plan --json` adds to it.
func (p *Plan) Summary() Summary {
	c := p.Cluster
	return Summary{
		Plan: p,
		Cluster: SummaryCluster{Name: c.Name, Backend: c.Backend, Nodes: c.Nodes, GPUsPerNode: c.GPUsPerNode,
			TaskQueue: c.TaskQueue, Launcher: c.Launcher},
		NodeAllocations: p.NodeAllocations(),
		BringUps:        p.BringUpGroups(),
		EvalRestarts:    p.EvalRestarts(),
	}
}
