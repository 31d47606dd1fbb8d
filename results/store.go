// Package results is the results store: the ledger of sweeps, points and
// durable stage outputs that reruns and nightly comparisons read, plus typed
// perf and eval tables for reports and exports. SQLite (pure Go, no cgo) is
// the default; PostgreSQL (pgx through database/sql) is used when the DSN is
// a postgres:// URL. Both run the same queries and goose migrations.
//
// Results are keyed by point identity (point.Identity: the deployment hash
// plus the concurrency). Stage outputs, perf and eval rows are written once
// per (sweep, identity[, stage]): an identical re-write (a retried activity)
// is a no-op, a different one is an ErrConflict, never silently dropped.
package results

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/point"
)

// ErrConflict is returned when a write would change a result the ledger
// already holds for the same key: two different figures for one point.
var ErrConflict = errors.New("conflicting result")

// Store is a handle on one results database; it is safe for concurrent use,
// and several Stores (or processes) may share one SQLite file.
type Store struct {
	db   *sql.DB
	path string // SQLite file, or the DSN without its password
	d    dialect
	// legacy is where an old-schema SQLite file was moved, if it was.
	legacy string
}

// busyTimeoutMs is how long a writer waits for another writer's lock: worker
// activities write concurrently and each write is a few milliseconds.
const busyTimeoutMs = 15000

// Open opens (creating and migrating if needed) the store a DSN names:
// "sqlite:///abs/path.db", "sqlite://rel/path.db" or a plain file path select
// SQLite; "postgres://user:pass@host:port/db?sslmode=..." (or postgresql://)
// selects PostgreSQL, whose database must exist.
//
// A database from before point identities (sweepflow's own migrator) is not
// migrated: an old SQLite file is moved aside to <file>.pre-identity-<time>
// (see LegacyMovedTo) and a fresh ledger is created; an old PostgreSQL
// database is refused with ErrLegacySchema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if isPostgresDSN(dsn) {
		db, err := openPostgres(ctx, dsn)
		if err != nil {
			return nil, err
		}
		if err := migrate(ctx, db, postgres); err != nil {
			db.Close()
			if errors.Is(err, ErrLegacySchema) {
				return nil, fmt.Errorf("results: store %s: %w; use a new database or drop its tables", redact(dsn), err)
			}
			return nil, fmt.Errorf("%w (store %s)", err, redact(dsn))
		}
		return &Store{db: db, path: redact(dsn), d: postgres}, nil
	}
	s, err := openSQLite(ctx, dsn)
	if errors.Is(err, ErrLegacySchema) {
		path, _ := sqlitePath(dsn)
		moved, merr := moveLegacyAside(path)
		if merr != nil {
			return nil, fmt.Errorf("results: store %s: %w; moving it aside failed: %v", path, err, merr)
		}
		if s, err = openSQLite(ctx, dsn); err == nil {
			s.legacy = moved
		}
	}
	return s, err
}

// LegacyMovedTo is where Open moved an old-schema SQLite ledger ("" if not).
func (s *Store) LegacyMovedTo() string { return s.legacy }

func openSQLite(ctx context.Context, dsn string) (*Store, error) {
	path, err := sqlitePath(dsn)
	if err != nil {
		return nil, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("results: store %s: %w", path, err)
		}
	}
	// WAL lets readers run beside the one writer; _txlock=immediate takes the
	// write lock at BEGIN, so a transaction never fails upgrading a read lock
	// (SQLITE_BUSY_SNAPSHOT) when another writer committed first.
	q := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate", busyTimeoutMs)
	db, err := sql.Open("sqlite", path+q)
	if err != nil {
		return nil, fmt.Errorf("results: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if err := pingSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: open %s: %w", path, err)
	}
	if err := migrate(ctx, db, sqliteDialect); err != nil {
		db.Close()
		if errors.Is(err, ErrLegacySchema) {
			return nil, err
		}
		return nil, fmt.Errorf("%w (store %s)", err, path)
	}
	return &Store{db: db, path: path, d: sqliteDialect}, nil
}

// pingSQLite opens the first connection, retrying while the file is busy:
// switching a fresh file to WAL takes an exclusive lock, and SQLite can
// report SQLITE_BUSY to a second opener at once, without its busy handler.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyTimeoutMs * time.Millisecond)
	delay := 5 * time.Millisecond
	for {
		err := db.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

func sqlitePath(dsn string) (string, error) {
	switch {
	case strings.TrimSpace(dsn) == "":
		return "", errors.New("results: no store configured: want a SQLite file path, sqlite:///path/results.db or postgres://...")
	case strings.HasPrefix(dsn, "sqlite://"):
		dsn = strings.TrimPrefix(dsn, "sqlite://")
	case strings.Contains(dsn, "://"):
		return "", fmt.Errorf("results: store %q: unsupported scheme (want sqlite:// or postgres://)", redact(dsn))
	}
	switch {
	case dsn == "":
		return "", errors.New("results: sqlite:// store URL has no path")
	case dsn == ":memory:" || strings.HasPrefix(dsn, "file::memory:"):
		return "", errors.New("results: in-memory SQLite is not supported: the ledger must outlive the process")
	case strings.ContainsAny(dsn, "?#"):
		return "", fmt.Errorf("results: store path %q must not contain '?' or '#'", dsn)
	}
	return dsn, nil
}

// redact drops a password from a URL before it goes into an error message.
func redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	cred := dsn[scheme+3 : at]
	if i := strings.Index(cred, ":"); i >= 0 {
		return dsn[:scheme+3] + cred[:i] + ":***" + dsn[at:]
	}
	return dsn
}

// Close releases the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the SQLite file the store uses, or for PostgreSQL its DSN with the
// password masked.
func (s *Store) Path() string { return s.path }

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.String() }

// The query helpers rebind SQLite-style placeholders for the store's dialect:
// every statement in this package goes through them.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.d.rebind(q), args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.d.rebind(q), args...)
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, s.d.rebind(q), args...)
}

// Sweep is one sweep run.
type Sweep struct {
	ID, Name, ConfigJSON, Status string
	StartedAt, FinishedAt        time.Time
	ReuseFrom                    string
	Nightly                      bool
}

// UpsertSweep creates or updates a sweep. Updates are partial so callers can
// report progress without re-sending everything: empty strings and zero
// times keep the stored value, and Nightly, once set, stays set.
func (s *Store) UpsertSweep(ctx context.Context, sw Sweep) error {
	if sw.ID == "" {
		return errors.New("results: sweep: id is empty")
	}
	if sw.ConfigJSON != "" && !json.Valid([]byte(sw.ConfigJSON)) {
		return fmt.Errorf("results: sweep %s: config_json is not valid JSON", sw.ID)
	}
	return s.write(ctx, "upsert sweep "+sw.ID, `INSERT INTO sweeps (id, name, config_json, status, started_at, finished_at, reuse_from, nightly)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			name        = CASE WHEN excluded.name <> '' THEN excluded.name ELSE sweeps.name END,
			config_json = CASE WHEN excluded.config_json <> '' THEN excluded.config_json ELSE sweeps.config_json END,
			status      = CASE WHEN excluded.status <> '' THEN excluded.status ELSE sweeps.status END,
			started_at  = COALESCE(excluded.started_at, sweeps.started_at),
			finished_at = COALESCE(excluded.finished_at, sweeps.finished_at),
			reuse_from  = CASE WHEN excluded.reuse_from <> '' THEN excluded.reuse_from ELSE sweeps.reuse_from END,
			nightly     = (sweeps.nightly OR excluded.nightly)`,
		sw.ID, sw.Name, sw.ConfigJSON, sw.Status, nullTime(sw.StartedAt), nullTime(sw.FinishedAt), sw.ReuseFrom, sw.Nightly)
}

// GetSweep returns one sweep; found is false if there is none with that ID.
func (s *Store) GetSweep(ctx context.Context, id string) (sw Sweep, found bool, err error) {
	rows, err := s.querySweeps(ctx, `WHERE id = ?`, id)
	if err != nil || len(rows) == 0 {
		return Sweep{}, false, err
	}
	return rows[0], true, nil
}

// Sweeps lists all sweeps, oldest start first.
func (s *Store) Sweeps(ctx context.Context) ([]Sweep, error) {
	return s.querySweeps(ctx, `ORDER BY started_at, id`)
}

func (s *Store) querySweeps(ctx context.Context, where string, args ...any) ([]Sweep, error) {
	rows, err := s.query(ctx, `SELECT id, name, config_json, status, started_at, finished_at, reuse_from, nightly FROM sweeps `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("results: sweeps: %w", err)
	}
	defer rows.Close()
	var out []Sweep
	for rows.Next() {
		var sw Sweep
		var started, finished sql.NullInt64
		if err := rows.Scan(&sw.ID, &sw.Name, &sw.ConfigJSON, &sw.Status, &started, &finished, &sw.ReuseFrom, &sw.Nightly); err != nil {
			return nil, fmt.Errorf("results: sweeps: %w", err)
		}
		sw.StartedAt, sw.FinishedAt = fromNull(started), fromNull(finished)
		out = append(out, sw)
	}
	return out, rows.Err()
}

// Point is the latest known state of one sweep point.
type Point struct {
	SweepID, PointID string
	// Identity is the point identity (point.Identity.String()); ProfileHash
	// the planned measurement profile's hash; BaselineKey the identity
	// apart from the image (nightly and pinned baselines).
	Identity, ProfileHash, BaselineKey string
	ConfigKey, ExpName, Topology       string
	Conc                               int
	Status, FailedStage, Error         string
	UpdatedAt                          time.Time
	// SpecJSON is the point's full spec as the workflow ran it (identity
	// fields for exports: image, model prefix, precision, framework,
	// runner, the InferenceX matrix row). Empty keeps the stored value.
	SpecJSON []byte
}

// UpsertPoint records a point's state. Status, FailedStage and Error are
// replaced (so a retried point can clear its error); descriptive fields keep
// their stored value when empty. A write whose UpdatedAt is older than the
// stored one is ignored, so a late retry of an old activity cannot roll a
// point's state back. UpdatedAt defaults to now.
func (s *Store) UpsertPoint(ctx context.Context, p Point) error {
	if p.SweepID == "" || p.PointID == "" {
		return fmt.Errorf("results: point %q of sweep %q: sweep id and point id are required", p.PointID, p.SweepID)
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = time.Now()
	}
	if len(p.SpecJSON) > 0 && !json.Valid(p.SpecJSON) {
		return fmt.Errorf("results: point %s of sweep %s: spec_json is not valid JSON", p.PointID, p.SweepID)
	}
	return s.write(ctx, "upsert point "+p.PointID+" of sweep "+p.SweepID, `INSERT INTO points (sweep_id, point_id, identity, profile_hash, baseline_key, config_key, exp_name, topology, conc, status, failed_stage, error, updated_at, spec_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sweep_id, point_id) DO UPDATE SET
			identity     = CASE WHEN excluded.identity <> '' THEN excluded.identity ELSE points.identity END,
			profile_hash = CASE WHEN excluded.profile_hash <> '' THEN excluded.profile_hash ELSE points.profile_hash END,
			baseline_key = CASE WHEN excluded.baseline_key <> '' THEN excluded.baseline_key ELSE points.baseline_key END,
			config_key   = CASE WHEN excluded.config_key <> '' THEN excluded.config_key ELSE points.config_key END,
			exp_name     = CASE WHEN excluded.exp_name <> '' THEN excluded.exp_name ELSE points.exp_name END,
			topology     = CASE WHEN excluded.topology <> '' THEN excluded.topology ELSE points.topology END,
			conc         = CASE WHEN excluded.conc <> 0 THEN excluded.conc ELSE points.conc END,
			status       = CASE WHEN excluded.status <> '' THEN excluded.status ELSE points.status END,
			failed_stage = excluded.failed_stage,
			error        = excluded.error,
			updated_at   = excluded.updated_at,
			spec_json    = CASE WHEN excluded.spec_json <> '' THEN excluded.spec_json ELSE points.spec_json END
		WHERE excluded.updated_at >= points.updated_at`,
		p.SweepID, p.PointID, p.Identity, p.ProfileHash, p.BaselineKey, p.ConfigKey, p.ExpName, p.Topology, p.Conc, p.Status, p.FailedStage, p.Error, p.UpdatedAt.UnixNano(), string(p.SpecJSON))
}

// Points lists a sweep's points by point ID.
func (s *Store) Points(ctx context.Context, sweepID string) ([]Point, error) {
	rows, err := s.query(ctx, `SELECT sweep_id, point_id, identity, profile_hash, baseline_key, config_key, exp_name, topology, conc, status, failed_stage, error, updated_at, spec_json
		FROM points WHERE sweep_id = ? ORDER BY point_id`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: points of %s: %w", sweepID, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var p Point
		var updated int64
		var spec string
		if err := rows.Scan(&p.SweepID, &p.PointID, &p.Identity, &p.ProfileHash, &p.BaselineKey, &p.ConfigKey, &p.ExpName, &p.Topology, &p.Conc, &p.Status, &p.FailedStage, &p.Error, &updated, &spec); err != nil {
			return nil, fmt.Errorf("results: points of %s: %w", sweepID, err)
		}
		p.UpdatedAt = time.Unix(0, updated)
		if spec != "" {
			p.SpecJSON = []byte(spec)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// StageOutput is the durable result of one stage of one point: what a rerun
// reuses instead of running the stage again. Record only successful outputs.
type StageOutput struct {
	SweepID, PointID, Identity, Stage string
	// ProfileHash is the hash of the full profile the output was measured
	// with (point.Measured); ProfileJSON that profile, to say why a reuse
	// was refused.
	ProfileHash  string
	ProfileJSON  []byte
	Attempt      int
	OutputJSON   []byte
	ArtifactURIs []string
	Simulated    bool
	// RunID is the workflow run that wrote the row. SourceSweep and
	// SourceRun name where a reused output was produced ("": here).
	RunID, SourceSweep, SourceRun string
	CreatedAt                     time.Time
}

// Stamp is the reuse stamp of a stored output.
func (o StageOutput) Stamp() point.Stamp {
	st := point.Stamp{Identity: o.Identity, ProfileHash: o.ProfileHash, Simulated: o.Simulated}
	var m point.Measured
	if len(o.ProfileJSON) > 0 && json.Unmarshal(o.ProfileJSON, &m) == nil {
		st.Profile = &m
	}
	return st
}

// Origin is where an output was first produced: the source of a reused
// output, else the row itself.
func (o StageOutput) Origin() (sweep, run string) {
	if o.SourceSweep != "" {
		return o.SourceSweep, o.SourceRun
	}
	return o.SweepID, o.RunID
}

// PutStageOutput records a stage output once per (sweep, identity, stage).
// Writing the same output again (a retried activity) returns inserted=false
// and no error; writing a different one returns an error wrapping
// ErrConflict and leaves the first row untouched. CreatedAt defaults to now.
func (s *Store) PutStageOutput(ctx context.Context, o StageOutput) (inserted bool, err error) {
	if o.SweepID == "" || o.PointID == "" || o.Identity == "" || o.Stage == "" {
		return false, fmt.Errorf("results: stage output %q of point %q (sweep %q, identity %q): sweep id, point id, identity and stage are required",
			o.Stage, o.PointID, o.SweepID, o.Identity)
	}
	if len(o.OutputJSON) > 0 && !json.Valid(o.OutputJSON) {
		return false, fmt.Errorf("results: stage output %s of point %s (sweep %s): output_json is not valid JSON", o.Stage, o.PointID, o.SweepID)
	}
	if len(o.ProfileJSON) > 0 && !json.Valid(o.ProfileJSON) {
		return false, fmt.Errorf("results: stage output %s of point %s (sweep %s): profile_json is not valid JSON", o.Stage, o.PointID, o.SweepID)
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now()
	}
	uris := o.ArtifactURIs
	if uris == nil {
		uris = []string{}
	}
	urisJSON, err := json.Marshal(uris)
	if err != nil {
		return false, err
	}
	what := fmt.Sprintf("put stage output %s of point %s (sweep %s)", o.Stage, o.PointID, o.SweepID)
	inserted, err = s.insertOnce(ctx, what, `INSERT INTO stage_outputs (sweep_id, point_id, identity, stage, profile_hash, profile_json, attempt, output_json, artifact_uris, simulated, run_id, source_sweep, source_run, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (sweep_id, identity, stage) DO NOTHING`,
		o.SweepID, o.PointID, o.Identity, o.Stage, o.ProfileHash, string(o.ProfileJSON), o.Attempt, string(o.OutputJSON), string(urisJSON),
		o.Simulated, o.RunID, o.SourceSweep, o.SourceRun, o.CreatedAt.UnixNano())
	if err != nil {
		return false, err
	}
	if inserted {
		return true, nil
	}
	old, err := s.queryStageOutputs(ctx, `SELECT `+stageOutputCols+` FROM stage_outputs WHERE sweep_id = ? AND identity = ? AND stage = ?`, o.SweepID, o.Identity, o.Stage)
	if err != nil || len(old) == 0 {
		return false, fmt.Errorf("results: %s: reading the existing row: %v", what, err)
	}
	if d := diffOutput(old[0], o); d != "" {
		return false, fmt.Errorf("results: %s: %w: the ledger already holds a different %s output for identity %s (%s)", what, ErrConflict, o.Stage, o.Identity, d)
	}
	return false, nil
}

// diffOutput names what differs between two writes of one key; attempt and
// creation time may differ between retries, and an empty run ID matches.
func diffOutput(a, b StageOutput) string {
	switch {
	case a.PointID != b.PointID:
		return "point " + a.PointID + " vs " + b.PointID
	case !jsonEqual(a.OutputJSON, b.OutputJSON):
		return "output differs"
	case a.ProfileHash != b.ProfileHash:
		return "profile differs"
	case a.Simulated != b.Simulated:
		return "simulated differs"
	case a.SourceSweep != b.SourceSweep || a.SourceRun != b.SourceRun:
		return "source " + a.SourceSweep + " vs " + b.SourceSweep
	}
	return ""
}

// jsonEqual compares two JSON documents by value (key order and spacing
// may differ between writers).
func jsonEqual(a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

const stageOutputCols = `sweep_id, point_id, identity, stage, profile_hash, profile_json, attempt, output_json, artifact_uris, simulated, run_id, source_sweep, source_run, created_at`

// StageOutputCandidates lists the stored outputs of stage for identity,
// newest first, restricted to fromSweeps when that is not empty. The caller
// decides with point.CanReuse which, if any, may be reused.
func (s *Store) StageOutputCandidates(ctx context.Context, identity, stage string, fromSweeps []string) ([]StageOutput, error) {
	q := `SELECT ` + stageOutputCols + ` FROM stage_outputs WHERE identity = ? AND stage = ?`
	args := []any{identity, stage}
	if len(fromSweeps) > 0 {
		q += ` AND sweep_id IN (?` + strings.Repeat(`, ?`, len(fromSweeps)-1) + `)`
		for _, id := range fromSweeps {
			args = append(args, id)
		}
	}
	q += ` ORDER BY created_at DESC, id DESC`
	outs, err := s.queryStageOutputs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("results: lookup %s outputs for %s: %w", stage, identity, err)
	}
	return outs, nil
}

// StageOutput returns one sweep's output of a stage for an identity.
func (s *Store) StageOutput(ctx context.Context, sweepID, identity, stage string) (*StageOutput, bool, error) {
	outs, err := s.queryStageOutputs(ctx, `SELECT `+stageOutputCols+` FROM stage_outputs WHERE sweep_id = ? AND identity = ? AND stage = ?`, sweepID, identity, stage)
	if err != nil {
		return nil, false, fmt.Errorf("results: %s output of %s in %s: %w", stage, identity, sweepID, err)
	}
	if len(outs) == 0 {
		return nil, false, nil
	}
	return &outs[0], true, nil
}

// StageOutputs lists a sweep's stage outputs in the order they were written.
func (s *Store) StageOutputs(ctx context.Context, sweepID string) ([]StageOutput, error) {
	outs, err := s.queryStageOutputs(ctx, `SELECT `+stageOutputCols+` FROM stage_outputs WHERE sweep_id = ? ORDER BY id`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: stage outputs of %s: %w", sweepID, err)
	}
	return outs, nil
}

// CountStageOutputs counts a sweep's outputs of one stage ("" counts all).
func (s *Store) CountStageOutputs(ctx context.Context, sweepID, stage string) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM stage_outputs WHERE sweep_id = ? AND (? = '' OR stage = ?)`, sweepID, stage, stage).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("results: count %s outputs of %s: %w", stage, sweepID, err)
	}
	return n, nil
}

func (s *Store) queryStageOutputs(ctx context.Context, q string, args ...any) ([]StageOutput, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StageOutput
	for rows.Next() {
		var o StageOutput
		var output, uris, profile string
		var created int64
		if err := rows.Scan(&o.SweepID, &o.PointID, &o.Identity, &o.Stage, &o.ProfileHash, &profile, &o.Attempt, &output, &uris,
			&o.Simulated, &o.RunID, &o.SourceSweep, &o.SourceRun, &created); err != nil {
			return nil, err
		}
		if output != "" {
			o.OutputJSON = []byte(output)
		}
		if profile != "" {
			o.ProfileJSON = []byte(profile)
		}
		if err := json.Unmarshal([]byte(uris), &o.ArtifactURIs); err != nil {
			return nil, fmt.Errorf("artifact_uris of %s/%s: %w", o.SweepID, o.Stage, err)
		}
		o.CreatedAt = time.Unix(0, created)
		out = append(out, o)
	}
	return out, rows.Err()
}

// PerfResult is a point's perf result in one sweep: the one perf summary
// (point.PerfSummary; its headline figures are also columns, for queries)
// under the point's keys.
type PerfResult struct {
	SweepID, PointID, Identity, ProfileHash, ConfigKey, ExpName string
	Conc                                                        int
	point.PerfSummary
	// SourceSweep is the sweep the figures were measured in when they were
	// reused ("" when measured in this one).
	SourceSweep string
	JSON        []byte // the summary as JSON
}

// PutPerf records a point's perf result, once per (sweep, identity): an
// identical re-write is a no-op, a different one an ErrConflict.
func (s *Store) PutPerf(ctx context.Context, r PerfResult) error {
	if r.SweepID == "" || r.PointID == "" || r.Identity == "" {
		return fmt.Errorf("results: perf result of point %q (sweep %q): sweep id, point id and identity are required", r.PointID, r.SweepID)
	}
	if len(r.JSON) == 0 {
		r.JSON, _ = json.Marshal(r.PerfSummary)
	}
	if !json.Valid(r.JSON) {
		return fmt.Errorf("results: perf result of point %s (sweep %s): json is not valid JSON", r.PointID, r.SweepID)
	}
	what := "put perf result of point " + r.PointID + " (sweep " + r.SweepID + ")"
	var pw energy.Figures
	if r.Power != nil {
		pw = *r.Power
	}
	inserted, err := s.insertOnce(ctx, what, `INSERT INTO perf_results (sweep_id, point_id, identity, profile_hash, config_key, exp_name, conc,
			output_tput_per_gpu, tput_per_gpu, input_tput_per_gpu, interactivity, ttft_p90_ms, tpot_median_ms, e2el_median_ms,
			requests, failed, simulated, aggregate_uri, requests_uri, source_sweep, json, updated_at,
			power_source, power_valid, power_reasons, total_gpu_energy_j, avg_power_w, joules_per_output_token, joules_per_total_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sweep_id, identity) DO NOTHING`,
		r.SweepID, r.PointID, r.Identity, r.ProfileHash, r.ConfigKey, r.ExpName, r.Conc,
		r.OutputTputPerGPU, r.TputPerGPU, r.InputTputPerGPU, r.Interactivity, r.TTFTp90Ms, r.TPOTMedianMs, r.E2ELMedianMs,
		r.Requests, r.Failed, r.Simulated, r.AggregateURI, r.RequestsURI, r.SourceSweep, string(r.JSON), time.Now().UnixNano(),
		pw.Source, pw.Valid, strings.Join(pw.Reasons, ","), pw.TotalGPUEnergyJ, pw.AvgPowerW, pw.JoulesPerOutputToken, pw.JoulesPerTotalToken)
	if err != nil {
		return err
	}
	if inserted {
		return nil
	}
	var oldPoint, oldProfile, oldSource, oldJSON string
	if err := s.queryRow(ctx, `SELECT point_id, profile_hash, source_sweep, json FROM perf_results WHERE sweep_id = ? AND identity = ?`, r.SweepID, r.Identity).
		Scan(&oldPoint, &oldProfile, &oldSource, &oldJSON); err != nil {
		return fmt.Errorf("results: %s: reading the existing row: %w", what, err)
	}
	if oldPoint != r.PointID || oldProfile != r.ProfileHash || oldSource != r.SourceSweep || !jsonEqual([]byte(oldJSON), r.JSON) {
		return fmt.Errorf("results: %s: %w: the ledger already holds different perf figures for identity %s", what, ErrConflict, r.Identity)
	}
	return nil
}

// Perf lists a sweep's perf results by config key, concurrency and point.
func (s *Store) Perf(ctx context.Context, sweepID string) ([]PerfResult, error) {
	rows, err := s.query(ctx, `SELECT sweep_id, point_id, identity, profile_hash, config_key, exp_name, conc,
			output_tput_per_gpu, tput_per_gpu, input_tput_per_gpu, interactivity, ttft_p90_ms, tpot_median_ms, e2el_median_ms,
			requests, failed, simulated, aggregate_uri, requests_uri, source_sweep, json
		FROM perf_results WHERE sweep_id = ? ORDER BY config_key, conc, point_id`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: perf of %s: %w", sweepID, err)
	}
	defer rows.Close()
	var out []PerfResult
	for rows.Next() {
		var r PerfResult
		var blob string
		if err := rows.Scan(&r.SweepID, &r.PointID, &r.Identity, &r.ProfileHash, &r.ConfigKey, &r.ExpName, &r.Conc,
			&r.OutputTputPerGPU, &r.TputPerGPU, &r.InputTputPerGPU, &r.Interactivity, &r.TTFTp90Ms, &r.TPOTMedianMs, &r.E2ELMedianMs,
			&r.Requests, &r.Failed, &r.Simulated, &r.AggregateURI, &r.RequestsURI, &r.SourceSweep, &blob); err != nil {
			return nil, fmt.Errorf("results: perf of %s: %w", sweepID, err)
		}
		if blob != "" {
			r.JSON = []byte(blob)
			// The power figures and the load generator's p99 TTFT (no
			// column of their own) come back from the row's json.
			var rest struct {
				Power     *energy.Figures `json:"power"`
				TTFTp99Ms float64         `json:"ttft_p99_ms"`
			}
			if err := json.Unmarshal(r.JSON, &rest); err != nil {
				return nil, fmt.Errorf("results: perf of %s, point %s: json: %w", sweepID, r.PointID, err)
			}
			r.Power, r.TTFTp99Ms = rest.Power, rest.TTFTp99Ms
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// EvalResult is a point's GSM8K outcome.
type EvalResult struct {
	SweepID, PointID, Identity, ProfileHash string
	EMStrict, EMFlexible                    float64
	NEff                                    int
	Passed                                  bool
	Floor                                   float64
	Simulated                               bool
	SourceSweep                             string
	JSON                                    []byte
}

// PutEval records a point's eval result, once per (sweep, identity): an
// identical re-write is a no-op, a different one an ErrConflict.
func (s *Store) PutEval(ctx context.Context, r EvalResult) error {
	if r.SweepID == "" || r.PointID == "" || r.Identity == "" {
		return fmt.Errorf("results: eval result of point %q (sweep %q): sweep id, point id and identity are required", r.PointID, r.SweepID)
	}
	if len(r.JSON) > 0 && !json.Valid(r.JSON) {
		return fmt.Errorf("results: eval result of point %s (sweep %s): json is not valid JSON", r.PointID, r.SweepID)
	}
	what := "put eval result of point " + r.PointID + " (sweep " + r.SweepID + ")"
	inserted, err := s.insertOnce(ctx, what, `INSERT INTO eval_results (sweep_id, point_id, identity, profile_hash, em_strict, em_flexible, n_eff, passed, floor, simulated, source_sweep, json, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sweep_id, identity) DO NOTHING`,
		r.SweepID, r.PointID, r.Identity, r.ProfileHash, r.EMStrict, r.EMFlexible, r.NEff, r.Passed, r.Floor, r.Simulated, r.SourceSweep, string(r.JSON), time.Now().UnixNano())
	if err != nil {
		return err
	}
	if inserted {
		return nil
	}
	var old EvalResult
	var oldJSON string
	if err := s.queryRow(ctx, `SELECT point_id, profile_hash, em_strict, em_flexible, n_eff, passed, floor, simulated, source_sweep, json FROM eval_results WHERE sweep_id = ? AND identity = ?`,
		r.SweepID, r.Identity).Scan(&old.PointID, &old.ProfileHash, &old.EMStrict, &old.EMFlexible, &old.NEff, &old.Passed, &old.Floor, &old.Simulated, &old.SourceSweep, &oldJSON); err != nil {
		return fmt.Errorf("results: %s: reading the existing row: %w", what, err)
	}
	same := old.PointID == r.PointID && old.ProfileHash == r.ProfileHash && old.EMStrict == r.EMStrict &&
		old.EMFlexible == r.EMFlexible && old.NEff == r.NEff && old.Passed == r.Passed && old.Floor == r.Floor &&
		old.Simulated == r.Simulated && old.SourceSweep == r.SourceSweep && jsonEqual([]byte(oldJSON), r.JSON)
	if !same {
		return fmt.Errorf("results: %s: %w: the ledger already holds a different eval result for identity %s", what, ErrConflict, r.Identity)
	}
	return nil
}

// Evals lists a sweep's eval results by point.
func (s *Store) Evals(ctx context.Context, sweepID string) ([]EvalResult, error) {
	rows, err := s.query(ctx, `SELECT sweep_id, point_id, identity, profile_hash, em_strict, em_flexible, n_eff, passed, floor, simulated, source_sweep, json
		FROM eval_results WHERE sweep_id = ? ORDER BY point_id, identity`, sweepID)
	if err != nil {
		return nil, fmt.Errorf("results: evals of %s: %w", sweepID, err)
	}
	defer rows.Close()
	var out []EvalResult
	for rows.Next() {
		var r EvalResult
		var blob string
		if err := rows.Scan(&r.SweepID, &r.PointID, &r.Identity, &r.ProfileHash, &r.EMStrict, &r.EMFlexible, &r.NEff, &r.Passed, &r.Floor, &r.Simulated, &r.SourceSweep, &blob); err != nil {
			return nil, fmt.Errorf("results: evals of %s: %w", sweepID, err)
		}
		if blob != "" {
			r.JSON = []byte(blob)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// insertOnce runs an INSERT ... ON CONFLICT DO NOTHING and reports whether
// it inserted the row; when not, the caller compares the row that is there.
func (s *Store) insertOnce(ctx context.Context, what, q string, args ...any) (bool, error) {
	var n int64
	err := s.retryBusy(ctx, func() error {
		res, err := s.exec(ctx, q, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("results: %s: %w", what, err)
	}
	return n == 1, nil
}

// write runs one statement, retrying if SQLite reports the database busy
// after busy_timeout (a long writer in another process).
func (s *Store) write(ctx context.Context, what, q string, args ...any) error {
	err := s.retryBusy(ctx, func() error {
		_, err := s.exec(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("results: %s: %w", what, err)
	}
	return nil
}

func (s *Store) retryBusy(ctx context.Context, f func() error) error {
	delay := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !isBusy(err) || attempt == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// isBusy matches SQLITE_BUSY / SQLITE_LOCKED and their extended codes.
func isBusy(err error) bool {
	var coder interface{ Code() int }
	if errors.As(err, &coder) {
		switch coder.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	return false
}

func nullTime(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNull(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64)
}
