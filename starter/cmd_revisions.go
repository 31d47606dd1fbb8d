package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/temporalx"
)

func init() {
	register("revisions", func() *cobra.Command {
		var jsonOut bool
		c := &cobra.Command{Use: "revisions", Short: "list open workflows and the GetVersion change IDs their histories recorded (may an old revision go?)",
			Args: exactArgs(0), RunE: func(*cobra.Command, []string) error { return runRevisions(jsonOut) }}
		c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
		return c
	})
}

func runRevisions(jsonOut bool) error {
	opts, err := temporalx.ClientOptions(nil)
	if err != nil {
		return err
	}
	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open, err := temporalx.OpenRevisions(ctx, c, opts.DataConverter)
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(open)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tTYPE\tREVISIONS")
	for _, w := range open {
		var revs []string
		for _, r := range w.Revisions {
			revs = append(revs, fmt.Sprintf("%s=%d", r.ChangeID, r.Version))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", w.WorkflowID, w.Type, strings.Join(revs, " "))
	}
	return tw.Flush()
}
