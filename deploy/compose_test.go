package deploy

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/plan"
	"github.com/sweepflow/sweepflow/temporalx"
	"github.com/sweepflow/sweepflow/worker/workers"
)

const (
	healthy   = "service_healthy"
	completed = "service_completed_successfully"
)

func TestInterpolate(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SET": "v", "EMPTY": ""}
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "a $$b c", want: "a $b c"},
		{in: "$${x%%=*}", want: "${x%%=*}"},
		{in: "${SET}", want: "v"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${EMPTY-d}", want: ""},
		{in: "${SET:-d}:7233", want: "v:7233"},
		{in: "for db in x; do echo $db; done", err: "unbraced variable"},
		{in: "${UNCLOSED", err: "bad substitution"},
		{in: "cost: 5$", err: "bad substitution"},
	}
	for _, tt := range tests {
		got, err := interpolate(tt.in, env)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestLoadComposeRejectsMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, err string
	}{
		{"misspelt key", "services:\n  a:\n    image: x:1\n    depend_on: {b: {condition: service_healthy}}\n", "field depend_on not found"},
		{"shell variable not escaped", "services:\n  a:\n    image: x:1\n    command: [\"echo $HOME\"]\n", "unbraced variable"},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "compose.yml")
		require.NoError(t, os.WriteFile(p, []byte(tt.yaml), 0o644))
		_, err := loadCompose(p, nil)
		assert.ErrorContains(t, err, tt.err, tt.name)
	}
}

// The stack: the samples-server postgres layout plus the worker.
func TestComposeServices(t *testing.T) {
	t.Parallel()
	cf := stackCompose(t)
	tests := []struct {
		name      string
		image     string // "" when built
		dependsOn map[string]string
		ports     []string
		health    bool
	}{
		{name: "postgresql", image: "postgres:16", health: true, ports: []string{"127.0.0.1:5432:5432"}},
		{name: "temporal-admin-tools", image: "temporalio/admin-tools:1.29.1-tctl-1.18.4-cli-1.5.0",
			dependsOn: map[string]string{"postgresql": healthy}},
		{name: "temporal", image: "temporalio/server:1.29.1", health: true,
			dependsOn: map[string]string{"temporal-admin-tools": completed}, ports: []string{"7233:7233"}},
		{name: "temporal-create-namespace", image: "temporalio/admin-tools:1.29.1-tctl-1.18.4-cli-1.5.0",
			dependsOn: map[string]string{"temporal": healthy}},
		{name: "temporal-ui", image: "temporalio/ui:2.42.1",
			dependsOn: map[string]string{"temporal": healthy}, ports: []string{"127.0.0.1:8080:8080"}},
		{name: "node", image: "sweepflow-worker:local", health: true},
		{name: "worker", image: "sweepflow-worker:local",
			dependsOn: map[string]string{"temporal-create-namespace": completed, "node": healthy}},
		{name: "worker-2", image: "sweepflow-worker:local",
			dependsOn: map[string]string{"temporal-create-namespace": completed, "node": healthy}},
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
		svc, ok := cf.Services[tt.name]
		if !assert.True(t, ok, "service %s missing", tt.name) {
			continue
		}
		assert.Equal(t, tt.image, svc.Image, tt.name)
		deps := map[string]string{}
		for d, c := range svc.DependsOn {
			deps[d] = c.Condition
		}
		if tt.dependsOn == nil {
			tt.dependsOn = map[string]string{}
		}
		assert.Equal(t, tt.dependsOn, deps, "%s depends_on", tt.name)
		assert.Equal(t, tt.ports, svc.Ports, "%s ports", tt.name)
		assert.Equal(t, tt.health, svc.Healthcheck != nil, "%s healthcheck", tt.name)
	}
	var got []string
	for n := range cf.Services {
		got = append(got, n)
	}
	sort.Strings(got)
	sort.Strings(names)
	assert.Equal(t, names, got, "services")
}

// Rules every service must follow, whatever it is.
func TestComposeInvariants(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	cf := stackCompose(t)
	tagged := regexp.MustCompile(`^[a-z0-9./_-]+:[A-Za-z0-9._-]+$`)
	for name, svc := range cf.Services {
		// Every service has an image with a pinned tag, or is built from a
		// Dockerfile that exists.
		if svc.Build != nil {
			df := svc.Build.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			assert.FileExists(t, filepath.Join(root, svc.Build.Context, df), "%s build", name)
		} else {
			assert.Regexp(t, tagged, svc.Image, "%s: image needs an explicit tag", name)
			assert.NotContains(t, svc.Image, ":latest", name)
		}
		for dep, c := range svc.DependsOn {
			target, ok := cf.Services[dep]
			if !assert.True(t, ok, "%s depends on unknown service %s", name, dep) {
				continue
			}
			switch c.Condition {
			case healthy:
				assert.NotNil(t, target.Healthcheck, "%s waits for %s to be healthy but it has no healthcheck", name, dep)
			case completed:
				// A one-shot job that restarts never counts as completed.
				assert.Equal(t, "no", target.Restart, "%s waits for %s to complete", name, dep)
			default:
				t.Errorf("%s: depends_on %s: condition %q (want %s or %s)", name, dep, c.Condition, healthy, completed)
			}
		}
		for _, v := range svc.Volumes {
			src := strings.SplitN(v, ":", 2)[0]
			if !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, ".") {
				assert.Contains(t, cf.Volumes, src, "%s mounts undeclared volume %s", name, src)
			}
		}
	}
	assertAcyclic(t, cf)

	// One Temporal release across the server and its admin tools: the
	// schema the job installs is the one the server expects.
	server := strings.SplitN(cf.Services["temporal"].Image, ":", 2)[1]
	for _, n := range []string{"temporal-admin-tools", "temporal-create-namespace"} {
		tools := strings.SplitN(cf.Services[n].Image, ":", 2)[1]
		assert.True(t, tools == server || strings.HasPrefix(tools, server+"-"), "%s runs admin-tools %s for server %s", n, tools, server)
	}
}

func assertAcyclic(t *testing.T, cf *composeFile) {
	t.Helper()
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, path []string)
	visit = func(n string, path []string) {
		switch state[n] {
		case 1:
			t.Errorf("depends_on cycle: %s -> %s", strings.Join(path, " -> "), n)
			return
		case 2:
			return
		}
		state[n] = 1
		for d := range cf.Services[n].DependsOn {
			visit(d, append(path, n))
		}
		state[n] = 2
	}
	for n := range cf.Services {
		visit(n, nil)
	}
}

// Host ports and image versions can be overridden from the environment.
func TestComposeOverrides(t *testing.T) {
	t.Parallel()
	cf, err := loadCompose(filepath.Join(repoRoot(t), "docker-compose.yml"), map[string]string{
		"SWEEPFLOW_TEMPORAL_PORT": "17233", "SWEEPFLOW_UI_PORT": "18080",
		"TEMPORAL_VERSION": "1.31.0", "SWEEPFLOW_GSM8K_DIR": "/srv/gsm8k",
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"17233:7233"}, cf.Services["temporal"].Ports)
	assert.Equal(t, []string{"127.0.0.1:18080:8080"}, cf.Services["temporal-ui"].Ports)
	assert.Equal(t, "temporalio/server:1.31.0", cf.Services["temporal"].Image)
	assert.Contains(t, cf.Services["worker"].Volumes, "/srv/gsm8k:/gsm8k:ro")
}

// The schema job and the server agree on the database, and the job installs
// both schemas the way samples-server's setup-postgres.sh does.
func TestComposeSchemaJob(t *testing.T) {
	t.Parallel()
	cf := stackCompose(t)
	pg, job, srv := cf.Services["postgresql"], cf.Services["temporal-admin-tools"], cf.Services["temporal"]
	assert.Equal(t, "postgres12", job.Environment["SQL_PLUGIN"])
	assert.Equal(t, "postgres12", srv.Environment["DB"])
	assert.Contains(t, cf.Services, job.Environment["SQL_HOST"])
	assert.Contains(t, cf.Services, srv.Environment["POSTGRES_SEEDS"])
	for _, v := range []string{job.Environment["SQL_USER"], srv.Environment["POSTGRES_USER"]} {
		assert.Equal(t, pg.Environment["POSTGRES_USER"], v)
	}
	for _, v := range []string{job.Environment["SQL_PASSWORD"], srv.Environment["POSTGRES_PWD"]} {
		assert.Equal(t, pg.Environment["POSTGRES_PASSWORD"], v)
	}
	assert.Equal(t, "5432", job.Environment["SQL_PORT"])
	assert.Equal(t, "5432", srv.Environment["DB_PORT"])
	assert.Equal(t, "0.0.0.0", srv.Environment["BIND_ON_IP"])

	s := script(t, job)
	for db, dir := range map[string]string{"temporal": "temporal", "temporal_visibility": "visibility"} {
		assert.Contains(t, s, "temporal-sql-tool --db "+db+" setup-schema -v 0.0\n")
		assert.Contains(t, s, "temporal-sql-tool --db "+db+" update-schema -d /etc/temporal/schema/postgresql/v12/"+dir+"/versioned\n")
	}
	// sweepflow's ledger lives in the same PostgreSQL.
	assert.Contains(t, s, "for db in temporal temporal_visibility sweepflow; do")
	assert.Contains(t, s, `create-database`)
}

// The namespace job registers exactly the search attributes the workflows
// set (the dev server gets the same list as flags).
func TestComposeSearchAttributes(t *testing.T) {
	t.Parallel()
	s := script(t, stackCompose(t).Services["temporal-create-namespace"])
	m := regexp.MustCompile(`(?m)^\s*for sa in ([^;]+); do$`).FindStringSubmatch(s)
	require.NotNil(t, m, "no `for sa in ...; do` line in the namespace script")
	got := map[string]string{}
	for _, f := range strings.Fields(m[1]) {
		name, typ, ok := strings.Cut(f, "=")
		require.True(t, ok, f)
		got[name] = typ
	}
	assert.Equal(t, temporalx.SearchAttributeTypes(), got)
}

// The worker's paths inside the container are the paths a plan made with
// the same SWEEPFLOW_DATA_DIR names: the checkpoint the entrypoint writes is
// the cluster profile's model source, on a volume.
func TestComposeWorkerMatchesClusterProfile(t *testing.T) {
	root := repoRoot(t)
	w := stackCompose(t).Services["worker"]
	dataDir := w.Environment["SWEEPFLOW_DATA_DIR"]
	require.NotEmpty(t, dataDir)
	assert.Equal(t, dataDir, w.Environment["SWEEPFLOW_HOME"])
	assert.Contains(t, w.Volumes, "sweepflow:"+dataDir, "the data dir must be a volume")
	assert.Contains(t, w.Volumes, "gsm8k:/gsm8k:ro", "GSM8K mount (the entrypoint's default SWEEPFLOW_GSM8K_MOUNT)")

	// The command's flags are the worker's, and its cluster profile exists
	// at the same path relative to /app as to the repository root.
	var cfg workers.Config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg.Bind(fs)
	require.NoError(t, fs.Parse(w.Command), "worker command %v", w.Command)
	require.Empty(t, fs.Args())
	assert.Equal(t, "configs/clusters/local-sim.yaml", cfg.ClusterFile)

	t.Setenv("SWEEPFLOW_DATA_DIR", dataDir)
	cl, err := config.LoadCluster(filepath.Join(root, cfg.ClusterFile))
	require.NoError(t, err)
	assert.Equal(t, dataDir+"/local-sim/shared", cl.SharedRoot)
	assert.Equal(t, dataDir+"/local-sim/nvme", cl.NodeLocalRoot)

	// The compose test's sweep: one point whose checkpoint is the one the
	// entrypoint writes.
	sw, err := config.LoadSweep(filepath.Join(root, "deploy", "composetest", "testdata", "one-point-sweep.yaml"))
	require.NoError(t, err)
	p, err := plan.Build(plan.Options{Sweep: sw, Cluster: cl, LauncherVersion: "test"})
	require.NoError(t, err)
	require.Len(t, p.Points, 1)
	pt := p.Points[0]
	require.NotNil(t, pt.Recipe)
	m, ok := cl.Models[pt.Recipe.Model.Path]
	require.True(t, ok, "recipe model %q not in the cluster profile", pt.Recipe.Model.Path)
	// The node service (the workers' shared login node) writes it.
	assert.Equal(t, stackCompose(t).Services["node"].Environment["SWEEPFLOW_SIM_CHECKPOINT"], m.Source)
	assert.True(t, strings.HasPrefix(m.Path, dataDir+"/"), "node-local checkpoint %s outside the data volume", m.Path)
	assert.False(t, pt.Eval, "the compose test's point runs no eval (no GSM8K download needed)")
}

// The image has what the compose file runs: the entrypoint and the configs
// are copied, the binaries are built, GSM8K is left to the worker.
func TestDockerfileAndEntrypoint(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	copied := map[string]string{}
	for _, line := range strings.Split(string(df), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "COPY" {
			copied[f[1]] = f[2]
			if f[1] != "." {
				assert.True(t, exists(filepath.Join(root, f[1])), "Dockerfile copies %s, which does not exist", f[1])
			}
		}
	}
	assert.Equal(t, "/app/bin/", copied["deploy/worker-entrypoint.sh"])
	assert.Equal(t, "/app/configs/", copied["configs/"])
	assert.Contains(t, string(df), `ENTRYPOINT ["/bin/sh", "/app/bin/worker-entrypoint.sh"]`)
	assert.Contains(t, string(df), "go build -trimpath -o /out/ ./starter ./worker")
	assert.Contains(t, string(df), "PATH=/app/bin:$PATH")

	// GSM8K downloads belong to the worker, which verifies them; the
	// entrypoint only passes a mounted copy through.
	ep, err := os.ReadFile(filepath.Join(root, "deploy", "worker-entrypoint.sh"))
	require.NoError(t, err)
	assert.NotContains(t, string(ep), "curl", "the entrypoint must not download unverified splits")
	assert.Regexp(t, regexp.MustCompile(`exec worker --gsm8k-dir "\$mount" "\$@"`), string(ep))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
