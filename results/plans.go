package results

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// SweepPlan is what a sweep start planned, kept so that `starter rerun`
// needs only the ledger: the workflow input (point specs with identities
// and profiles) and the bytes of every file the plan read.
type SweepPlan struct {
	SweepID   string
	PlanJSON  []byte
	Files     []PlanFile
	CreatedAt time.Time
}

// PlanFile is one input file of a plan.
type PlanFile struct {
	Path    string // as the planner saw it (absolute)
	Role    string // sweep, cluster, config, runners, recipe, golden-al
	Content []byte
}

// SHA256 is the file's content hash.
func (f PlanFile) SHA256() string {
	sum := sha256.Sum256(f.Content)
	return hex.EncodeToString(sum[:])
}

// PutSweepPlan stores a sweep's plan once. Storing the same plan again (a
// second `sweep start` that attaches to the running sweep) is a no-op; a
// different plan under the same sweep ID is an ErrConflict.
func (s *Store) PutSweepPlan(ctx context.Context, p SweepPlan) error {
	if p.SweepID == "" || !json.Valid(p.PlanJSON) {
		return fmt.Errorf("results: sweep plan %q: sweep id and a JSON plan are required", p.SweepID)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	if old, ok, err := s.GetSweepPlan(ctx, p.SweepID); err != nil {
		return err
	} else if ok {
		if !jsonEqual(old.PlanJSON, p.PlanJSON) || !sameFiles(old.Files, p.Files) {
			return fmt.Errorf("results: sweep plan %s: %w: the ledger already holds a different plan for this sweep ID", p.SweepID, ErrConflict)
		}
		return nil
	}
	err := s.retryBusy(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO sweep_plans (sweep_id, plan_json, created_at) VALUES (?, ?, ?)`),
			p.SweepID, string(p.PlanJSON), p.CreatedAt.UnixNano()); err != nil {
			return err
		}
		ins := s.d.rebind(`INSERT INTO sweep_files (sweep_id, path, role, sha256, content) VALUES (?, ?, ?, ?, ?)`)
		for _, f := range p.Files {
			if _, err := tx.ExecContext(ctx, ins, p.SweepID, f.Path, f.Role, f.SHA256(), f.Content); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("results: put sweep plan %s: %w", p.SweepID, err)
	}
	return nil
}

func sameFiles(a, b []PlanFile) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]string{}
	for _, f := range a {
		m[f.Path] = f.SHA256()
	}
	for _, f := range b {
		if m[f.Path] != f.SHA256() {
			return false
		}
	}
	return true
}

// GetSweepPlan returns a sweep's stored plan; found is false if none.
func (s *Store) GetSweepPlan(ctx context.Context, sweepID string) (SweepPlan, bool, error) {
	p := SweepPlan{SweepID: sweepID}
	var plan string
	var created int64
	err := s.queryRow(ctx, `SELECT plan_json, created_at FROM sweep_plans WHERE sweep_id = ?`, sweepID).Scan(&plan, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return SweepPlan{}, false, nil
	}
	if err != nil {
		return SweepPlan{}, false, fmt.Errorf("results: sweep plan %s: %w", sweepID, err)
	}
	p.PlanJSON, p.CreatedAt = []byte(plan), time.Unix(0, created)
	rows, err := s.query(ctx, `SELECT path, role, content FROM sweep_files WHERE sweep_id = ? ORDER BY path`, sweepID)
	if err != nil {
		return SweepPlan{}, false, fmt.Errorf("results: sweep files of %s: %w", sweepID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var f PlanFile
		if err := rows.Scan(&f.Path, &f.Role, &f.Content); err != nil {
			return SweepPlan{}, false, fmt.Errorf("results: sweep files of %s: %w", sweepID, err)
		}
		p.Files = append(p.Files, f)
	}
	return p, true, rows.Err()
}

// ReadPlanFiles reads the content of every file named in files.
func ReadPlanFiles(files []PlanFile) ([]PlanFile, error) {
	out := make([]PlanFile, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("results: plan file %s: %w", f.Path, err)
		}
		f.Content = data
		out = append(out, f)
	}
	return out, nil
}
