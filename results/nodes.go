package results

import (
	"context"
	"fmt"
	"time"

	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/nodehealth"
)

// PutNodeFault records one fault against a node (table node_faults). A
// second write with the same Key is a no-op, so a retried activity counts
// once.
func (s *Store) PutNodeFault(ctx context.Context, f nodehealth.Fault) error {
	if f.Key == "" || f.Cluster == "" || f.Node == "" || f.At.IsZero() {
		return fmt.Errorf("results: node fault %+v: key, cluster, node and time are required", f)
	}
	_, err := s.insertOnce(ctx, "put node fault of "+f.Node, s.d.rebind(`INSERT INTO node_faults
		(key, cluster, node, class, excerpt, workflow_id, stage, job_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO NOTHING`),
		f.Key, f.Cluster, f.Node, string(f.Class), f.Excerpt, f.WorkflowID, f.Stage, f.JobID, f.At.UnixNano())
	return err
}

// NodeFaults lists a cluster's node faults (every cluster's for "") at or
// after since, oldest first.
func (s *Store) NodeFaults(ctx context.Context, cluster string, since time.Time) ([]nodehealth.Fault, error) {
	rows, err := s.query(ctx, `SELECT key, cluster, node, class, excerpt, workflow_id, stage, job_id, at
		FROM node_faults WHERE (? = '' OR cluster = ?) AND at >= ? ORDER BY at, key`, cluster, cluster, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("results: node faults of %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []nodehealth.Fault
	for rows.Next() {
		var f nodehealth.Fault
		var class string
		var at int64
		if err := rows.Scan(&f.Key, &f.Cluster, &f.Node, &class, &f.Excerpt, &f.WorkflowID, &f.Stage, &f.JobID, &at); err != nil {
			return nil, fmt.Errorf("results: node faults of %s: %w", cluster, err)
		}
		f.Class, f.At = failure.Class(class), time.Unix(0, at)
		out = append(out, f)
	}
	return out, rows.Err()
}

// PutNodeClear records that an operator let a node back in.
func (s *Store) PutNodeClear(ctx context.Context, c nodehealth.Clear) error {
	if c.Cluster == "" || c.Node == "" || c.At.IsZero() {
		return fmt.Errorf("results: node clear %+v: cluster, node and time are required", c)
	}
	_, err := s.insertOnce(ctx, "clear node "+c.Node, s.d.rebind(`INSERT INTO node_clears (cluster, node, at, by_user)
		VALUES (?, ?, ?, ?) ON CONFLICT (cluster, node, at) DO NOTHING`), c.Cluster, c.Node, c.At.UnixNano(), c.By)
	return err
}

// NodeClears lists a cluster's clears (every cluster's for ""), oldest
// first.
func (s *Store) NodeClears(ctx context.Context, cluster string) ([]nodehealth.Clear, error) {
	rows, err := s.query(ctx, `SELECT cluster, node, at, by_user FROM node_clears WHERE (? = '' OR cluster = ?) ORDER BY at, node`, cluster, cluster)
	if err != nil {
		return nil, fmt.Errorf("results: node clears of %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []nodehealth.Clear
	for rows.Next() {
		var c nodehealth.Clear
		var at int64
		if err := rows.Scan(&c.Cluster, &c.Node, &at, &c.By); err != nil {
			return nil, fmt.Errorf("results: node clears of %s: %w", cluster, err)
		}
		c.At = time.Unix(0, at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// NodeHealth judges a cluster's nodes (every cluster's for "") under p at now: the faults within the
// window and every clear.
func (s *Store) NodeHealth(ctx context.Context, cluster string, p nodehealth.Policy, now time.Time) ([]nodehealth.Node, error) {
	faults, err := s.NodeFaults(ctx, cluster, now.Add(-p.Window))
	if err != nil {
		return nil, err
	}
	clears, err := s.NodeClears(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return nodehealth.Judge(p, faults, clears, now), nil
}
