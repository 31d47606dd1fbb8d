package srtlaunch

import (
	_ "embed"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/sweepflow/sweepflow/config"
)

// Rendered is what a launch needs: the processes in launch order and the
// files srt-slurm writes into the log directory (mounted at /logs) before
// it starts them, by file name.
type Rendered struct {
	Processes []*Process        `json:"processes"`
	Files     map[string]string `json:"files"`
	// Frontend is frontend.type: dynamo (frontends answer /health) or
	// sglang (routers answer /workers).
	Frontend string `json:"-"`
	// ServedModel is the model name the workers serve and clients must ask
	// for (TensorRT-LLM always serves the checkpoint directory's name).
	ServedModel string `json:"-"`
	// PublicNode serves the public API on port 8000: nginx's or the single
	// frontend's node, or a direct vLLM frontend's aggregate leader.
	PublicNode string `json:"-"`
	// Power is the head-node collector telemetry dcgm-power needs (nil: none).
	Power *PowerTelemetry `json:"-"`
}

//go:embed nginx.conf.tmpl
var nginxConfText string

var nginxConfTmpl = template.Must(template.New("nginx.conf").Parse(nginxConfText))

// nginxConf renders nginx.conf for nginx on the head in front of the
// frontends (srt-slurm FrontendStageMixin._generate_nginx_config).
func nginxConf(s *spec, hosts []string, backendPort, listenPort int) (string, error) {
	var sb strings.Builder
	err := nginxConfTmpl.Execute(&sb, struct {
		RaiseUlimit, SessionAffinity bool
		SessionKey, KeepaliveTimeout string
		Hosts                        []string
		BackendPort, ListenPort      int
	}{
		RaiseUlimit: s.Frontend.NginxRaiseUlimit, SessionAffinity: s.Frontend.NginxSessionAffinity,
		SessionKey:       "$http_" + strings.ReplaceAll(strings.ToLower(s.Frontend.NginxSessionAffinityHeader), "-", "_"),
		KeepaliveTimeout: s.Frontend.NginxKeepaliveTimeout, Hosts: hosts, BackendPort: backendPort, ListenPort: listenPort,
	})
	if err != nil {
		return "", fmt.Errorf("nginx.conf: %v", err)
	}
	// Jinja drops the template's final newline; so do we.
	return strings.TrimSuffix(sb.String(), "\n"), nil
}

// Preflight renders a recipe as a launch would, on placeholder nodes of the
// allocation it needs, so what the launcher refuses (a feature it does not
// render, a framework InferenceX has no synthetic-acceptance injector for)
// is known before any node is requested: the eval render and, with al > 0,
// the perf render. modelName names the checkpoint directory.
func Preflight(r *config.Recipe, gpusPerNode int, modelName string, al float64) error {
	fp, err := r.Footprint(gpusPerNode)
	if err != nil {
		return err
	}
	opt := Options{Paths: PlaceholderPaths(modelName), JobID: "4242"}
	alloc := PlaceholderAllocation(r, fp.Nodes)
	if _, err := Render(r, alloc, opt); err != nil {
		return err
	}
	if al > 0 {
		opt.SyntheticAL = al
		if _, err := Render(r, alloc, opt); err != nil {
			return fmt.Errorf("perf render (golden AL %g): %w", al, err)
		}
	}
	return nil
}

// Write prints the processes (role, output, nodes, image, env, command)
// and the files of recipe as `starter engine render` shows them.
func (rendered *Rendered) Write(w io.Writer, recipe string) {
	procs := rendered.Processes
	fmt.Fprintf(w, "recipe %s: %d processes\n", recipe, len(procs))
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
	names := make([]string, 0, len(rendered.Files))
	for name := range rendered.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "\nfile %s (written to the log directory before launch):\n%s", name, rendered.Files[name])
	}
}
