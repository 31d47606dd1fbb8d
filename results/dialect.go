package results

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for database/sql
)

// dialect is the SQL engine behind a Store. Queries are written once with
// SQLite's "?" placeholders and rebound for PostgreSQL.
type dialect int

const (
	sqliteDialect dialect = iota
	postgres
)

func (d dialect) String() string {
	if d == postgres {
		return "postgres"
	}
	return "sqlite"
}

// rebind turns "?" placeholders into PostgreSQL's "$1, $2, ..." and leaves
// quoted literals and identifiers alone. SQLite queries pass through.
func (d dialect) rebind(q string) string {
	if d != postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte // ' or " while inside a quoted token
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// pgConnectTimeoutSec bounds how long Open waits for an unreachable server
// when the DSN does not say (libpq's connect_timeout).
const pgConnectTimeoutSec = 10

// openPostgres connects through pgx's database/sql driver, so every query
// shares the SQLite code path apart from placeholders and DDL.
func openPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// url.Error quotes the whole URL, password included.
		return nil, fmt.Errorf("results: store %q: not a valid postgres:// URL", redact(dsn))
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.Itoa(pgConnectTimeoutSec))
		u.RawQuery = q.Encode()
	}
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, fmt.Errorf("results: open %s: %w", redact(dsn), err)
	}
	db.SetMaxOpenConns(8)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: open %s: %s", redact(dsn), scrub(err.Error(), u))
	}
	return db, nil
}

// scrub removes a URL's password from a driver message, in case a driver
// ever echoes the connection string.
func scrub(msg string, u *url.URL) string {
	if u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "***")
	}
	return msg
}
