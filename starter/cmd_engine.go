package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/engine"
)

func init() {
	register(command{name: "engine render", summary: "print the processes srt-slurm would launch for a recipe on given nodes",
		run: func(args []string) error { return engineRender(args, os.Stdout) }})
}

const engineRenderUsage = "usage: starter engine render --recipe FILE --nodes gb200-[01-NN] [--json] [--synthetic-acceptance AL] " +
	"[--reference-placeholders] [--cluster PROFILE] [--model-dir DIR] [--image IMAGE] [--log-dir DIR] [--srt-root DIR] " +
	"[--infmax-workspace DIR] [--addrs LIST] [--job-id ID]"

// engineRender renders a recipe's process set: the JSON list (--json) or a
// listing for people.
func engineRender(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("engine render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	recipeFile := fs.String("recipe", "", "srt-slurm recipe file (FILE or FILE:override_<name>)")
	nodesFlag := fs.String("nodes", "", "allocation in Slurm hostlist syntax, e.g. gb200-[01-18] or gb200-01,gb200-02")
	asJSON := fs.Bool("json", false, "print the process set as JSON (the srt-slurm reference fields)")
	al := fs.Float64("synthetic-acceptance", 0, "render a throughput run with this golden acceptance length (InferenceX's rewrite); 0: eval run")
	placeholders := fs.Bool("reference-placeholders", false, "print paths and addresses as srt-slurm's reference renders do ({LOG_DIR}, 10.0.0.N, ...)")
	clusterFile := fs.String("cluster", "", "cluster profile: resolves the recipe's model alias; its recipes-root is the srt-slurm checkout")
	modelDir := fs.String("model-dir", "", "checkpoint directory mounted at /model (default: the profile's model for the recipe's alias)")
	image := fs.String("image", "", "engine container image (default: the recipe's model.container)")
	logDir := fs.String("log-dir", "", "host log directory mounted at /logs (default: ./outputs/logs)")
	srtRoot := fs.String("srt-root", "", "srt-slurm checkout (default: the profile's recipes-root)")
	infmax := fs.String("infmax-workspace", os.Getenv("INFMAX_WORKSPACE"), "InferenceX checkout mounted at /infmax-workspace (default: $INFMAX_WORKSPACE; empty: none)")
	addrs := fs.String("addrs", "", "node addresses in --nodes order (default: DNS, else the node name)")
	jobID := fs.String("job-id", "", "Slurm job id for srun --jobid (default: $SLURM_JOB_ID; 4242 with --reference-placeholders)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintln(stdout, engineRenderUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return &exitError{code: 2, msg: err.Error() + "\n" + engineRenderUsage}
	}
	if fs.NArg() != 0 || *recipeFile == "" || *nodesFlag == "" {
		return &exitError{code: 2, msg: engineRenderUsage}
	}
	nodes, err := engine.ParseHostlist(*nodesFlag)
	if err != nil {
		return &exitError{code: 2, msg: "--nodes: " + err.Error()}
	}
	recipe, err := loadRecipeFile(*recipeFile)
	if err != nil {
		return err
	}
	var cluster *config.Cluster
	if *clusterFile != "" {
		if cluster, err = config.LoadCluster(*clusterFile); err != nil {
			return err
		}
	}
	model := *modelDir
	if model == "" {
		model = resolveModelDir(recipe, cluster)
	}

	opt := engine.Options{SyntheticAL: *al}
	alloc := engine.Allocation{Nodes: nodes}
	if *placeholders {
		name := filepath.Base(model)
		if model == "" {
			name = fallbackModelName(recipe)
		}
		opt.Paths = engine.PlaceholderPaths(name)
		opt.JobID = "4242"
		for i := range nodes {
			alloc.Addrs = append(alloc.Addrs, fmt.Sprintf("10.0.0.%d", i+1))
		}
	} else {
		if model == "" && !strings.HasPrefix(recipe.Model.Path, "hf:") {
			return &exitError{code: 2, msg: fmt.Sprintf("recipe model %q is an alias: give --model-dir, or --cluster with a profile that lists it", recipe.Model.Path)}
		}
		root := *srtRoot
		if root == "" && cluster != nil {
			root = cluster.RecipesRoot
		}
		if root == "" {
			return &exitError{code: 2, msg: "give --srt-root (the srt-slurm checkout) or --cluster with a recipes-root"}
		}
		ld := *logDir
		if ld == "" {
			ld = filepath.Join("outputs", "logs")
		}
		if ld, err = filepath.Abs(ld); err != nil {
			return err
		}
		img := *image
		if img == "" {
			img = recipe.Model.Container
		}
		opt.Paths = engine.Paths{LogDir: ld, ModelDir: model, ModelName: filepath.Base(model), Image: img, SrtRoot: root, InfmaxWorkspace: *infmax}
		opt.JobID = os.Getenv("SLURM_JOB_ID")
		if alloc.Addrs, err = nodeAddrs(nodes, *addrs); err != nil {
			return &exitError{code: 2, msg: "--addrs: " + err.Error()}
		}
	}
	if *jobID != "" {
		opt.JobID = *jobID
	}
	procs, err := engine.Render(recipe, alloc, opt)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(procs)
	}
	printProcesses(stdout, recipe, procs)
	return nil
}

func loadRecipeFile(ref string) (*config.Recipe, error) {
	file, sel := config.SplitRecipeRef(ref)
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	r := filepath.Base(abs)
	if sel != "" {
		r += ":" + sel
	}
	return config.LoadRecipe(filepath.Dir(abs), r)
}

// resolveModelDir finds the checkpoint directory: the profile's entry for the
// recipe's alias, or the recipe's own absolute path.
func resolveModelDir(r *config.Recipe, c *config.Cluster) string {
	if c != nil {
		if m, ok := c.Models[r.Model.Path]; ok {
			return m.Path
		}
	}
	if filepath.IsAbs(r.Model.Path) {
		return r.Model.Path
	}
	return ""
}

// fallbackModelName names {MODEL_DIR:...} without a profile: the checkpoint
// repository's base name from the recipe's identity, else the alias.
func fallbackModelName(r *config.Recipe) string {
	var id struct {
		Identity struct {
			Model struct {
				Repo string `yaml:"repo"`
			} `yaml:"model"`
		} `yaml:"identity"`
	}
	if r.Doc != nil && r.Doc.Decode(&id) == nil && id.Identity.Model.Repo != "" {
		return filepath.Base(id.Identity.Model.Repo)
	}
	return filepath.Base(r.Model.Path)
}

// nodeAddrs takes addresses from --addrs, else resolves each node, else
// keeps the name (as srt-slurm falls back to the hostname).
func nodeAddrs(nodes []string, list string) ([]string, error) {
	if list != "" {
		addrs, err := engine.ParseHostlist(list)
		if err != nil {
			return nil, err
		}
		if len(addrs) != len(nodes) {
			return nil, fmt.Errorf("%d addresses for %d nodes", len(addrs), len(nodes))
		}
		return addrs, nil
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ips, err := net.DefaultResolver.LookupHost(ctx, n)
		cancel()
		out[i] = n
		if err == nil && len(ips) > 0 {
			out[i] = ips[0]
		}
	}
	return out, nil
}

func printProcesses(w io.Writer, r *config.Recipe, procs []*engine.Process) {
	fmt.Fprintf(w, "recipe %s: %d processes\n", r.Name, len(procs))
	for i, p := range procs {
		fmt.Fprintf(w, "\n[%d] %-9s %s on %s\n", i, p.Role, filepath.Base(p.Output), strings.Join(p.Nodelist, ","))
		fmt.Fprintf(w, "    image:  %s\n", p.ContainerImage)
		if keys := p.EnvKeys(); len(keys) > 0 {
			fmt.Fprintln(w, "    env:")
			for _, k := range keys {
				v, _ := p.EnvValue(k)
				fmt.Fprintf(w, "      %s=%s\n", k, v)
			}
		}
		fmt.Fprintf(w, "    cmd:    %s\n", p.CommandLine())
	}
}
