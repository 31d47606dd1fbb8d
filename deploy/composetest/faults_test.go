package composetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// recoveryBound is the longest a stage may stay without a running attempt
// after the worker running it is killed (issue 14).
const recoveryBound = 10 * time.Second

// stageActivities maps the stages whose worker the matrix kills to their
// activity types.
var stageActivities = []struct{ stage, activity string }{
	{"allocate", "Allocate"}, {"checkpoint", "StageCheckpoint"}, {"bringup", "BringUp"},
	{"warmup", "Warmup"}, {"perf", "Perf"}, {"eval", "Eval"}, {"upload", "Upload"},
}

// figure is one row of the fault matrix's table.
type figure struct {
	fault    string
	stage    string
	recovery time.Duration // <0: not measured
	outcome  string
}

// docker runs the docker CLI and returns its trimmed output.
func docker(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// The fault matrix: the seed sweep on the compose stack while the test kills
// the worker running each stage (a replacement is started), restarts the
// Temporal server and PostgreSQL, cuts the workers' network for 30 s, and
// the simulated engines answer with a 503 storm and cut streams. Every
// point completes (a point that waits for an operator shows why and is
// retried), the ledger holds exactly one row per point identity and stage,
// nothing is left running, and each killed stage runs again on another
// worker within 10 s. It prints a figures table.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault matrix takes minutes")
	}
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx := context.Background()
	if err := dockerEngine(ctx); err != nil {
		missing(t, fmt.Sprintf("no Docker engine: %v", err))
	}
	const engineFlags = "--error-burst-start 20 --error-burst-len 40 --cut-stream-every 37"
	su := upStack(t, ctx, "faults", map[string]string{
		// Every stage lasts at least 5 s, so a worker can be killed in the
		// middle of each (simulated stages otherwise take milliseconds).
		"SWEEPFLOW_SIM_STAGE_TIME": "5s",
		// Every engine: requests 20..59 get 503s, every 37th stream is cut.
		"SWEEPFLOW_SIM_ENGINE_FLAGS": engineFlags,
	})
	tc := dialStack(t, su)
	defer tc.Close()

	ids := map[string]string{}
	for _, svc := range []string{"worker", "worker-2", "node", "temporal", "postgresql"} {
		c, err := su.stack.ServiceContainer(ctx, svc)
		require.NoError(t, err, svc)
		ids[svc] = c.GetContainerID()
	}
	d := &driver{t: t, ctx: ctx, tc: tc, ids: ids, killed: map[string]bool{}, su: su}

	const id = "fault-seed"
	out, err := su.starter("sweep", "start", "--sweep", "configs/sweeps/dsv4-gb200-agentx.yaml",
		"--cluster", "configs/clusters/local-sim.yaml", "--id", id, "--fast-retries")
	require.NoError(t, err, out)
	t0 := time.Now()

	var figs []figure
	infra := []string{"temporal", "postgresql", "network"}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "the sweep did not finish in 30 min; worker logs:\n%s", lastLines(su.workerLogs(), 80))
		if done, err := d.sweepClosed(id); err == nil && done {
			break
		}
		running, err := d.running()
		if err != nil {
			t.Logf("listing running stages: %v", err)
			time.Sleep(time.Second)
			continue
		}
		injected := false
		// Worker kills first, whichever stage is running now; the infra
		// faults once every stage was hit, or after 4 min at the latest.
		live, _ := d.liveWorkers()
		for _, sa := range stageActivities {
			if d.killed[sa.stage] || len(live) < 2 {
				continue
			}
			if a, ok := pickLive(running, sa.activity, live); ok {
				figs = append(figs, d.killWorker(sa.stage, a))
				injected = true
				break
			}
		}
		if !injected && len(infra) > 0 && (len(d.killed) == len(stageActivities) || time.Since(t0) > 4*time.Minute) {
			if _, ok := pick(running, "Perf", time.Second); ok {
				figs = append(figs, d.infraFault(infra[0], running))
				infra = infra[1:]
				injected = true
			} else if _, ok := pick(running, "Eval", time.Second); ok {
				figs = append(figs, d.infraFault(infra[0], running))
				infra = infra[1:]
				injected = true
			}
		}
		if !injected {
			// A point waiting for an operator: shown with its reason, then
			// retried, as an operator would.
			if d.retryWaiting(su, id) > 0 {
				require.LessOrEqual(t, d.retries, 20, "points keep waiting for an operator after retries; worker logs:\n%s", lastLines(su.workerLogs(), 60))
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	sweepTime := time.Since(t0)

	// Every point completed.
	out, err = su.starter("status", id, "--json")
	require.NoError(t, err, out)
	var st struct {
		Workflow string `json:"workflow_status"`
		Points   []struct {
			Name        string `json:"point_id"`
			Status      string `json:"status"`
			AutoRetries []struct {
				Stage   string `json:"stage"`
				Retries int    `json:"retries"`
				Error   string `json:"error"`
			} `json:"auto_retries"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, "completed", st.Workflow)
	require.Len(t, st.Points, 8)
	autoRetries := 0
	for i, p := range st.Points {
		assert.Equal(t, "completed", p.Status, "point %d %s", i, p.Name)
		for _, a := range p.AutoRetries {
			t.Logf("point %s: %s retried by itself %dx after %s", p.Name, a.Stage, a.Retries, a.Error)
			autoRetries += a.Retries
		}
	}

	// The ledger: exactly one row per point identity and stage.
	psql := func(q string) string {
		out, err := docker(ctx, "exec", "-e", "PGPASSWORD="+su.password, ids["postgresql"], "psql", "-h", "127.0.0.1",
			"-U", "temporal", "-d", "sweepflow", "-At", "-F", " ", "-c", q)
		require.NoError(t, err, q)
		return out
	}
	points := atoi(t, psql(fmt.Sprintf(`SELECT count(*) FROM points WHERE sweep_id = '%s' AND status = 'completed'`, id)))
	assert.Equal(t, 8, points, "completed points in the ledger")
	identities := atoi(t, psql(fmt.Sprintf(`SELECT count(DISTINCT identity) FROM points WHERE sweep_id = '%s'`, id)))
	assert.Equal(t, 8, identities, "point identities")
	for _, q := range []struct {
		what string
		sql  string
		want int
	}{
		{"perf outputs", `SELECT count(*), count(DISTINCT identity) FROM stage_outputs WHERE sweep_id = '%s' AND stage = 'perf'`, 8},
		{"eval outputs", `SELECT count(*), count(DISTINCT identity) FROM stage_outputs WHERE sweep_id = '%s' AND stage = 'eval'`, 4},
		{"perf results", `SELECT count(*), count(DISTINCT identity) FROM perf_results WHERE sweep_id = '%s'`, 8},
		{"eval results", `SELECT count(*), count(DISTINCT identity) FROM eval_results WHERE sweep_id = '%s'`, 4},
	} {
		f := strings.Fields(psql(fmt.Sprintf(q.sql, id)))
		require.Len(t, f, 2, q.what)
		assert.Equal(t, strconv.Itoa(q.want), f[0], "%s: rows", q.what)
		assert.Equal(t, f[0], f[1], "%s: one row per point identity (rows vs identities)", q.what)
	}
	// The engine faults reached the measurements: perf absorbed failed requests.
	failed := atoi(t, psql(fmt.Sprintf(`SELECT coalesce(sum(failed), 0) FROM perf_results WHERE sweep_id = '%s'`, id)))
	assert.Positive(t, failed, "the 503 storm and the cut streams show as failed perf requests")
	figs = append(figs, figure{fault: "engine 503 storm + cut streams (" + engineFlags + ")", stage: "perf, eval",
		recovery: -1, outcome: fmt.Sprintf("completed; %d failed perf requests recorded, evals retried", failed)})

	// Nothing left over: no allocation, no engine process.
	leases, err := docker(ctx, "exec", ids["node"], "cat", "/data/local-cluster/nodes.json")
	require.NoError(t, err)
	var l struct {
		Held map[string][]string `json:"held"`
	}
	require.NoError(t, json.Unmarshal([]byte(leases), &l), leases)
	assert.Empty(t, l.Held, "allocations left over")
	procs, err := docker(ctx, "exec", ids["node"], "sh", "-c",
		`for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]im serve' || true`) // [s]: not this shell's own command line
	require.NoError(t, err)
	assert.Equal(t, "0", procs, "engine processes left over")

	// Every killed stage ran again within the bound.
	for _, f := range figs {
		if strings.HasPrefix(f.fault, "docker kill") {
			assert.GreaterOrEqual(t, f.recovery, time.Duration(0), "%s %s: not measured (%s)", f.fault, f.stage, f.outcome)
			assert.LessOrEqual(t, f.recovery, recoveryBound, "%s %s: %s", f.fault, f.stage, f.outcome)
		}
	}
	for _, sa := range stageActivities {
		assert.True(t, d.killed[sa.stage], "no worker was killed during %s (the stage never ran while both workers were up)", sa.stage)
	}
	assert.Empty(t, infra, "infra faults not injected (no perf/eval ran after the kills)")

	var b strings.Builder
	fmt.Fprintf(&b, "fault matrix: seed sweep %s, 8 points, %s with faults, %d operator retries, %d automatic retries after heartbeat timeouts\n",
		id, sweepTime.Round(time.Second), d.retries, autoRetries)
	fmt.Fprintf(&b, "| fault | stage | recovery s | outcome |\n|---|---|---|---|\n")
	for _, f := range figs {
		rec := "-"
		if f.recovery >= 0 {
			rec = fmt.Sprintf("%.1f", f.recovery.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.fault, f.stage, rec, f.outcome)
	}
	t.Log("\n" + b.String())

	// No container left over once the stack is down.
	su.down(t)
	left, err := docker(ctx, "ps", "-aq", "--filter", "label=com.docker.compose.project="+su.project)
	require.NoError(t, err)
	assert.Empty(t, left, "containers left over")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err, "%q", s)
	return n
}

// dialStack is a Temporal client of the stack with the client certificate.
func dialStack(t *testing.T, su *stackUnderTest) client.Client {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(su.certs, "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	cert, err := tls.LoadX509KeyPair(filepath.Join(su.certs, "client.pem"), filepath.Join(su.certs, "client-key.pem"))
	require.NoError(t, err)
	opts := client.Options{HostPort: su.addr, Namespace: "default"}
	opts.ConnectionOptions.TLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "temporal", MinVersion: tls.VersionTLS12}
	c, err := client.NewLazyClient(opts)
	require.NoError(t, err)
	return c
}

// attempt is a stage attempt running on a worker.
type attempt struct {
	workflowID, runID, activityID, activity, identity string
	attempt                                           int32
	started, beat                                     time.Time
}

type driver struct {
	t      *testing.T
	ctx    context.Context
	tc     client.Client
	ids    map[string]string // compose service -> container id
	killed map[string]bool   // stages whose worker was killed
	su     *stackUnderTest
	// retries counts the points retried after waiting for an operator.
	retries int
	// lastStatus rate-limits retryWaiting's status calls.
	lastStatus time.Time
}

func (d *driver) rpcCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(d.ctx, 10*time.Second)
}

// sweepClosed reports whether the sweep workflow has ended.
func (d *driver) sweepClosed(id string) (bool, error) {
	ctx, cancel := d.rpcCtx()
	defer cancel()
	desc, err := d.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return false, err
	}
	return desc.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// running lists the started stage attempts of every open workflow.
func (d *driver) running() ([]attempt, error) {
	ctx, cancel := d.rpcCtx()
	defer cancel()
	var out []attempt
	var token []byte
	for {
		resp, err := d.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: "ExecutionStatus = 'Running'", NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			desc, err := d.tc.DescribeWorkflowExecution(ctx, e.Execution.WorkflowId, e.Execution.RunId)
			if err != nil {
				continue // closed meanwhile
			}
			for _, pa := range desc.PendingActivities {
				if pa.State != enumspb.PENDING_ACTIVITY_STATE_STARTED || pa.LastStartedTime == nil {
					continue
				}
				out = append(out, attempt{workflowID: e.Execution.WorkflowId, runID: e.Execution.RunId, activityID: pa.ActivityId,
					activity: pa.ActivityType.GetName(), identity: pa.LastWorkerIdentity, attempt: pa.Attempt,
					started: pa.LastStartedTime.AsTime(), beat: pa.GetLastHeartbeatTime().AsTime()})
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out, nil
		}
	}
}

// pick returns a running attempt of the activity type that started at
// least minAge ago (it has heartbeated).
func pick(running []attempt, activity string, minAge time.Duration) (attempt, bool) {
	for _, a := range running {
		if a.activity == activity && time.Since(a.started) >= minAge {
			return a, true
		}
	}
	return attempt{}, false
}

// pickLive returns a running attempt of the activity type on a live worker
// that started at least 1.5 s ago (it has heartbeated).
func pickLive(running []attempt, activity string, live map[string]string) (attempt, bool) {
	for _, a := range running {
		if a.activity != activity || time.Since(a.started) < 1500*time.Millisecond {
			continue
		}
		pid, _, _ := strings.Cut(a.identity, "@")
		if _, ok := live[pid]; ok {
			return a, true
		}
	}
	return attempt{}, false
}

// liveWorkers maps the pid (in the node's process namespace) of each
// running worker to its compose service. The error says why a running
// worker's pid could not be read (the test must run on the Docker host).
func (d *driver) liveWorkers() (map[string]string, error) {
	out := map[string]string{}
	var readErr error
	for _, svc := range []string{"worker", "worker-2"} {
		hostPID, err := docker(d.ctx, "inspect", "-f", "{{.State.Pid}}", d.ids[svc])
		if err != nil || hostPID == "0" {
			continue
		}
		status, err := os.ReadFile("/proc/" + hostPID + "/status")
		if err != nil {
			readErr = fmt.Errorf("reading the worker's process status (the test must run on the Docker host): %w", err)
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" {
				out[f[len(f)-1]] = svc
			}
		}
	}
	return out, readErr
}

// workerOf maps a worker identity (pid@host@, pids of the shared process
// namespace of the node service) to its compose service.
func (d *driver) workerOf(identity string) (string, error) {
	live, err := d.liveWorkers()
	for pid, svc := range live {
		if strings.HasPrefix(identity, pid+"@") {
			return svc, nil
		}
	}
	if err != nil {
		return "", err
	}
	return "", fmt.Errorf("no worker container has identity %q", identity)
}

// ready waits until the service's worker logged "worker ready" since t.
func (d *driver) ready(svc string, since time.Time, limit time.Duration) error {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		logs, _ := docker(d.ctx, "logs", "--since", since.Format(time.RFC3339Nano), d.ids[svc])
		if strings.Contains(logs, "worker ready") {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s: no \"worker ready\" within %s", svc, limit)
}

// killWorker kills the worker running attempt a, waits for the stage's
// next attempt on another worker, then starts a replacement.
func (d *driver) killWorker(stage string, a attempt) figure {
	t := d.t
	f := figure{fault: "docker kill worker", stage: stage, recovery: -1}
	d.killed[stage] = true
	svc, err := d.workerOf(a.identity)
	if err != nil {
		f.outcome = err.Error()
		return f
	}
	f.fault = "docker kill " + svc
	if _, err := docker(d.ctx, "kill", d.ids[svc]); err != nil {
		f.outcome = err.Error()
		return f
	}
	kill := time.Now()
	t.Logf("killed %s during %s of %s (attempt %d, running %.1fs)", svc, stage, a.workflowID, a.attempt, kill.Sub(a.started).Seconds())
	// The next attempt: started after the kill by another worker.
	end := kill.Add(3 * recoveryBound)
	for time.Now().Before(end) {
		next, found, err := d.attemptOf(a)
		if err == nil && found && next.started.After(kill) && next.identity != a.identity {
			f.recovery = next.started.Sub(kill)
			f.outcome = fmt.Sprintf("attempt %d on another worker", next.attempt)
			break
		}
		if err == nil && !found {
			// Completed before we saw it: the history has the last attempt.
			if next, ok := d.lastStarted(a); ok && next.started.After(kill) {
				f.recovery = next.started.Sub(kill)
				f.outcome = fmt.Sprintf("attempt %d on another worker (from history)", next.attempt)
			} else {
				f.outcome = "stage ended without a new attempt"
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if f.outcome == "" {
		f.outcome = "no new attempt within " + (3 * recoveryBound).String()
	}
	// The replacement.
	restart := time.Now()
	if _, err := docker(d.ctx, "start", d.ids[svc]); err != nil {
		f.outcome += "; replacement: " + err.Error()
		return f
	}
	if err := d.ready(svc, restart, 2*time.Minute); err != nil {
		f.outcome += "; " + err.Error()
		return f
	}
	f.outcome += fmt.Sprintf("; replacement ready in %.1fs", time.Since(restart).Seconds())
	return f
}

// attemptOf finds the pending activity a is an attempt of.
func (d *driver) attemptOf(a attempt) (attempt, bool, error) {
	ctx, cancel := d.rpcCtx()
	defer cancel()
	desc, err := d.tc.DescribeWorkflowExecution(ctx, a.workflowID, a.runID)
	if err != nil {
		return attempt{}, false, err
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityId != a.activityID {
			continue
		}
		n := a
		n.identity, n.attempt = pa.LastWorkerIdentity, pa.Attempt
		if pa.LastStartedTime != nil && pa.State == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			n.started = pa.LastStartedTime.AsTime()
		}
		return n, true, nil
	}
	return attempt{}, false, nil
}

// lastStarted reads the started event of a's activity from the history.
func (d *driver) lastStarted(a attempt) (attempt, bool) {
	ctx, cancel := d.rpcCtx()
	defer cancel()
	it := d.tc.GetWorkflowHistory(ctx, a.workflowID, a.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var scheduled int64 = -1
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return attempt{}, false
		}
		if s := ev.GetActivityTaskScheduledEventAttributes(); s != nil && s.ActivityId == a.activityID {
			scheduled = ev.EventId
		}
		if s := ev.GetActivityTaskStartedEventAttributes(); s != nil && s.ScheduledEventId == scheduled {
			n := a
			n.identity, n.attempt, n.started = s.Identity, s.Attempt, ev.EventTime.AsTime()
			return n, true
		}
	}
	return attempt{}, false
}

// infraFault restarts the Temporal server or PostgreSQL, or cuts the node's
// (both workers') network for 30 s, while stages run; recovery is the time
// from the end of the fault until a stage attempt starts again.
func (d *driver) infraFault(which string, during []attempt) figure {
	t := d.t
	stage := ""
	for _, a := range during {
		for _, sa := range stageActivities {
			if sa.activity == a.activity && !slices.Contains(strings.Split(stage, ", "), sa.stage) {
				if stage != "" {
					stage += ", "
				}
				stage += sa.stage
			}
		}
	}
	f := figure{stage: stage, recovery: -1}
	var err error
	switch which {
	case "temporal":
		f.fault = "docker restart temporal"
		_, err = docker(d.ctx, "restart", d.ids["temporal"])
	case "postgresql":
		f.fault = "docker restart postgresql"
		_, err = docker(d.ctx, "restart", d.ids["postgresql"])
	case "network":
		f.fault = "docker network disconnect node (both workers) 30 s"
		var nets string
		nets, err = docker(d.ctx, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", d.ids["node"])
		if err == nil {
			net := strings.Fields(nets)[0]
			if _, err = docker(d.ctx, "network", "disconnect", net, d.ids["node"]); err == nil {
				time.Sleep(30 * time.Second)
				_, err = docker(d.ctx, "network", "connect", net, d.ids["node"])
			}
		}
	}
	back := time.Now()
	t.Logf("%s during %s: done (%v)", f.fault, stage, err)
	if err != nil {
		f.outcome = err.Error()
		return f
	}
	// Recovery: the server records a heartbeat or an attempt start of a
	// stage after the fault ended (workers and server talk again).
	end := back.Add(5 * time.Minute)
	for time.Now().Before(end) {
		running, err := d.running()
		if err == nil {
			for _, a := range running {
				if at := a.beat; a.started.After(back) || at.After(back) {
					if a.started.After(back) && (at.Before(back) || a.started.Before(at)) {
						at = a.started
					}
					f.recovery = at.Sub(back)
					f.outcome = "stages beat again (" + a.activity + ")"
					return f
				}
			}
		}
		if done, err := d.sweepClosed("fault-seed"); err == nil && done {
			f.outcome = "sweep ended"
			return f
		}
		d.retryWaiting(d.su, "fault-seed")
		time.Sleep(300 * time.Millisecond)
	}
	f.outcome = "no stage beat within 5 min"
	return f
}

// retryWaiting shows the points waiting for an operator with their reason
// and retries them; it returns how many it retried.
func (d *driver) retryWaiting(su *stackUnderTest, id string) int {
	if time.Since(d.lastStatus) < 10*time.Second {
		return 0
	}
	d.lastStatus = time.Now()
	out, err := su.starter("status", id, "--json")
	if err != nil {
		return 0
	}
	var st struct {
		Points []struct {
			Name      string `json:"point_id"`
			Status    string `json:"status"`
			Stage     string `json:"stage"`
			LastError string `json:"last_error"`
		} `json:"points"`
	}
	if json.Unmarshal([]byte(out), &st) != nil {
		return 0
	}
	n := 0
	for _, p := range st.Points {
		if p.Status == "awaiting-operator" {
			assert.NotEmpty(d.t, p.LastError, "point %s waits for an operator without a reason", p.Name)
			d.t.Logf("point %s waits for an operator at %s: %s", p.Name, p.Stage, p.LastError)
			n++
		}
	}
	if n > 0 {
		d.retries += n
		out, err := su.starter("retry", "--sweep", id, "--reason", "fault matrix: retry after the fault")
		d.t.Logf("retry --sweep %s: %v %s", id, err, lastLines(out, 5))
	}
	return n
}
