package results

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/failure"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
)

func TestOpenDSN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name     string
		dsn      string
		wantErr  string
		wantPath string
	}{
		{name: "empty", dsn: "", wantErr: "no store configured"},
		{name: "postgres unreachable hides password", dsn: "postgres://user:secret@127.0.0.1:1/sweepflow?connect_timeout=2", wantErr: "results: open postgres://user:***@127.0.0.1:1/sweepflow"},
		{name: "postgresql scheme hides password", dsn: "postgresql://user:secret@127.0.0.1:1/x?sslmode=disable", wantErr: "user:***@127.0.0.1:1"},
		{name: "postgres bad url", dsn: "postgres://user:secret@db:port/x", wantErr: "not a valid postgres:// URL"},
		{name: "unknown scheme", dsn: "mysql://db/x", wantErr: "unsupported scheme"},
		{name: "memory", dsn: ":memory:", wantErr: "in-memory SQLite is not supported"},
		{name: "bare sqlite scheme", dsn: "sqlite://", wantErr: "has no path"},
		{name: "query in path", dsn: filepath.Join(dir, "x.db?mode=ro"), wantErr: "must not contain"},
		{name: "sqlite url", dsn: "sqlite://" + filepath.Join(dir, "a", "r.db"), wantPath: filepath.Join(dir, "a", "r.db")},
		{name: "plain path", dsn: filepath.Join(dir, "b.db"), wantPath: filepath.Join(dir, "b.db")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.dsn)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, tc.wantPath, s.Path())
			assert.FileExists(t, tc.wantPath)
		})
	}
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, path := be.open(t)
		require.NoError(t, s.UpsertSweep(ctx, Sweep{ID: "sw1", Name: "seed", Status: "running"}))
		require.NoError(t, s.Close())

		if be.name == "sqlite" {
			path = "sqlite://" + path
		}
		for range 3 {
			s2, err := Open(ctx, path)
			require.NoError(t, err)
			var n, maxV int
			require.NoError(t, s2.db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&n, &maxV))
			assert.Equal(t, knownMigrations(t), n)
			assert.Equal(t, knownMigrations(t), maxV)
			sw, found, err := s2.GetSweep(ctx, "sw1")
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, "seed", sw.Name)
			if be.name == "sqlite" {
				var mode string
				require.NoError(t, s2.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
				assert.Equal(t, "wal", mode)
			}
			assert.Equal(t, be.name, s2.Dialect())
			require.NoError(t, s2.Close())
		}
	})
}

func TestConcurrentOpensOfFreshStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		dsn := be.newDSN(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := Open(context.Background(), dsn)
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		s, err := Open(context.Background(), dsn)
		require.NoError(t, err)
		defer s.Close()
		var n int
		require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0`).Scan(&n))
		assert.Equal(t, knownMigrations(t), n, "each migration applied exactly once")
	})
}

func TestNewerSchemaIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, path := be.open(t)
		_, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, ?)`), true)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, err = Open(ctx, path)
		require.ErrorContains(t, err, "schema version 999 is newer")
	})
}

func TestUpsertSweepPartialUpdates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		start := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
		require.NoError(t, s.UpsertSweep(ctx, Sweep{ID: "n1", Name: "nightly", ConfigJSON: `{"a":1}`, Status: "running", StartedAt: start, ReuseFrom: "n0", Nightly: true}))
		// Finishing only sends what changed.
		end := start.Add(3 * time.Hour)
		require.NoError(t, s.UpsertSweep(ctx, Sweep{ID: "n1", Status: "completed", FinishedAt: end}))

		sw, found, err := s.GetSweep(ctx, "n1")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "nightly", sw.Name)
		assert.Equal(t, `{"a":1}`, sw.ConfigJSON)
		assert.Equal(t, "completed", sw.Status)
		assert.True(t, sw.StartedAt.Equal(start))
		assert.True(t, sw.FinishedAt.Equal(end))
		assert.Equal(t, "n0", sw.ReuseFrom)
		assert.True(t, sw.Nightly)

		_, found, err = s.GetSweep(ctx, "nope")
		require.NoError(t, err)
		assert.False(t, found)

		require.NoError(t, s.UpsertSweep(ctx, Sweep{ID: "a0", StartedAt: start.Add(-time.Hour)}))
		all, err := s.Sweeps(ctx)
		require.NoError(t, err)
		require.Len(t, all, 2)
		assert.Equal(t, "a0", all[0].ID)
	})
}

func TestUpsertPoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		base := Point{SweepID: "sw", PointID: "p1", Identity: "fp1", ConfigKey: "dsv4-fp4-gb200-dynamo-sglang", ExpName: "exp1", Topology: "2P1D-DEP16", Conc: 64}

		steps := []struct {
			name string
			p    Point
			want Point
		}{
			{name: "created", p: with(base, "running", "", "", t0), want: with(base, "running", "", "", t0)},
			{name: "failed at eval", p: with(Point{SweepID: "sw", PointID: "p1"}, "awaiting-operator", "gsm8k-eval", "below floor", t0.Add(time.Minute)),
				want: with(base, "awaiting-operator", "gsm8k-eval", "below floor", t0.Add(time.Minute))},
			{name: "stale write ignored", p: with(base, "running", "", "", t0.Add(30*time.Second)),
				want: with(base, "awaiting-operator", "gsm8k-eval", "below floor", t0.Add(time.Minute))},
			{name: "retry clears error", p: with(Point{SweepID: "sw", PointID: "p1"}, "completed", "", "", t0.Add(2*time.Minute)),
				want: with(base, "completed", "", "", t0.Add(2*time.Minute))},
		}
		for _, st := range steps {
			require.NoError(t, s.UpsertPoint(ctx, st.p), st.name)
			pts, err := s.Points(ctx, "sw")
			require.NoError(t, err)
			require.Len(t, pts, 1, st.name)
			got := pts[0]
			assert.True(t, got.UpdatedAt.Equal(st.want.UpdatedAt), st.name)
			got.UpdatedAt = st.want.UpdatedAt
			assert.Equal(t, st.want, got, st.name)
		}
		require.ErrorContains(t, s.UpsertPoint(ctx, Point{SweepID: "sw"}), "point id are required")
	})
}

func with(p Point, status, stage, msg string, at time.Time) Point {
	p.Status, p.FailedStage, p.Error, p.UpdatedAt = status, stage, msg, at
	return p
}

func TestPutStageOutputIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		first := StageOutput{SweepID: "sw", PointID: "p1", Identity: "fp1", Stage: "perf", Attempt: 1,
			OutputJSON: []byte(`{"output_tput_per_gpu":100}`), ArtifactURIs: []string{"file:///a/sha256/ab/x/records.jsonl"}, Simulated: true}
		ins, err := s.PutStageOutput(ctx, first)
		require.NoError(t, err)
		assert.True(t, ins)

		// A retried activity writes the same output again: fine.
		again := first
		again.Attempt = 2
		ins, err = s.PutStageOutput(ctx, again)
		require.NoError(t, err)
		assert.False(t, ins)

		// Different figures under the same key are an error, never dropped.
		other := first
		other.Attempt = 3
		other.OutputJSON = []byte(`{"output_tput_per_gpu":999}`)
		_, err = s.PutStageOutput(ctx, other)
		require.ErrorIs(t, err, ErrConflict)
		assert.Contains(t, err.Error(), "already holds a different perf output")
		other = first
		other.PointID = "p2" // another point claiming the identity
		_, err = s.PutStageOutput(ctx, other)
		require.ErrorIs(t, err, ErrConflict)
		other = first
		other.ProfileHash = "another-profile"
		_, err = s.PutStageOutput(ctx, other)
		require.ErrorIs(t, err, ErrConflict)

		outs, err := s.StageOutputs(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, outs, 1)
		assert.Equal(t, 1, outs[0].Attempt)
		assert.JSONEq(t, `{"output_tput_per_gpu":100}`, string(outs[0].OutputJSON))
		assert.Equal(t, first.ArtifactURIs, outs[0].ArtifactURIs)
		assert.True(t, outs[0].Simulated)
		assert.False(t, outs[0].CreatedAt.IsZero())

		// Another stage of the same point is a separate row.
		ins, err = s.PutStageOutput(ctx, StageOutput{SweepID: "sw", PointID: "p1", Identity: "fp1", Stage: "gsm8k-eval"})
		require.NoError(t, err)
		assert.True(t, ins)
		for stage, want := range map[string]int{"perf": 1, "gsm8k-eval": 1, "": 2, "warmup": 0} {
			n, err := s.CountStageOutputs(ctx, "sw", stage)
			require.NoError(t, err)
			assert.Equal(t, want, n, "stage %q", stage)
		}
		outs, err = s.StageOutputs(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, outs, 2)
		assert.Equal(t, []string{}, outs[1].ArtifactURIs)
		assert.Nil(t, outs[1].OutputJSON)
	})
}

func TestPutStageOutputBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s, _ := be.open(t)
		tests := []struct {
			name string
			o    StageOutput
			want string
		}{
			{name: "no identity", o: StageOutput{SweepID: "sw", PointID: "p", Stage: "perf"}, want: "identity and stage are required"},
			{name: "no stage", o: StageOutput{SweepID: "sw", PointID: "p", Identity: "f"}, want: "are required"},
			{name: "bad json", o: StageOutput{SweepID: "sw", PointID: "p", Identity: "f", Stage: "perf", OutputJSON: []byte("{")}, want: "output_json is not valid JSON"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.PutStageOutput(context.Background(), tc.o)
				require.ErrorContains(t, err, tc.want)
			})
		}
	})
}

func TestStageOutputCandidatesNewestFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		put := func(sweep, fp, stage string, at time.Time) {
			_, err := s.PutStageOutput(ctx, StageOutput{SweepID: sweep, PointID: "p-" + sweep, Identity: fp, Stage: stage,
				OutputJSON: []byte(fmt.Sprintf(`{"sweep":%q}`, sweep)), CreatedAt: at})
			require.NoError(t, err)
		}
		put("old", "fp", "perf", t0)
		put("new", "fp", "perf", t0.Add(24*time.Hour))
		put("mid", "fp", "perf", t0.Add(12*time.Hour))
		put("newest-other-fp", "fp2", "perf", t0.Add(48*time.Hour))
		put("newest-other-stage", "fp", "gsm8k-eval", t0.Add(48*time.Hour))

		tests := []struct {
			name      string
			fp, stage string
			from      []string
			wantSweep string // "" = not found
		}{
			{name: "any sweep: newest", fp: "fp", stage: "perf", wantSweep: "new"},
			{name: "restricted to one", fp: "fp", stage: "perf", from: []string{"old"}, wantSweep: "old"},
			{name: "restricted: newest among them", fp: "fp", stage: "perf", from: []string{"old", "mid"}, wantSweep: "mid"},
			{name: "restricted to unknown sweep", fp: "fp", stage: "perf", from: []string{"nope"}},
			{name: "other stage", fp: "fp", stage: "gsm8k-eval", wantSweep: "newest-other-stage"},
			{name: "unknown fingerprint", fp: "fp3", stage: "perf"},
			{name: "stage never run", fp: "fp", stage: "result-upload"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				outs, err := s.StageOutputCandidates(ctx, tc.fp, tc.stage, tc.from)
				require.NoError(t, err)
				if tc.wantSweep == "" {
					assert.Empty(t, outs)
					return
				}
				require.NotEmpty(t, outs)
				o := outs[0]
				assert.Equal(t, tc.wantSweep, o.SweepID)
				assert.JSONEq(t, fmt.Sprintf(`{"sweep":%q}`, tc.wantSweep), string(o.OutputJSON))
			})
		}
	})
}

func TestPerfAndEvalUpserts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		p := PerfResult{SweepID: "sw", PointID: "p1", Identity: "dep-c32", ProfileHash: "ph", ConfigKey: "ck", ExpName: "e1", Conc: 32,
			PerfSummary: point.PerfSummary{OutputTputPerGPU: 1000, TputPerGPU: 3000, InputTputPerGPU: 2000, Interactivity: 45, TTFTp90Ms: 900, TTFTp99Ms: 1800,
				TPOTMedianMs: 22, E2ELMedianMs: 30000, Requests: 64, Failed: 1, Simulated: true, AggregateURI: "file:///agg", RequestsURI: "file:///req"},
			JSON: []byte(`{"conc":32,"ttft_p99_ms":1800}`)}
		require.NoError(t, s.PutPerf(ctx, p))
		require.NoError(t, s.PutPerf(ctx, p), "an identical re-write is idempotent")
		// The same exp-name at another concurrency is another identity.
		p2 := p
		p2.Conc, p2.Identity, p2.OutputTputPerGPU = 64, "dep-c64", 1500
		require.NoError(t, s.PutPerf(ctx, p2))
		bad := p
		bad.OutputTputPerGPU, bad.JSON = 1100, []byte(`{"conc":32,"x":1}`)
		require.ErrorIs(t, s.PutPerf(ctx, bad), ErrConflict, "a second, different figure for one point is an error")

		perf, err := s.Perf(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, perf, 2)
		assert.Equal(t, p, perf[0])
		assert.Equal(t, p2, perf[1])

		e := EvalResult{SweepID: "sw", PointID: "p1", Identity: "dep-c32", EMStrict: 0.80, EMFlexible: 0.81, NEff: 1319, Passed: false, Floor: 0.9, JSON: []byte(`{}`)}
		require.NoError(t, s.PutEval(ctx, e))
		require.NoError(t, s.PutEval(ctx, e))
		e2 := e
		e2.EMStrict, e2.EMFlexible, e2.Passed = 0.95, 0.96, true
		require.ErrorIs(t, s.PutEval(ctx, e2), ErrConflict)
		evals, err := s.Evals(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, evals, 1)
		assert.Equal(t, e, evals[0])

		empty, err := s.Perf(ctx, "other")
		require.NoError(t, err)
		assert.Empty(t, empty)

		require.ErrorContains(t, s.PutPerf(ctx, PerfResult{SweepID: "sw", PointID: "p"}), "identity are required")
		require.ErrorContains(t, s.PutEval(ctx, EvalResult{SweepID: "sw", PointID: "p", Identity: "f", JSON: []byte("nope")}), "not valid JSON")
	})
}

// TestConcurrentWriters has workers on two Store handles (as two worker
// processes would) racing to write overlapping keys: every unique key must
// end up exactly once, and exactly one writer must see inserted=true.
func TestConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) { testConcurrentWriters(t, be.newDSN(t)) })
}

func testConcurrentWriters(t *testing.T, path string) {
	ctx := context.Background()
	a, err := Open(ctx, path)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, path)
	require.NoError(t, err)
	defer b.Close()

	const (
		writers = 8
		points  = 25
	)
	stages := []string{"checkpoint-staging", "perf", "gsm8k-eval"}
	var (
		mu       sync.Mutex
		inserted = map[string]int{}
		wg       sync.WaitGroup
		errs     = make(chan error, writers)
	)
	for w := range writers {
		store := a
		if w%2 == 1 {
			store = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range points {
				// Start at different offsets so writers collide on keys.
				pi := (i + w*3) % points
				fp := fmt.Sprintf("fp%02d", pi)
				pid := fmt.Sprintf("p%02d", pi)
				for _, st := range stages {
					ins, err := store.PutStageOutput(ctx, StageOutput{SweepID: "sw", PointID: pid, Identity: fp, Stage: st, Attempt: w,
						OutputJSON: []byte(fmt.Sprintf(`{"point":%q}`, pid))})
					if err != nil {
						errs <- err
						return
					}
					if ins {
						mu.Lock()
						inserted[fp+"/"+st]++
						mu.Unlock()
					}
				}
				if err := store.UpsertPoint(ctx, Point{SweepID: "sw", PointID: pid, Identity: fp, Status: "completed"}); err != nil {
					errs <- err
					return
				}
				if err := store.PutPerf(ctx, PerfResult{SweepID: "sw", PointID: pid, Identity: fp, Conc: 8, PerfSummary: point.PerfSummary{OutputTputPerGPU: 100}}); err != nil {
					errs <- err
					return
				}
				if err := store.PutEval(ctx, EvalResult{SweepID: "sw", PointID: pid, Identity: fp, EMStrict: 0.9}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	assert.Len(t, inserted, points*len(stages))
	for k, n := range inserted {
		assert.Equal(t, 1, n, "key %s inserted %d times", k, n)
	}
	n, err := a.CountStageOutputs(ctx, "sw", "")
	require.NoError(t, err)
	assert.Equal(t, points*len(stages), n)
	pts, err := b.Points(ctx, "sw")
	require.NoError(t, err)
	assert.Len(t, pts, points)
	perf, err := a.Perf(ctx, "sw")
	require.NoError(t, err)
	assert.Len(t, perf, points)
	evals, err := b.Evals(ctx, "sw")
	require.NoError(t, err)
	assert.Len(t, evals, points)
}

// BenchmarkPutStageOutput measures ledger write latency per backend
// (SQLite: WAL, synchronous=NORMAL; PostgreSQL: the throwaway test cluster,
// fsync off).
func BenchmarkPutStageOutput(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, _ := be.open(b)
			out := []byte(`{"output_tput_per_gpu":1234.5,"ttft_p90_ms":812.0}`)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, err := s.PutStageOutput(ctx, StageOutput{SweepID: "sw", PointID: "p", Identity: fmt.Sprint(i), Stage: "perf", OutputJSON: out})
				require.NoError(b, err)
			}
		})
	}
}

// TestConcurrentProcesses repeats the overlap race across real processes (the
// test binary re-executed), since SQLite's POSIX locks behave differently
// between processes than between handles in one process (and PostgreSQL
// sessions of different processes must also insert each key once).
func TestConcurrentProcesses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) { testConcurrentProcesses(t, be.newDSN(t)) })
}

func testConcurrentProcesses(t *testing.T, path string) {
	const procs, points = 3, 150
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperWriterProcess$")
		cmds[i].Env = append(os.Environ(), "RESULTS_HELPER_DB="+path, fmt.Sprintf("RESULTS_HELPER_ID=%d", i), fmt.Sprintf("RESULTS_HELPER_POINTS=%d", points))
	}
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], errs[i] = c.CombinedOutput() }()
	}
	wg.Wait()
	insertedTotal := 0
	for i := range cmds {
		require.NoError(t, errs[i], "helper %d: %s", i, outs[i])
		var n int
		_, err := fmt.Sscanf(lastLine(string(outs[i])), "inserted=%d", &n)
		require.NoError(t, err, "helper %d output: %s", i, outs[i])
		insertedTotal += n
	}
	assert.Equal(t, points, insertedTotal, "each key inserted by exactly one process")
	s, err := Open(context.Background(), path)
	require.NoError(t, err)
	defer s.Close()
	n, err := s.CountStageOutputs(context.Background(), "sw", "perf")
	require.NoError(t, err)
	assert.Equal(t, points, n)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "inserted=") {
			return lines[i]
		}
	}
	return ""
}

// TestHelperWriterProcess is the child side of TestConcurrentProcesses.
func TestHelperWriterProcess(t *testing.T) {
	path := os.Getenv("RESULTS_HELPER_DB")
	if path == "" {
		t.Skip("helper process for TestConcurrentProcesses")
	}
	var id, points int
	fmt.Sscan(os.Getenv("RESULTS_HELPER_ID"), &id)
	fmt.Sscan(os.Getenv("RESULTS_HELPER_POINTS"), &points)
	ctx := context.Background()
	s, err := Open(ctx, path)
	require.NoError(t, err)
	defer s.Close()
	inserted := 0
	for i := range points {
		pi := (i + id*7) % points
		ins, err := s.PutStageOutput(ctx, StageOutput{SweepID: "sw", PointID: fmt.Sprint(pi), Identity: fmt.Sprintf("fp%d", pi), Stage: "perf", Attempt: id})
		require.NoError(t, err)
		if ins {
			inserted++
		}
		require.NoError(t, s.UpsertPoint(ctx, Point{SweepID: "sw", PointID: fmt.Sprint(pi), Status: "completed"}))
	}
	fmt.Printf("inserted=%d\n", inserted)
}

func TestRebind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    dialect
		in   string
		want string
	}{
		{name: "sqlite untouched", d: sqliteDialect, in: `SELECT ? WHERE a = ?`, want: `SELECT ? WHERE a = ?`},
		{name: "postgres numbered", d: postgres, in: `INSERT INTO t (a, b, c) VALUES (?, ?, ?)`, want: `INSERT INTO t (a, b, c) VALUES ($1, $2, $3)`},
		{name: "postgres skips literals", d: postgres, in: `SELECT '?', "a?b" FROM t WHERE x = ? AND y <> 'it''s?'`, want: `SELECT '?', "a?b" FROM t WHERE x = $1 AND y <> 'it''s?'`},
		{name: "no placeholders", d: postgres, in: `SELECT 1`, want: `SELECT 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.d.rebind(tc.in))
		})
	}
}

func TestPointSpecKeptAcrossStatusUpdates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		spec := []byte(`{"point_id":"p1","image":"lmsysorg/sglang:x","row":{"precision":"fp4"}}`)
		t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, s.UpsertPoint(ctx, Point{SweepID: "sw", PointID: "p1", Status: "running", SpecJSON: spec, UpdatedAt: t0}))
		require.NoError(t, s.UpsertPoint(ctx, Point{SweepID: "sw", PointID: "p1", Status: "completed", UpdatedAt: t0.Add(time.Minute)}))
		pts, err := s.Points(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, pts, 1)
		assert.Equal(t, "completed", pts[0].Status)
		assert.JSONEq(t, string(spec), string(pts[0].SpecJSON))
		require.ErrorContains(t, s.UpsertPoint(ctx, Point{SweepID: "sw", PointID: "p2", SpecJSON: []byte("{")}), "spec_json is not valid JSON")
	})
}

func TestStageRunsReplaceAndOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
		run := func(stage, outcome string, from, to time.Duration) StageRun {
			r := StageRun{Stage: stage, Outcome: point.Outcome(outcome), Rounds: 1, StartedAt: t0.Add(from)}
			if to > 0 {
				r.EndedAt = t0.Add(to)
			}
			return r
		}
		first := []StageRun{run("allocate", "ok", 0, time.Second), run("perf", "running", time.Second, 0)}
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", first))
		final := []StageRun{run("allocate", "ok", 0, time.Second), run("perf", "ok", time.Second, 90*time.Second),
			run("eval", "failed", 90*time.Second, 100*time.Second)}
		final[2].Error, final[2].Rounds = "below floor", 2
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", final))
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", final)) // a retried write changes nothing
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p0", []StageRun{run("allocate", "ok", 0, 2*time.Second)}))
		require.NoError(t, s.PutStageRuns(ctx, "other", "p1", []StageRun{run("allocate", "ok", 0, time.Second)}))

		got, err := s.StageRuns(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, got, 4)
		assert.Equal(t, "p0", got[0].PointID)
		for i, want := range final {
			g := got[i+1]
			assert.Equal(t, "sw", g.SweepID)
			assert.Equal(t, "p1", g.PointID)
			assert.Equal(t, i, g.Seq)
			assert.Equal(t, want.Stage, g.Stage)
			assert.Equal(t, want.Outcome, g.Outcome)
			assert.Equal(t, want.Rounds, g.Rounds)
			assert.Equal(t, want.Error, g.Error)
			assert.True(t, want.StartedAt.Equal(g.StartedAt), "stage %s start", want.Stage)
			assert.True(t, want.EndedAt.Equal(g.EndedAt), "stage %s end", want.Stage)
		}
		assert.Equal(t, 89*time.Second, got[2].Duration())
		assert.Zero(t, StageRun{StartedAt: t0}.Duration())

		require.ErrorContains(t, s.PutStageRuns(ctx, "sw", "", nil), "point id are required")
		require.ErrorContains(t, s.PutStageRuns(ctx, "sw", "p1", []StageRun{{Outcome: "ok"}}), "run 0 has no stage")
	})
}

// TestLegacyStore: a ledger made by sweepflow's old migrator (keyed by
// fingerprint, not identity) is not migrated. SQLite files are moved aside
// intact and a fresh ledger starts; PostgreSQL databases are refused.
func TestLegacyStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		dsn := be.newDSN(t)
		var db *sql.DB
		var err error
		if be.name == "postgres" {
			db, err = openPostgres(ctx, dsn)
		} else {
			path, perr := sqlitePath(dsn)
			require.NoError(t, perr)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			db, err = sql.Open("sqlite", path)
		}
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		s, err := Open(ctx, dsn)
		if be.name == "postgres" {
			require.ErrorIs(t, err, ErrLegacySchema)
			assert.Contains(t, err.Error(), "use a new database")
			return
		}
		require.NoError(t, err)
		defer s.Close()
		moved := s.LegacyMovedTo()
		require.NotEmpty(t, moved)
		assert.FileExists(t, moved, "the old ledger is kept")
		require.NoError(t, s.UpsertSweep(ctx, Sweep{ID: "sw"}))
	})
}

func TestMigrationFilesMatchAcrossDialects(t *testing.T) {
	list := func(d dialect) []string {
		entries, err := fs.ReadDir(migrationsFS(d), ".")
		require.NoError(t, err)
		var names []string
		for i, e := range entries {
			require.True(t, strings.HasPrefix(e.Name(), fmt.Sprintf("%05d_", i+1)), "migrations are numbered densely: %s", e.Name())
			names = append(names, e.Name())
		}
		return names
	}
	assert.Equal(t, list(sqliteDialect), list(postgres), "every migration exists for both dialects")
}

// knownMigrations is the number of embedded migrations.
func knownMigrations(t *testing.T) int {
	entries, err := fs.ReadDir(migrationsFS(sqliteDialect), ".")
	require.NoError(t, err)
	return len(entries)
}

// TestStageFailuresOnePerAttempt: each failed attempt of a stage run is a
// row with its class and evidence, replaced with the point's stage runs.
func TestStageFailuresOnePerAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
		oom := failure.Attempt{Failure: failure.Failure{Class: failure.CUDAOOM,
			Excerpt: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}, At: t0.Add(40 * time.Second)}
		lost := failure.Attempt{Failure: failure.Failure{Class: failure.LostWorker, Excerpt: "no heartbeat within the heartbeat timeout"}, At: t0.Add(20 * time.Second)}
		nodeFail := failure.Attempt{Failure: failure.Failure{Class: failure.NodeFail, Excerpt: "slurm job 12 is NODE_FAIL (NodeDown)"}, At: t0.Add(60 * time.Second)}
		runs := []StageRun{
			{Stage: "allocate", Outcome: "ok", Rounds: 1, StartedAt: t0, EndedAt: t0.Add(time.Second)},
			{Stage: "bringup", Outcome: "ok", Rounds: 2, StartedAt: t0.Add(time.Second), EndedAt: t0.Add(50 * time.Second), Failures: []failure.Attempt{lost, oom}},
			{Stage: "perf", Outcome: "allocation lost", Rounds: 1, StartedAt: t0.Add(50 * time.Second), EndedAt: t0.Add(60 * time.Second), Failures: []failure.Attempt{nodeFail}},
		}
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", runs))
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", runs)) // idempotent
		got, err := s.StageFailures(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, got, 3)
		want := []struct {
			seq, n int
			stage  string
			a      failure.Attempt
		}{{1, 0, "bringup", lost}, {1, 1, "bringup", oom}, {2, 0, "perf", nodeFail}}
		for i, w := range want {
			assert.Equal(t, w.seq, got[i].Seq)
			assert.Equal(t, w.n, got[i].N)
			assert.Equal(t, w.stage, got[i].Stage)
			assert.Equal(t, w.a.Failure, got[i].Failure)
			assert.True(t, w.a.At.Equal(got[i].At), "at of %d", i)
		}
		// The point's next record without the failures replaces them.
		require.NoError(t, s.PutStageRuns(ctx, "sw", "p1", runs[:1]))
		got, err = s.StageFailures(ctx, "sw")
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

// TestPerfStoresPowerFigures: a perf result's power figures (migration
// 00005) are in the ledger's columns for queries and come back whole.
func TestPerfStoresPowerFigures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, _ := be.open(t)
		pw := &energy.Figures{Source: energy.SourceSimulated, Simulated: true, Valid: true, ExpectedGPUs: 4, ObservedGPUs: 4,
			TotalGPUEnergyJ: 9000, AvgPowerW: 562.5, JoulesPerOutputToken: 6, JoulesPerTotalToken: 2}
		p := PerfResult{SweepID: "sw", PointID: "p1", Identity: "dep-c32", Conc: 32,
			PerfSummary: point.PerfSummary{OutputTputPerGPU: 1000, Simulated: true, Power: pw}}
		require.NoError(t, s.PutPerf(ctx, p))
		bad := PerfResult{SweepID: "sw", PointID: "p2", Identity: "dep-c64", Conc: 64,
			PerfSummary: point.PerfSummary{OutputTputPerGPU: 900, Power: &energy.Figures{Source: energy.SourceDCGM, Reasons: []string{energy.ReasonGap, energy.ReasonDeviceMissing}}}}
		require.NoError(t, s.PutPerf(ctx, bad))
		perf, err := s.Perf(ctx, "sw")
		require.NoError(t, err)
		require.Len(t, perf, 2)
		assert.Equal(t, pw, perf[0].Power)
		assert.Equal(t, 900.0, perf[1].OutputTputPerGPU, "a power-invalid point keeps its perf figures")
		var src, reasons string
		var valid bool
		var jout, energyJ float64
		require.NoError(t, s.queryRow(ctx, `SELECT power_source, power_valid, power_reasons, joules_per_output_token, total_gpu_energy_j FROM perf_results WHERE identity = ?`, "dep-c32").
			Scan(&src, &valid, &reasons, &jout, &energyJ))
		assert.Equal(t, []any{"simulated", true, "", 6.0, 9000.0}, []any{src, valid, reasons, jout, energyJ})
		require.NoError(t, s.queryRow(ctx, `SELECT power_source, power_valid, power_reasons FROM perf_results WHERE identity = ?`, "dep-c64").
			Scan(&src, &valid, &reasons))
		assert.Equal(t, []any{"dcgm-power", false, "sampling_gap_exceeded,expected_device_missing"}, []any{src, valid, reasons})
	})
}
