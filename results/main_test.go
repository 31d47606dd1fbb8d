package results

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/results/pgtest"
)

// pg is one throwaway PostgreSQL cluster for the whole test binary, started
// on first use; each test gets its own database in it.
var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// backend makes fresh, empty stores of one dialect.
type backend struct {
	name string
	// newDSN returns the DSN of a fresh store (created on first Open).
	newDSN func(t testing.TB) string
}

var backends = []backend{
	{name: "sqlite", newDSN: func(t testing.TB) string {
		return filepath.Join(t.TempDir(), "state", "results.db")
	}},
	{name: "postgres", newDSN: func(t testing.TB) string {
		c, err := pg.Get(context.Background())
		if errors.Is(err, pgtest.ErrNoPostgres) && !pgtest.Required() {
			t.Skipf("PostgreSQL not installed (apt-get install postgresql); skipping the postgres backend. Under CI=true this fails. (%v)", err)
		}
		require.NoError(t, err, "start throwaway PostgreSQL")
		dsn, err := c.NewDatabase(context.Background(), t.Name())
		require.NoError(t, err)
		return dsn
	}},
}

// forEachBackend runs f as a parallel subtest per dialect.
func forEachBackend(t *testing.T, f func(t *testing.T, be backend)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f(t, be)
		})
	}
}

// open opens a fresh store of the backend and closes it at cleanup.
func (be backend) open(t testing.TB) (*Store, string) {
	t.Helper()
	dsn := be.newDSN(t)
	s, err := Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, dsn
}
