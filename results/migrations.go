package results

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migration is one schema step. Versions are dense and never edited once
// released: a change is a new migration. Each step carries its SQL per
// dialect, since the two engines differ in types (SQLite's INTEGER is 64-bit
// and its booleans are integers; PostgreSQL needs BIGINT, DOUBLE PRECISION,
// BOOLEAN and BIGSERIAL).
type migration struct {
	version  int
	name     string
	sqlite   []string
	postgres []string
}

func (m migration) stmts(d dialect) []string {
	if d == postgres {
		return m.postgres
	}
	return m.sqlite
}

// Times are unix nanoseconds (UTC) so "newest" is a plain integer compare;
// JSON payloads are TEXT so the bytes round-trip exactly and stay readable
// with the sqlite3 shell or psql.
var migrations = []migration{
	{version: 1, name: "ledger",
		sqlite: []string{
			`CREATE TABLE sweeps (
			id          TEXT PRIMARY KEY,
			name        TEXT NOT NULL DEFAULT '',
			config_json TEXT NOT NULL DEFAULT '',
			status      TEXT NOT NULL DEFAULT '',
			started_at  INTEGER,
			finished_at INTEGER,
			reuse_from  TEXT NOT NULL DEFAULT '',
			nightly     INTEGER NOT NULL DEFAULT 0
		)`,
			`CREATE TABLE points (
			sweep_id     TEXT NOT NULL,
			point_id     TEXT NOT NULL,
			fingerprint  TEXT NOT NULL DEFAULT '',
			config_key   TEXT NOT NULL DEFAULT '',
			exp_name     TEXT NOT NULL DEFAULT '',
			topology     TEXT NOT NULL DEFAULT '',
			conc         INTEGER NOT NULL DEFAULT 0,
			status       TEXT NOT NULL DEFAULT '',
			failed_stage TEXT NOT NULL DEFAULT '',
			error        TEXT NOT NULL DEFAULT '',
			updated_at   INTEGER NOT NULL,
			PRIMARY KEY (sweep_id, point_id)
		)`,
			`CREATE INDEX points_fingerprint ON points (fingerprint)`,
			`CREATE TABLE stage_outputs (
			id            INTEGER PRIMARY KEY AUTOINCREMENT,
			sweep_id      TEXT NOT NULL,
			point_id      TEXT NOT NULL,
			fingerprint   TEXT NOT NULL,
			stage         TEXT NOT NULL,
			attempt       INTEGER NOT NULL DEFAULT 0,
			output_json   TEXT NOT NULL DEFAULT '',
			artifact_uris TEXT NOT NULL DEFAULT '[]',
			simulated     INTEGER NOT NULL DEFAULT 0,
			created_at    INTEGER NOT NULL,
			UNIQUE (sweep_id, fingerprint, stage)
		)`,
			`CREATE INDEX stage_outputs_lookup ON stage_outputs (fingerprint, stage, created_at)`,
			`CREATE TABLE perf_results (
			sweep_id             TEXT NOT NULL,
			point_id             TEXT NOT NULL,
			fingerprint          TEXT NOT NULL,
			config_key           TEXT NOT NULL DEFAULT '',
			exp_name             TEXT NOT NULL DEFAULT '',
			conc                 INTEGER NOT NULL DEFAULT 0,
			output_tput_per_gpu  REAL NOT NULL DEFAULT 0,
			tput_per_gpu         REAL NOT NULL DEFAULT 0,
			input_tput_per_gpu   REAL NOT NULL DEFAULT 0,
			interactivity        REAL NOT NULL DEFAULT 0,
			ttft_p90_ms          REAL NOT NULL DEFAULT 0,
			tpot_median_ms       REAL NOT NULL DEFAULT 0,
			e2el_median_ms       REAL NOT NULL DEFAULT 0,
			simulated            INTEGER NOT NULL DEFAULT 0,
			json                 TEXT NOT NULL DEFAULT '',
			updated_at           INTEGER NOT NULL,
			PRIMARY KEY (sweep_id, fingerprint, conc)
		)`,
			`CREATE TABLE eval_results (
			sweep_id     TEXT NOT NULL,
			point_id     TEXT NOT NULL,
			fingerprint  TEXT NOT NULL,
			em_strict    REAL NOT NULL DEFAULT 0,
			em_flexible  REAL NOT NULL DEFAULT 0,
			n_eff        INTEGER NOT NULL DEFAULT 0,
			passed       INTEGER NOT NULL DEFAULT 0,
			floor        REAL NOT NULL DEFAULT 0,
			simulated    INTEGER NOT NULL DEFAULT 0,
			json         TEXT NOT NULL DEFAULT '',
			updated_at   INTEGER NOT NULL,
			PRIMARY KEY (sweep_id, fingerprint)
		)`,
		},
		postgres: []string{
			`CREATE TABLE sweeps (
			id          TEXT PRIMARY KEY,
			name        TEXT NOT NULL DEFAULT '',
			config_json TEXT NOT NULL DEFAULT '',
			status      TEXT NOT NULL DEFAULT '',
			started_at  BIGINT,
			finished_at BIGINT,
			reuse_from  TEXT NOT NULL DEFAULT '',
			nightly     BOOLEAN NOT NULL DEFAULT FALSE
		)`,
			`CREATE TABLE points (
			sweep_id     TEXT NOT NULL,
			point_id     TEXT NOT NULL,
			fingerprint  TEXT NOT NULL DEFAULT '',
			config_key   TEXT NOT NULL DEFAULT '',
			exp_name     TEXT NOT NULL DEFAULT '',
			topology     TEXT NOT NULL DEFAULT '',
			conc         BIGINT NOT NULL DEFAULT 0,
			status       TEXT NOT NULL DEFAULT '',
			failed_stage TEXT NOT NULL DEFAULT '',
			error        TEXT NOT NULL DEFAULT '',
			updated_at   BIGINT NOT NULL,
			PRIMARY KEY (sweep_id, point_id)
		)`,
			`CREATE INDEX points_fingerprint ON points (fingerprint)`,
			`CREATE TABLE stage_outputs (
			id            BIGSERIAL PRIMARY KEY,
			sweep_id      TEXT NOT NULL,
			point_id      TEXT NOT NULL,
			fingerprint   TEXT NOT NULL,
			stage         TEXT NOT NULL,
			attempt       BIGINT NOT NULL DEFAULT 0,
			output_json   TEXT NOT NULL DEFAULT '',
			artifact_uris TEXT NOT NULL DEFAULT '[]',
			simulated     BOOLEAN NOT NULL DEFAULT FALSE,
			created_at    BIGINT NOT NULL,
			UNIQUE (sweep_id, fingerprint, stage)
		)`,
			`CREATE INDEX stage_outputs_lookup ON stage_outputs (fingerprint, stage, created_at)`,
			`CREATE TABLE perf_results (
			sweep_id             TEXT NOT NULL,
			point_id             TEXT NOT NULL,
			fingerprint          TEXT NOT NULL,
			config_key           TEXT NOT NULL DEFAULT '',
			exp_name             TEXT NOT NULL DEFAULT '',
			conc                 BIGINT NOT NULL DEFAULT 0,
			output_tput_per_gpu  DOUBLE PRECISION NOT NULL DEFAULT 0,
			tput_per_gpu         DOUBLE PRECISION NOT NULL DEFAULT 0,
			input_tput_per_gpu   DOUBLE PRECISION NOT NULL DEFAULT 0,
			interactivity        DOUBLE PRECISION NOT NULL DEFAULT 0,
			ttft_p90_ms          DOUBLE PRECISION NOT NULL DEFAULT 0,
			tpot_median_ms       DOUBLE PRECISION NOT NULL DEFAULT 0,
			e2el_median_ms       DOUBLE PRECISION NOT NULL DEFAULT 0,
			simulated            BOOLEAN NOT NULL DEFAULT FALSE,
			json                 TEXT NOT NULL DEFAULT '',
			updated_at           BIGINT NOT NULL,
			PRIMARY KEY (sweep_id, fingerprint, conc)
		)`,
			`CREATE TABLE eval_results (
			sweep_id     TEXT NOT NULL,
			point_id     TEXT NOT NULL,
			fingerprint  TEXT NOT NULL,
			em_strict    DOUBLE PRECISION NOT NULL DEFAULT 0,
			em_flexible  DOUBLE PRECISION NOT NULL DEFAULT 0,
			n_eff        BIGINT NOT NULL DEFAULT 0,
			passed       BOOLEAN NOT NULL DEFAULT FALSE,
			floor        DOUBLE PRECISION NOT NULL DEFAULT 0,
			simulated    BOOLEAN NOT NULL DEFAULT FALSE,
			json         TEXT NOT NULL DEFAULT '',
			updated_at   BIGINT NOT NULL,
			PRIMARY KEY (sweep_id, fingerprint)
		)`,
		}},
	// v2: the point's full spec (identity fields for exports: hw, framework,
	// precision, image, topology) and the per-stage timings of each point.
	{version: 2, name: "point spec and stage runs",
		sqlite: []string{
			`ALTER TABLE points ADD COLUMN spec_json TEXT NOT NULL DEFAULT ''`,
			`CREATE TABLE stage_runs (
			sweep_id   TEXT NOT NULL,
			point_id   TEXT NOT NULL,
			seq        INTEGER NOT NULL,
			stage      TEXT NOT NULL,
			outcome    TEXT NOT NULL DEFAULT '',
			rounds     INTEGER NOT NULL DEFAULT 0,
			error      TEXT NOT NULL DEFAULT '',
			started_at INTEGER,
			ended_at   INTEGER,
			PRIMARY KEY (sweep_id, point_id, seq)
		)`,
		},
		postgres: []string{
			`ALTER TABLE points ADD COLUMN spec_json TEXT NOT NULL DEFAULT ''`,
			`CREATE TABLE stage_runs (
			sweep_id   TEXT NOT NULL,
			point_id   TEXT NOT NULL,
			seq        BIGINT NOT NULL,
			stage      TEXT NOT NULL,
			outcome    TEXT NOT NULL DEFAULT '',
			rounds     BIGINT NOT NULL DEFAULT 0,
			error      TEXT NOT NULL DEFAULT '',
			started_at BIGINT,
			ended_at   BIGINT,
			PRIMARY KEY (sweep_id, point_id, seq)
		)`,
		}},
}

// pgMigrateLock is the advisory lock key that serialises migrations across
// processes on PostgreSQL ("sweepflo" in ASCII).
const pgMigrateLock = 0x7377656570666c6f

// migrate applies pending migrations, each in its own write transaction that
// re-checks the version inside the lock, so two processes opening the same
// fresh database at once apply each step exactly once. SQLite serialises
// writers itself (_txlock=immediate); PostgreSQL takes a session advisory
// lock for the whole run, since READ COMMITTED would let two processes both
// see a step as pending.
func migrate(ctx context.Context, db *sql.DB, d dialect, migrations []migration) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("results: migrate: %w", err)
	}
	defer conn.Close()
	if d == postgres {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(pgMigrateLock)); err != nil {
			return fmt.Errorf("results: migrate: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(pgMigrateLock))
	}
	appliedAt := "INTEGER"
	if d == postgres {
		appliedAt = "BIGINT"
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at `+appliedAt+` NOT NULL
	)`); err != nil {
		return fmt.Errorf("results: create schema_migrations: %w", err)
	}
	var newest int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("results: read schema version: %w", err)
	}
	if last := migrations[len(migrations)-1].version; newest > last {
		return fmt.Errorf("results: database schema version %d is newer than this build knows (%d); upgrade sweepflow", newest, last)
	}
	for _, m := range migrations {
		if m.version <= newest {
			continue
		}
		if err := applyMigration(ctx, conn, d, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, conn *sql.Conn, d dialect, m migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("results: migration %d (%s): %w", m.version, m.name, err)
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&done); err != nil {
		return fmt.Errorf("results: migration %d (%s): %w", m.version, m.name, err)
	}
	if done > 0 {
		return nil // another process got there first
	}
	for i, stmt := range m.stmts(d) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("results: migration %d (%s) statement %d: %w", m.version, m.name, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("results: migration %d (%s): %w", m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: migration %d (%s): commit: %w", m.version, m.name, err)
	}
	return nil
}
