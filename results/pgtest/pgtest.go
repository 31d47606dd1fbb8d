// Package pgtest runs a throwaway PostgreSQL cluster for tests: initdb into a
// temp dir, the server on a free 127.0.0.1 port with its unix socket in the
// same dir, one fresh database per caller, shutdown and rm -rf at the end.
// It uses the distribution's binaries (Debian: /usr/lib/postgresql/N/bin)
// and, when running as root, runs them as the "postgres" user (the package
// creates it) because initdb and postgres refuse root.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sweepflow/sweepflow/internal/freeport"
	"github.com/sweepflow/sweepflow/internal/prereq"
)

// ErrNoPostgres means no PostgreSQL server binaries were found.
var ErrNoPostgres = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found: install Debian's postgresql package")

// Cluster is a running throwaway server.
type Cluster struct {
	dir    string // temp root: data/, sock/, server.log
	bin    string // directory with initdb and postgres
	port   int
	cred   *syscall.Credential // the postgres user when we are root
	server *exec.Cmd
	exited chan struct{}

	mu  sync.Mutex
	seq int
}

// FindBin returns the directory holding initdb and postgres: $PATH first, then
// the newest /usr/lib/postgresql/N/bin (where Debian keeps them off $PATH).
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// Start creates and starts a cluster. Call Stop when done. The server runs
// as a child of this process that the kernel kills if the process dies, so a
// crashed or killed test binary does not leave a server behind.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root and there is no postgres user to run initdb as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir(): its parents are 0700 root-owned, which the postgres
	// user cannot traverse.
	c.dir, err = os.MkdirTemp("", "sweepflow-pg-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	sock := filepath.Join(c.dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return nil, err
	}
	if c.cred != nil {
		for _, p := range []string{c.dir, sock} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: chown %s: %w", p, err)
			}
		}
	}
	data := filepath.Join(c.dir, "data")
	initdb := c.command(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	if c.port, err = freeport.Loopback(); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(c.dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// Not exec.CommandContext: the server must outlive Start's context.
	c.server = c.command(context.Background(), "postgres", "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(c.port), "-c", "unix_socket_directories="+sock,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	c.server.Stdout, c.server.Stderr = logf, logf
	c.server.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := c.server.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	c.exited = make(chan struct{})
	go func() { c.server.Wait(); close(c.exited) }()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return nil, fmt.Errorf("pgtest: %w\nserver log:\n%s", err, log)
	}
	ok = true
	return c, nil
}

// command builds a server binary's command, as the postgres user when we
// are root (initdb and postgres refuse to run as root).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

func (c *Cluster) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	db, err := sql.Open("pgx", c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready after %s: %v", limit, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DSN is the URL of database db on this cluster (trust auth, no password).
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// NewDatabase creates a fresh, empty database and returns its DSN, so tests
// sharing one cluster never see each other's tables.
func (c *Cluster) NewDatabase(ctx context.Context, prefix string) (string, error) {
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("%s_%d", sanitize(prefix), c.seq)
	c.mu.Unlock()
	admin, err := sql.Open("pgx", c.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// sanitize makes a database name from a test name.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "db"
	}
	return b.String()
}

// Stop stops the server (fast shutdown, then SIGKILL after 10 s) and
// removes its directory.
func (c *Cluster) Stop() {
	if c == nil || c.dir == "" {
		return
	}
	if c.server != nil && c.server.Process != nil {
		c.server.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			c.server.Process.Kill()
			<-c.exited
		}
	}
	os.RemoveAll(c.dir)
}

// Shared is a lazily started cluster for one test binary: the first Get
// starts it; the package's TestMain calls Stop after the tests ran.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Get returns the shared cluster, starting it on first use.
func (s *Shared) Get(ctx context.Context) (*Cluster, error) {
	s.once.Do(func() { s.c, s.err = Start(ctx) })
	return s.c, s.err
}

// Stop stops the shared cluster if it was started.
func (s *Shared) Stop() {
	if s.c != nil {
		s.c.Stop()
	}
}

// Required reports whether a missing PostgreSQL must fail the test rather
// than skip it: under CI the package is installed, so absence is a defect.
func Required() bool { return prereq.CI() }
