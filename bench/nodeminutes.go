package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"
)

// WriteNodeMinutes renders `starter bench nodeminutes`: the node-minutes of
// a plan with one bring-up per deployment against one per point.
func WriteNodeMinutes(out io.Writer, p *plan.Plan, c *config.Cluster, rep plan.NodeMinuteReport) error {
	t := rep.Times
	fmt.Fprintf(out, "sweep %s on %s: node-minutes, one bring-up per deployment vs one per point\n", p.SweepName, c.Name)
	fmt.Fprintf(out, "bring-up %s (cluster profile bring-up-time, also the eval restart), warmup %s per point, eval %s; perf from each row\n\n",
		t.BringUp, t.Warmup, t.Eval)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "GROUP\tTOPOLOGY\tNODES\tCONCS\tEVALS\tSHARED\tPER-POINT\t")
	for _, g := range rep.Groups {
		concs := make([]string, len(g.Concs))
		for i, x := range g.Concs {
			concs[i] = strconv.Itoa(x)
		}
		fmt.Fprintf(tw, "B%d\t%s\t%d\t%s\t%d\t%.0f\t%.0f\t\n", g.Group, g.Topology, g.Nodes, strings.Join(concs, ","), g.Evals, g.Shared, g.PerPoint)
	}
	fmt.Fprintf(tw, "total\t\t\t\t\t%.0f\t%.0f\t\n", rep.Shared, rep.PerPoint)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nbring-ups: %d perf + %d eval restarts shared, %d perf + %d eval restarts one per point\n",
		rep.SharedPerfBringUps, rep.SharedEvalRestarts, rep.PerPointPerfBringUps, rep.PerPointEvalRestarts)
	fmt.Fprintf(out, "node-minutes: %.0f shared vs %.0f per point: %.0f saved (%.1f%%), ratio %.3f\n",
		rep.Shared, rep.PerPoint, rep.Saved, 100*rep.SavedShare, rep.Ratio)
	return nil
}
