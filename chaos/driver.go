package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/activities"
	"github.com/sweepflow/sweepflow/cluster/slurm"
	"github.com/sweepflow/sweepflow/workflows"
)

// Driver injects a chaos run's faults from outside the worker while the
// sweep runs: it watches each fault's point workflow and, once an attempt
// of the fault's stage runs there, sets a node of the point's holder job
// DOWN, SIGKILLs the worker and starts it again, or stops the Temporal
// server and starts it again.
type Driver struct {
	Client  client.Client
	SweepID string
	// Points are the sweep's point IDs: a worker kill or server restart
	// lists the attempts in flight on all of them.
	Points []string
	Faults []Fault
	// Worker and Server are the processes a worker kill and a server
	// restart act on (nil: such a fault misses).
	Worker, Server *Process
	// ServerDown is how long the server stays down: longer than the
	// heartbeat timeout, so every attempt in flight is lost, not only
	// those that happened to beat during the gap.
	ServerDown time.Duration
	// NodeDownFor is how long a failed node stays DOWN before the run
	// resumes it (the point has left it by then).
	NodeDownFor time.Duration
	// Poll is how often the point workflows are looked at.
	Poll time.Duration
	// Log gets one line per fault as it lands (nil: none).
	Log func(string)
}

// Attempt is one stage attempt a fault hit.
type Attempt struct {
	Point   string `json:"point"`
	Stage   string `json:"stage"`
	Attempt int    `json:"attempt"`
}

// Injection is one fault of the run as it landed.
type Injection struct {
	Fault
	// At is when the Driver injected it (zero for a fault the point's own
	// attempt carries out).
	At time.Time `json:"at,omitempty"`
	// Attempt is the attempt of the fault's stage it hit.
	Attempt int `json:"attempt,omitempty"`
	// Hit lists every stage attempt in flight when a worker kill or a
	// server restart landed: each is lost.
	Hit []Attempt `json:"hit,omitempty"`
	// Landed is when a worker kill's worker or a restart's server was
	// down: an attempt that started between the Hit snapshot and then (the
	// snapshot reads every point in turn) is lost to it too.
	Landed time.Time `json:"landed,omitempty"`
	// Node is the node a node failure set DOWN.
	Node string `json:"node,omitempty"`
	// Missed says why an injected fault never landed.
	Missed string `json:"missed,omitempty"`
}

// activityOf is the stage activity of each stage.
func activityOf(stage string) string {
	for name, s := range activities.StageActivities {
		if s == stage {
			return name
		}
	}
	return ""
}

func (d *Driver) log(format string, args ...any) {
	if d.Log != nil {
		d.Log(fmt.Sprintf(format, args...))
	}
}

// Run injects the external faults until the sweep workflow closes (or ctx
// ends) and returns every fault of the run, the ones its points carry out
// included, in drawn order.
func (d *Driver) Run(ctx context.Context) ([]Injection, error) {
	poll := d.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	out := make([]Injection, len(d.Faults))
	var pending []int
	for i, f := range d.Faults {
		out[i].Fault = f
		if f.Kind.External() {
			pending = append(pending, i)
		}
	}
	type downNode struct {
		node string
		at   time.Time
	}
	var down []downNode
	resume := func(all bool) {
		down = slices.DeleteFunc(down, func(n downNode) bool {
			if !all && time.Since(n.at) < d.NodeDownFor {
				return false
			}
			if err := exec.Command("scontrol", "update", "nodename="+n.node, "state=resume").Run(); err != nil {
				d.log("chaos: resuming node %s failed: %v", n.node, err)
			}
			return true
		})
	}
	defer resume(true)
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if d.closed(ctx, d.SweepID) {
			break
		}
		resume(false)
		pending = slices.DeleteFunc(pending, func(i int) bool {
			f := &out[i]
			wid := workflows.PointWorkflowID(d.SweepID, f.Point)
			att, running, closed := d.stageRunning(ctx, wid, activityOf(f.Stage))
			if closed {
				f.Missed = "the point ended before " + f.Stage + " ran while the run watched"
				d.log("chaos: %s missed: %s", f.Fault, f.Missed)
				return true
			}
			if !running {
				return false
			}
			f.At, f.Attempt = time.Now(), att
			if err := d.inject(ctx, f); err != nil {
				f.Missed = err.Error()
				d.log("chaos: %s missed: %s", f.Fault, f.Missed)
				return true
			}
			if f.Kind == NodeFailure {
				down = append(down, downNode{f.Node, f.At})
			}
			return true
		})
		time.Sleep(poll)
	}
	for _, i := range pending {
		out[i].Missed = "the sweep ended before " + out[i].Stage + " ran on the point"
	}
	if len(down) > 0 {
		// The point re-allocates without the node; keep the node down
		// until it has, then let it back in.
		time.Sleep(max(0, d.NodeDownFor-time.Since(down[len(down)-1].at)))
	}
	return out, nil
}

// inject makes one external fault land.
func (d *Driver) inject(ctx context.Context, f *Injection) error {
	switch f.Kind {
	case NodeFailure:
		node, err := jobNode(d.SweepID, f.Point)
		if err != nil {
			return err
		}
		if out, err := exec.Command("scontrol", "update", "nodename="+node, "state=down", "reason=sweepflow-chaos").CombinedOutput(); err != nil {
			return fmt.Errorf("scontrol update nodename=%s state=down: %v: %s", node, err, strings.TrimSpace(string(out)))
		}
		f.Node = node
		d.log("chaos: %s: node %s set DOWN during attempt %d", f.Fault, node, f.Attempt)
	case WorkerKill:
		if d.Worker == nil {
			return fmt.Errorf("no worker to kill (--chaos-worker)")
		}
		f.Hit = d.inFlight(ctx)
		if err := d.Worker.Stop(syscall.SIGKILL, 0); err != nil {
			return err
		}
		f.Landed = time.Now()
		if err := d.Worker.Start(); err != nil {
			return err
		}
		d.log("chaos: %s: worker SIGKILLed during attempt %d, started again (pid %d); attempts in flight: %s", f.Fault, f.Attempt, d.Worker.Pid(), hits(f.Hit))
	case ServerRestart:
		if d.Server == nil {
			return fmt.Errorf("no server to restart (--chaos-server)")
		}
		f.Hit = d.inFlight(ctx)
		if err := d.Server.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
			return err
		}
		f.Landed = time.Now()
		time.Sleep(d.ServerDown)
		if err := d.Server.Start(); err != nil {
			return err
		}
		if err := d.waitServer(ctx); err != nil {
			return err
		}
		d.log("chaos: %s: server down %s during attempt %d, started again (pid %d); attempts in flight: %s", f.Fault, d.ServerDown, f.Attempt, d.Server.Pid(), hits(f.Hit))
	}
	return nil
}

func hits(as []Attempt) string {
	if len(as) == 0 {
		return "none"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s %s #%d", a.Point, a.Stage, a.Attempt)
	}
	return strings.Join(parts, ", ")
}

// closed reports whether a workflow is closed (false while it cannot be
// read, e.g. during a server restart).
func (d *Driver) closed(ctx context.Context, wid string) bool {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return false
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// stageRunning reports the running attempt of the activity in a point
// workflow, or that the workflow closed.
func (d *Driver) stageRunning(ctx context.Context, wid, activity string) (attempt int, running, closed bool) {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return 0, false, false
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return 0, false, true
	}
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() == activity && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return int(pa.GetAttempt()), true, false
		}
	}
	return 0, false, false
}

// inFlight lists the stage attempts running on the sweep's points.
func (d *Driver) inFlight(ctx context.Context) []Attempt {
	var out []Attempt
	for _, p := range d.Points {
		desc, err := d.Client.DescribeWorkflowExecution(ctx, workflows.PointWorkflowID(d.SweepID, p), "")
		if err != nil {
			continue
		}
		for _, pa := range desc.GetPendingActivities() {
			stage, ok := activities.StageActivities[pa.GetActivityType().GetName()]
			if ok && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				out = append(out, Attempt{Point: p, Stage: stage, Attempt: int(pa.GetAttempt())})
			}
		}
	}
	return out
}

// waitServer waits until the restarted server answers.
func (d *Driver) waitServer(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := d.Client.CheckHealth(cctx, &client.CheckHealthRequest{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the restarted server did not answer within 90 s: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// jobNode is the last node of the point's running holder job (Slurm).
func jobNode(sweepID, pointID string) (string, error) {
	out, err := exec.Command("squeue", "-h", "-t", "RUNNING", "-o", "%j|%N").Output()
	if err != nil {
		return "", fmt.Errorf("squeue: %v", err)
	}
	suffix := slurm.JobName("", sweepID, pointID)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, nodes, ok := strings.Cut(strings.TrimSpace(l), "|")
		if !ok || !strings.HasSuffix(name, suffix) {
			continue
		}
		hosts, err := exec.Command("scontrol", "show", "hostnames", nodes).Output()
		if err != nil {
			return "", fmt.Errorf("scontrol show hostnames %s: %v", nodes, err)
		}
		if f := strings.Fields(string(hosts)); len(f) > 0 {
			return f[len(f)-1], nil
		}
	}
	return "", fmt.Errorf("no running Slurm job of point %s", pointID)
}
