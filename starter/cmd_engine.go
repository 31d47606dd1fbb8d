package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/hostlist"
)

func init() {
	register("engine render", newEngineRenderCmd)
}

// engineRender runs `starter engine render args...` in process.
func engineRender(args []string, stdout io.Writer) error {
	return execute(nil, newEngineRenderCmd(), args, stdout, nil)
}

// newEngineRenderCmd renders a recipe's process set: the JSON list (--json)
// or a listing for people.
func newEngineRenderCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "render --recipe FILE --nodes HOSTLIST",
		Short: "print the processes srt-slurm would launch for a recipe on given nodes",
		Example: "  starter engine render --recipe configs/recipes/.../agg-gb200-tp8-c1-dspark6-hicache.yaml \\\n" +
			"      --nodes 'gb200-[01-02]' --json --reference-placeholders --synthetic-acceptance 3.77",
		Args: noArgs,
	}
	fs := c.Flags()
	recipeFile := fs.String("recipe", "", "srt-slurm recipe file (FILE or FILE:override_<name>) (required)")
	nodesFlag := fs.String("nodes", "", "allocation in Slurm hostlist syntax, e.g. gb200-[01-18] or gb200-01,gb200-02 (required; with --reference-placeholders, default: the nodes the recipe needs, gb200-01..NN)")
	asJSON := fs.Bool("json", false, "print the process set as JSON (the srt-slurm reference fields)")
	al := fs.Float64("synthetic-acceptance", 0, "render a throughput run with this golden acceptance length (InferenceX's rewrite); 0: eval run")
	placeholders := fs.Bool("reference-placeholders", false, "print paths and addresses as srt-slurm's reference renders do ({LOG_DIR}, 10.0.0.N, ...)")
	clusterFile := fs.String("cluster", "", "cluster profile: resolves the recipe's model alias; its recipes-root is the srt-slurm checkout")
	modelDir := fs.String("model-dir", "", "checkpoint directory mounted at /model (default: the profile's model for the recipe's alias)")
	image := fs.String("image", "", "engine container image (default: the recipe's model.container)")
	logDir := fs.String("log-dir", "", "host log directory mounted at /logs (default: ./outputs/logs)")
	srtRoot := fs.String("srt-root", "", "srt-slurm checkout (default: the profile's recipes-root); not used with --reference-placeholders")
	infmax := fs.String("infmax-workspace", os.Getenv("INFMAX_WORKSPACE"), "InferenceX checkout mounted at /infmax-workspace (default: $INFMAX_WORKSPACE; empty: none)")
	addrs := fs.String("addrs", "", "node addresses in --nodes order (default: DNS, else the node name)")
	jobID := fs.String("job-id", "", "Slurm job id for srun --jobid (default: $SLURM_JOB_ID; 4242 with --reference-placeholders)")
	var checkouts recipesFlags
	checkouts.bindCheckouts(fs)
	var sets recipeSets
	sets.bind(fs, "the recipe")
	c.RunE = func(c *cobra.Command, _ []string) error {
		// With the checkouts, --recipe is a CONFIG_FILE value in the root
		// they compose, rendered with their srt-slurm and InferenceX paths.
		if checkouts.inferencex == "" && checkouts.srtSlurm != "" {
			return usageError("--srt-slurm needs --inferencex here (use --srt-root for the srt-slurm checkout alone)")
		}
		o, err := checkouts.compose()
		if err != nil {
			return err
		}
		if o != nil && *recipeFile != "" {
			*recipeFile = filepath.Join(o.Dir, filepath.FromSlash(strings.TrimSpace(*recipeFile)))
			*srtRoot, *infmax = cmp.Or(*srtRoot, o.SrtSlurm), cmp.Or(*infmax, o.InferenceX)
		}
		if *recipeFile == "" || (*nodesFlag == "" && !*placeholders) {
			return usageError("--recipe and --nodes are required (usage: starter engine %s)", c.Use)
		}
		if err := sets.check(); err != nil {
			return err
		}
		return engineRenderRun(c.OutOrStdout(), c.ErrOrStderr(), engineRenderFlags{
			recipe: *recipeFile, nodes: *nodesFlag, json: *asJSON, al: *al, placeholders: *placeholders,
			cluster: *clusterFile, modelDir: *modelDir, image: *image, logDir: *logDir, srtRoot: *srtRoot,
			infmax: *infmax, addrs: *addrs, jobID: *jobID, sets: sets,
		})
	}
	return c
}

type engineRenderFlags struct {
	recipe, nodes                             string
	json, placeholders                        bool
	al                                        float64
	cluster, modelDir, image, logDir, srtRoot string
	infmax, addrs, jobID                      string
	sets                                      []string
}

func engineRenderRun(stdout, stderr io.Writer, f engineRenderFlags) error {
	recipe, err := loadRecipeFile(f.recipe, f.sets...)
	if err != nil {
		return err
	}
	for _, w := range recipe.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w.Error())
	}
	var nodes []string
	if f.nodes == "" {
		// The reference renders' allocation: the smallest the recipe needs.
		fp, err := recipe.Footprint(0)
		if err != nil {
			return err
		}
		nodes = srtlaunch.PlaceholderAllocation(recipe, fp.Nodes).Nodes
	} else if nodes, err = hostlist.Expand(f.nodes); err != nil {
		return &exitError{code: 2, msg: "--nodes: " + err.Error()}
	}
	var cluster *config.Cluster
	if f.cluster != "" {
		if cluster, err = config.LoadCluster(f.cluster); err != nil {
			return err
		}
	}
	model := f.modelDir
	if model == "" {
		model = recipe.ModelDir(cluster)
	}

	opt := srtlaunch.Options{SyntheticAL: f.al}
	alloc := srtlaunch.Allocation{Nodes: nodes}
	if f.placeholders {
		name := filepath.Base(model)
		if model == "" {
			name = recipe.ModelName()
		}
		opt.Paths = srtlaunch.PlaceholderPaths(name)
		opt.JobID = "4242"
		for i := range nodes {
			alloc.Addrs = append(alloc.Addrs, fmt.Sprintf("10.0.0.%d", i+1))
		}
	} else {
		if model == "" && !strings.HasPrefix(recipe.Model.Path, "hf:") {
			return &exitError{code: 2, msg: fmt.Sprintf("recipe model %q is an alias: give --model-dir, or --cluster with a profile that lists it", recipe.Model.Path)}
		}
		root := f.srtRoot
		if root == "" && cluster != nil {
			root = cluster.SrtRoot
			if root == "" {
				root = cluster.RecipesRoot
			}
		}
		if root == "" {
			return &exitError{code: 2, msg: "give --srt-root (the srt-slurm checkout) or --cluster with a recipes-root"}
		}
		ld := f.logDir
		if ld == "" {
			ld = filepath.Join("outputs", "logs")
		}
		if ld, err = filepath.Abs(ld); err != nil {
			return err
		}
		img := f.image
		if img == "" {
			img = recipe.Model.Container
			if cluster != nil && cluster.Containers[img] != "" {
				img = cluster.Containers[img] // what the backend runs
			}
		}
		ws := f.infmax
		if ws == "" && cluster != nil {
			ws = cluster.InfmaxWorkspace
		}
		opt.Paths = srtlaunch.Paths{LogDir: ld, ModelDir: model, ModelName: filepath.Base(model), Image: img, SrtRoot: root, InfmaxWorkspace: ws}
		opt.JobID = os.Getenv("SLURM_JOB_ID")
		if alloc.Addrs, err = nodeAddrs(nodes, f.addrs); err != nil {
			return &exitError{code: 2, msg: "--addrs: " + err.Error()}
		}
	}
	if f.jobID != "" {
		opt.JobID = f.jobID
	}
	rendered, err := srtlaunch.Render(recipe, alloc, opt)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(rendered)
	}
	rendered.Write(stdout, recipe.Name)
	return nil
}

func loadRecipeFile(ref string, sets ...string) (*config.Recipe, error) {
	file, sel := config.SplitRecipeRef(ref)
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	r := filepath.Base(abs)
	if sel != "" {
		r += ":" + sel
	}
	return config.LoadRecipe(filepath.Dir(abs), r, sets...)
}

// nodeAddrs takes addresses from --addrs, else resolves each node, else
// keeps the name (as srt-slurm falls back to the hostname).
func nodeAddrs(nodes []string, list string) ([]string, error) {
	if list != "" {
		addrs, err := hostlist.Expand(list)
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
