package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/temporalx"
)

// `server setup` prepares a Temporal server that is not the embedded dev
// server (the compose stack, a shared cluster, Temporal Cloud): the
// namespace and sweepflow's search attributes. The connection comes from the
// same TEMPORAL_* settings as every other command, so TLS works as for them.
func init() {
	register("server setup", func() *cobra.Command {
		c := &cobra.Command{Use: "setup", Short: "create the namespace and sweepflow's search attributes on a Temporal server (idempotent)", Args: noArgs}
		retention := c.Flags().Duration("retention", 30*24*time.Hour, "workflow retention of a namespace this creates")
		wait := c.Flags().Duration("wait", 2*time.Minute, "keep retrying this long while the server is starting")
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			opts, err := temporalx.ClientOptions(nil)
			if err != nil {
				return err
			}
			// Lazy: the server may still be starting; Ensure retries.
			cl, err := client.NewLazyClient(opts)
			if err != nil {
				return err
			}
			defer cl.Close()
			ns := opts.Namespace
			if ns == "" {
				ns = "default"
			}
			rep, err := temporalx.Setup{Namespace: ns, Retention: *retention, Wait: *wait,
				SearchAttributes: temporalx.SearchAttributeTypes()}.Ensure(cmd.Context(), cl)
			if err != nil {
				return fmt.Errorf("server setup at %s: %w", opts.HostPort, err)
			}
			out := cmd.OutOrStdout()
			verb := "exists"
			if rep.NamespaceCreated {
				verb = "created"
			}
			fmt.Fprintf(out, "namespace %s: %s\n", ns, verb)
			if len(rep.AttributesAdded) == 0 {
				fmt.Fprintln(out, "search attributes: all present")
			} else {
				fmt.Fprintf(out, "search attributes added: %s\n", strings.Join(rep.AttributesAdded, ", "))
			}
			return nil
		}
		return c
	})
}
