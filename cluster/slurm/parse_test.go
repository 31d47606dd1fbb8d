package slurm

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/failure"
)

func TestParseSbatch(t *testing.T) {
	for _, tc := range []struct {
		name, out, id string
		bad           bool
	}{
		{name: "parsable", out: "4711\n", id: "4711"},
		{name: "parsable with cluster", out: "4711;gb200\n", id: "4711"},
		{name: "default", out: "Submitted batch job 18582\n", id: "18582"},
		{name: "warning first", out: "sbatch: warning: can't honor --ntasks-per-node set to 1\n4712\n", id: "4712"},
		{name: "empty", out: "", bad: true},
		{name: "error text", out: "sbatch: error: Batch job submission failed: Invalid partition name specified\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ParseSbatch(tc.out)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.id, id)
		})
	}
}

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want JobState
		bad  bool
	}{
		{in: "RUNNING", want: StateRunning},
		{in: "R", want: StateRunning},
		{in: "PD", want: StatePending},
		{in: "CANCELLED by 0", want: StateCancelled},
		{in: "CANCELLED+", want: StateCancelled},
		{in: "NODE_FAIL", want: StateNodeFail},
		{in: "OOM", want: StateOOM},
		{in: "OUT_OF_MEMORY", want: StateOOM},
		{in: " completed ", want: StateCompleted},
		{in: "", bad: true},
		{in: "EXPLODED", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseState(tc.in)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestStateError(t *testing.T) {
	for _, tc := range []struct {
		state  JobState
		reason string
		want   error // nil: alive
		class  failure.Class
	}{
		{StateRunning, "NodeDown", nil, ""},
		{StateConfiguring, "NodeDown", nil, ""},
		{StateNodeFail, "NodeDown", cluster.ErrAllocationLost, failure.NodeFail},
		{StateBootFail, "NodeDown", cluster.ErrAllocationLost, failure.NodeFail},
		{StatePreempted, "NodeDown", cluster.ErrAllocationLost, failure.Preempted},
		{StateCancelled, "NodeDown", cluster.ErrAllocationLost, failure.Cancelled},
		{StateFailed, "NonZeroExitCode", cluster.ErrAllocationLost, failure.JobLost},
		{StateCompleted, "None", cluster.ErrAllocationLost, failure.JobLost},
		// Still ending a job whose node failed (the fleet chaos run's
		// node-failure fault, seed 35): a node failure, not a lost job.
		{StateCompleting, "NodeDown", cluster.ErrAllocationLost, failure.NodeFail},
		{StateFailed, "NodeDown", cluster.ErrAllocationLost, failure.NodeFail},
		{StatePending, "NodeDown", cluster.ErrAllocationLost, failure.JobLost}, // requeued after holding nodes
		{StateOOM, "NodeDown", cluster.ErrOOM, failure.HostOOM},
		{StateTimeout, "NodeDown", cluster.ErrBadConfig, failure.SlurmTimeout},
	} {
		t.Run(string(tc.state)+"/"+tc.reason, func(t *testing.T) {
			err := StateError("12", tc.state, tc.reason)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), "slurm job 12 is "+string(tc.state))
			f, ok := failure.Of(err)
			require.True(t, ok, "no failure class on %v", err)
			assert.Equal(t, tc.class, f.Class)
			want := "slurm job 12 is " + string(tc.state)
			if tc.reason != "None" {
				want += " (" + tc.reason + ")"
			}
			assert.Equal(t, want, f.Excerpt)
			for _, other := range []error{cluster.ErrAllocationLost, cluster.ErrOOM, cluster.ErrBadConfig} {
				if other != tc.want {
					assert.False(t, errors.Is(err, other), "%v must not also be %v", err, other)
				}
			}
		})
	}
}

func TestParseSqueue(t *testing.T) {
	out := "12|RUNNING|None|gb200-[01-12]|sweepflow.s1.p1\n13|PENDING|Resources|(null)|sweepflow.s1.p2\n14|NODE_FAIL|NodeDown|gb200-[01-16]|x|y\n"
	got, err := ParseSqueue(out)
	require.NoError(t, err)
	require.Equal(t, []QueueEntry{
		{JobID: "12", State: StateRunning, Reason: "None", Nodes: "gb200-[01-12]", Name: "sweepflow.s1.p1"},
		{JobID: "13", State: StatePending, Reason: "Resources", Name: "sweepflow.s1.p2"},
		{JobID: "14", State: StateNodeFail, Reason: "NodeDown", Nodes: "gb200-[01-16]", Name: "x|y"},
	}, got)
	empty, err := ParseSqueue("\n")
	require.NoError(t, err)
	assert.Empty(t, empty)
	for _, bad := range []string{"12|RUNNING", "12|WEIRD|None|n|x"} {
		_, err := ParseSqueue(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseSacct(t *testing.T) {
	out := "21|NODE_FAIL|NodeDown|gb200-[01-16]\n21.batch|CANCELLED|None|gb200-01\n22|CANCELLED by 0|None|None assigned\n"
	for _, tc := range []struct {
		id    string
		want  QueueEntry
		found bool
	}{
		{id: "21", want: QueueEntry{JobID: "21", State: StateNodeFail, Reason: "NodeDown", Nodes: "gb200-[01-16]"}, found: true},
		{id: "22", want: QueueEntry{JobID: "22", State: StateCancelled, Reason: "None"}, found: true},
		{id: "23"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			e, ok, err := ParseSacct(tc.id, out)
			require.NoError(t, err)
			require.Equal(t, tc.found, ok)
			assert.Equal(t, tc.want, e)
		})
	}
	_, _, err := ParseSacct("1", "1|BOGUS|x|y")
	require.Error(t, err)
}

func TestExpandHostlist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "gb200-05", want: []string{"gb200-05"}},
		{in: "gb200-[01-03]", want: []string{"gb200-01", "gb200-02", "gb200-03"}},
		{in: "gb200-[01-02,07],login1", want: []string{"gb200-01", "gb200-02", "gb200-07", "login1"}},
		{in: "blue-cn[9-11]", want: []string{"blue-cn9", "blue-cn10", "blue-cn11"}},
		{in: "r[1-2]n[1-2]", want: []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{in: "", want: nil},
		{in: "gb200-[03-01]", bad: true},
		{in: "gb200-[a-b]", bad: true},
		{in: "gb200-]01[", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ExpandHostlist(tc.in)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFormatTimeLimitAndJobName(t *testing.T) {
	for d, want := range map[time.Duration]string{
		8 * time.Hour: "08:00:00", 90 * time.Second: "00:02:00", 0: "00:01:00", 26*time.Hour + 5*time.Minute: "1-02:05:00",
	} {
		assert.Equal(t, want, FormatTimeLimit(d), d.String())
	}
	assert.Equal(t, "sweepflow.s_1.dsv4_p1x8_conc4", JobName("sweepflow", "s/1", "dsv4_p1x8_conc4"))
}

func TestParseSinfoNodes(t *testing.T) {
	out := "gb200-01|allocated|none\ngb200-02|down*|Not responding\ngb200-02|down*|Not responding\ngb200-03|drained|sweepflow-test\ngb200-04|idle|none\ngb200-05|mixed+drain|Kill task failed\n"
	nodes := ParseSinfoNodes(out)
	require.Len(t, nodes, 5, "a node listed for two partitions is kept once")
	var bad []string
	for _, n := range nodes {
		if n.Bad() {
			bad = append(bad, n.Name)
		}
	}
	assert.Equal(t, []string{"gb200-02", "gb200-03", "gb200-05"}, bad)
	assert.Equal(t, "", nodes[0].Reason, "sinfo's none is no reason")
	assert.Equal(t, "node gb200-02 down* (Not responding), node gb200-03 drained (sweepflow-test)", describeNodes(nodes[1:3]))
}
