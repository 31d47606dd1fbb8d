-- Bad nodes (package nodehealth): one row per node and failed stage attempt
-- whose hardware-like evidence (node failure, GPU Xid, NCCL, NVLink) names
-- the node, written by the activity when the attempt fails, so the next
-- allocation of any point already sees it. key (workflow, activity,
-- attempt, node) keeps a retried write to one row. node_clears holds the
-- operator's "starter nodes clear": faults at or before the latest clear no
-- longer count.

-- +goose Up
CREATE TABLE node_faults (
    key          TEXT PRIMARY KEY,
    cluster      TEXT NOT NULL,
    node         TEXT NOT NULL,
    class        TEXT NOT NULL,
    excerpt      TEXT NOT NULL DEFAULT '',
    workflow_id  TEXT NOT NULL DEFAULT '',
    stage        TEXT NOT NULL DEFAULT '',
    job_id       TEXT NOT NULL DEFAULT '',
    at           INTEGER NOT NULL
);
CREATE INDEX node_faults_cluster_at ON node_faults (cluster, at);
CREATE TABLE node_clears (
    cluster  TEXT NOT NULL,
    node     TEXT NOT NULL,
    at       INTEGER NOT NULL,
    by_user  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (cluster, node, at)
);

-- +goose Down
DROP TABLE node_clears;
DROP TABLE node_faults;
