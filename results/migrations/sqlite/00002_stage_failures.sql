-- One row per failed stage attempt the point workflow saw (the last attempt
-- of each retry budget, and each heartbeat-timed-out budget): its failure
-- class (package failure), a short excerpt of the evidence, and when it
-- ended. seq is the stage run's position in stage_runs; n counts the run's
-- failures from 0. Rows are replaced with the point's stage runs.

-- +goose Up
CREATE TABLE stage_failures (
    sweep_id  TEXT NOT NULL,
    point_id  TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    n         INTEGER NOT NULL,
    stage     TEXT NOT NULL,
    class     TEXT NOT NULL,
    excerpt   TEXT NOT NULL DEFAULT '',
    at        INTEGER,
    PRIMARY KEY (sweep_id, point_id, seq, n)
);
CREATE INDEX stage_failures_class ON stage_failures (class);

-- +goose Down
DROP TABLE stage_failures;
