-- The results ledger. Times are unix nanoseconds (UTC) so "newest" is a
-- plain integer compare; JSON payloads are TEXT so the bytes round-trip
-- exactly and stay readable with the sqlite3 shell or psql.

-- +goose Up
CREATE TABLE sweeps (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL DEFAULT '',
    config_json TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT '',
    started_at  BIGINT,
    finished_at BIGINT,
    reuse_from  TEXT NOT NULL DEFAULT '',
    nightly     BOOLEAN NOT NULL DEFAULT FALSE
);

-- What a sweep start planned: the workflow input (point specs with their
-- identities and profiles) and the bytes of every file the plan read, so a
-- rerun needs only the ledger, not Temporal history.
CREATE TABLE sweep_plans (
    sweep_id   TEXT PRIMARY KEY,
    plan_json  TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE sweep_files (
    sweep_id TEXT NOT NULL,
    path     TEXT NOT NULL,
    role     TEXT NOT NULL DEFAULT '',
    sha256   TEXT NOT NULL,
    content  BYTEA NOT NULL,
    PRIMARY KEY (sweep_id, path)
);

CREATE TABLE points (
    sweep_id     TEXT NOT NULL,
    point_id     TEXT NOT NULL,
    identity     TEXT NOT NULL DEFAULT '',
    profile_hash TEXT NOT NULL DEFAULT '',
    baseline_key TEXT NOT NULL DEFAULT '',
    config_key   TEXT NOT NULL DEFAULT '',
    exp_name     TEXT NOT NULL DEFAULT '',
    topology     TEXT NOT NULL DEFAULT '',
    conc         BIGINT NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT '',
    failed_stage TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL,
    spec_json    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (sweep_id, point_id)
);
CREATE INDEX points_identity ON points (identity);
CREATE INDEX points_baseline_key ON points (baseline_key);

-- One durable output per (sweep, point identity, stage). profile_hash and
-- profile_json say how it was measured; source_sweep/source_run name where
-- a reused output was first produced (empty: produced by this sweep).
CREATE TABLE stage_outputs (
    id            BIGSERIAL PRIMARY KEY,
    sweep_id      TEXT NOT NULL,
    point_id      TEXT NOT NULL,
    identity      TEXT NOT NULL,
    stage         TEXT NOT NULL,
    profile_hash  TEXT NOT NULL DEFAULT '',
    profile_json  TEXT NOT NULL DEFAULT '',
    attempt       BIGINT NOT NULL DEFAULT 0,
    output_json   TEXT NOT NULL DEFAULT '',
    artifact_uris TEXT NOT NULL DEFAULT '[]',
    simulated     BOOLEAN NOT NULL DEFAULT FALSE,
    run_id        TEXT NOT NULL DEFAULT '',
    source_sweep  TEXT NOT NULL DEFAULT '',
    source_run    TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    UNIQUE (sweep_id, identity, stage)
);
CREATE INDEX stage_outputs_lookup ON stage_outputs (identity, stage, created_at);

CREATE TABLE perf_results (
    sweep_id            TEXT NOT NULL,
    point_id            TEXT NOT NULL,
    identity            TEXT NOT NULL,
    profile_hash        TEXT NOT NULL DEFAULT '',
    config_key          TEXT NOT NULL DEFAULT '',
    exp_name            TEXT NOT NULL DEFAULT '',
    conc                BIGINT NOT NULL DEFAULT 0,
    output_tput_per_gpu DOUBLE PRECISION NOT NULL DEFAULT 0,
    tput_per_gpu        DOUBLE PRECISION NOT NULL DEFAULT 0,
    input_tput_per_gpu  DOUBLE PRECISION NOT NULL DEFAULT 0,
    interactivity       DOUBLE PRECISION NOT NULL DEFAULT 0,
    ttft_p90_ms         DOUBLE PRECISION NOT NULL DEFAULT 0,
    tpot_median_ms      DOUBLE PRECISION NOT NULL DEFAULT 0,
    e2el_median_ms      DOUBLE PRECISION NOT NULL DEFAULT 0,
    requests            BIGINT NOT NULL DEFAULT 0,
    failed              BIGINT NOT NULL DEFAULT 0,
    simulated           BOOLEAN NOT NULL DEFAULT FALSE,
    aggregate_uri       TEXT NOT NULL DEFAULT '',
    requests_uri        TEXT NOT NULL DEFAULT '',
    source_sweep        TEXT NOT NULL DEFAULT '',
    json                TEXT NOT NULL DEFAULT '',
    updated_at          BIGINT NOT NULL,
    PRIMARY KEY (sweep_id, identity)
);

CREATE TABLE eval_results (
    sweep_id     TEXT NOT NULL,
    point_id     TEXT NOT NULL,
    identity     TEXT NOT NULL,
    profile_hash TEXT NOT NULL DEFAULT '',
    em_strict    DOUBLE PRECISION NOT NULL DEFAULT 0,
    em_flexible  DOUBLE PRECISION NOT NULL DEFAULT 0,
    n_eff        BIGINT NOT NULL DEFAULT 0,
    passed       BOOLEAN NOT NULL DEFAULT FALSE,
    floor        DOUBLE PRECISION NOT NULL DEFAULT 0,
    simulated    BOOLEAN NOT NULL DEFAULT FALSE,
    source_sweep TEXT NOT NULL DEFAULT '',
    json         TEXT NOT NULL DEFAULT '',
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (sweep_id, identity)
);

CREATE TABLE stage_runs (
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
);

CREATE TABLE nightly_points (
    sweep_id     TEXT NOT NULL,
    point_id     TEXT NOT NULL,
    baseline_key TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT '',
    night        BIGINT NOT NULL,
    PRIMARY KEY (sweep_id, point_id)
);
CREATE INDEX nightly_points_key ON nightly_points (baseline_key, night);

CREATE TABLE regression_reports (
    sweep_id     TEXT PRIMARY KEY,
    nightly_id   TEXT NOT NULL DEFAULT '',
    baseline     TEXT NOT NULL DEFAULT '',
    findings     BIGINT NOT NULL DEFAULT 0,
    report_json  TEXT NOT NULL DEFAULT '',
    artifact_uri TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);

-- +goose Down
DROP TABLE regression_reports;
DROP TABLE nightly_points;
DROP TABLE stage_runs;
DROP TABLE eval_results;
DROP TABLE perf_results;
DROP TABLE stage_outputs;
DROP TABLE points;
DROP TABLE sweep_files;
DROP TABLE sweep_plans;
DROP TABLE sweeps;
