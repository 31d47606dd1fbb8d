package results

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// The schema is goose SQL migrations, one directory per dialect (the engines
// differ in types: SQLite's INTEGER is 64-bit and its booleans are integers;
// PostgreSQL needs BIGINT, DOUBLE PRECISION, BOOLEAN and BIGSERIAL). A
// released migration is never edited: a change is a new file. Goose runs
// through a Provider with the global registry off, so nothing depends on
// init() order.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// versionTable is goose's bookkeeping table.
const versionTable = "goose_db_version"

// pgMigrateLock is the advisory lock key that serialises migrations across
// processes on PostgreSQL ("sweepflo" in ASCII).
const pgMigrateLock = 0x7377656570666c6f

func migrationsFS(d dialect) fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations/"+d.String())
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// migrate brings the schema up to date. PostgreSQL serialises concurrent
// migrators with a session advisory lock. SQLite has no such lock: when two
// processes migrate one fresh file at once, the loser's CREATE fails, and a
// second pass (which then sees the winner's version) succeeds.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	if err := refuseLegacy(ctx, db, d); err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithTableName(versionTable)}
	gd := goose.DialectSQLite3
	if d == postgres {
		gd = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(pgMigrateLock))
		if err != nil {
			return fmt.Errorf("results: migrate: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, db, migrationsFS(d), opts...)
	if err != nil {
		return fmt.Errorf("results: migrate: %w", err)
	}
	known := p.ListSources()
	newest := known[len(known)-1].Version
	for attempt := 0; ; attempt++ {
		cur, verr := p.GetDBVersion(ctx)
		if verr == nil && cur > newest {
			return fmt.Errorf("results: database schema version %d is newer than this build knows (%d); upgrade sweepflow", cur, newest)
		}
		_, err = p.Up(ctx)
		if err == nil {
			return nil
		}
		if d == postgres || attempt == 3 || ctx.Err() != nil {
			return fmt.Errorf("results: migrate: %w", err)
		}
		time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
	}
}

// ErrLegacySchema: the database was created by sweepflow's own migrator,
// before the ledger was keyed by point identity. Its rows cannot be keyed
// by identity after the fact, so it is not migrated.
var ErrLegacySchema = errors.New("results store predates point identities (schema_migrations from sweepflow's old migrator)")

func refuseLegacy(ctx context.Context, db *sql.DB, d dialect) error {
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	if d == postgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'`
	}
	var n int
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return fmt.Errorf("results: migrate: %w", err)
	}
	if n > 0 {
		return ErrLegacySchema
	}
	return nil
}

// moveLegacyAside renames an old-schema SQLite ledger (and its WAL files)
// to <file>.pre-identity-<unix time>, so the store starts fresh without
// destroying anything.
func moveLegacyAside(path string) (string, error) {
	dst := fmt.Sprintf("%s.pre-identity-%d", path, time.Now().Unix())
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + ext); err == nil {
			_ = os.Rename(path+ext, dst+ext)
		}
	}
	return dst, nil
}
