-- The attempt ledger: one row per attempt of a point's stage activity
-- (allocate through teardown), written by the worker that ran it (package
-- activities, AttemptLedger): a row when the attempt starts (outcome
-- running), completed when it ends (ok, failed, cancelled), or marked lost
-- by whoever notices it never ended (the stage's next attempt, or the
-- point's final record). The key is Temporal's own: (workflow, run,
-- activity, attempt), so a redelivered or retried write is a no-op and an
-- attempt has exactly one row. Failed, lost and cancelled rows carry the
-- failure class and the evidence: the error's type and message, the
-- excerpt (a log-tail signature, a job state), the last heartbeat details
-- and the worker's identity. stage_failures stays the point workflow's view
-- (the last attempt of each retry budget) and serves ledgers from before.

-- +goose Up
CREATE TABLE stage_attempts (
    workflow_id  TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    activity_id  TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    sweep_id     TEXT NOT NULL,
    point_id     TEXT NOT NULL,
    stage        TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    class        TEXT NOT NULL DEFAULT '',
    error_type   TEXT NOT NULL DEFAULT '',
    message      TEXT NOT NULL DEFAULT '',
    excerpt      TEXT NOT NULL DEFAULT '',
    heartbeat    TEXT NOT NULL DEFAULT '',
    worker       TEXT NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    PRIMARY KEY (workflow_id, run_id, activity_id, attempt)
);
CREATE INDEX stage_attempts_sweep ON stage_attempts (sweep_id, point_id, started_at);
CREATE INDEX stage_attempts_open ON stage_attempts (workflow_id, run_id, ended_at);

-- +goose Down
DROP TABLE stage_attempts;
