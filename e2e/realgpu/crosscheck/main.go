// Command crosscheck judges one point of the real-GPU run: sweepflow's
// figures, derived by loadgen from its request log, against the independent
// client's (e2e/realgpu/client.py). It prints the verdict as JSON and exits
// 1 when a figure is more than the tolerance apart; --fixture also writes
// the point in the compact form the package's test reads.
//
//	crosscheck --point c1 --aggregate agg.json --requests requests.jsonl \
//	    --client client_summary.json [--fixture c1.json.gz [--fixture-tick 10us]]
//	    [--tolerance 0.02]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/sweepflow/sweepflow/e2e/realgpu"
)

func main() {
	point := flag.String("point", "", "point name recorded in the verdict and the fixture")
	agg := flag.String("aggregate", "", "loadgen's aggregate JSON of the point")
	reqs := flag.String("requests", "", "loadgen's requests JSONL of the point")
	client := flag.String("client", "", "client.py's client_summary.json of the same requests")
	fixture := flag.String("fixture", "", "also write the point as a compact test fixture here")
	tol := flag.Float64("tolerance", realgpu.Tolerance, "largest relative difference that agrees")
	tick := flag.Duration("fixture-tick", realgpu.DefaultTick, "time resolution of the fixture")
	flag.Parse()
	if *agg == "" || *reqs == "" || *client == "" {
		fmt.Fprintln(os.Stderr, "crosscheck: --aggregate, --requests and --client are required")
		os.Exit(2)
	}
	run, err := realgpu.LoadRun(*point, *agg, *reqs, *client)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crosscheck:", err)
		os.Exit(2)
	}
	if *fixture != "" {
		f, err := os.Create(*fixture)
		if err == nil {
			err = realgpu.WriteFixture(f, run, *tick)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "crosscheck: fixture:", err)
			os.Exit(2)
		}
	}
	v := run.Check(*tol)
	out, _ := json.MarshalIndent(struct {
		Point string `json:"point"`
		realgpu.Verdict
		Ours   realgpu.Figures `json:"ours"`
		Theirs realgpu.Figures `json:"theirs"`
	}{*point, v, run.Ours(), run.Client.Figures()}, "", "  ")
	fmt.Println(string(out))
	if !v.Agree {
		os.Exit(1)
	}
}
