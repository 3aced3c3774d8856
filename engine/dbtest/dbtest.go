// Package dbtest gives each integration test its own migrated database on a
// real PostgreSQL server.
//
// The server is MAESTRO_TEST_DATABASE_URL when set (any database there the
// role may create databases from); otherwise a throwaway cluster that the
// first test package to need it starts from the installed PostgreSQL binaries
// and that later packages of the same `go test` run reuse. Migrations are
// applied once into a template database keyed by the migrations' fingerprint;
// each test then gets a copy of the template, dropped when the test ends.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/localpg"
	"github.com/maestro-aws/maestro/engine/pgparam"
	"github.com/maestro-aws/maestro/migrations"
)

// ClusterDir is where the shared throwaway test cluster lives unless
// MAESTRO_TEST_PGDIR says otherwise.
func ClusterDir() string {
	if d := os.Getenv("MAESTRO_TEST_PGDIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("maestro-pgtest-%d", os.Getuid()))
}

// TestSettings are the server settings of the throwaway test cluster:
// durability is traded for speed because the data is thrown away.
var TestSettings = map[string]string{
	"fsync":              "off",
	"full_page_writes":   "off",
	"synchronous_commit": "off",
	"max_connections":    "500",
	"shared_buffers":     "128MB",
}

// DurableSettings are used instead when MAESTRO_TEST_DURABLE is set, as
// `make bench` does: fsync and synchronous_commit stay on, as in production,
// so that benchmarks pay the real cost of every commit.
var DurableSettings = map[string]string{
	"max_connections": "500",
	"shared_buffers":  "256MB",
}

var (
	serverOnce sync.Once
	adminURL   string
	serverErr  error
)

// server returns the admin connection string, starting the shared cluster on
// first use.
func server() (string, error) {
	serverOnce.Do(func() {
		if u := os.Getenv("MAESTRO_TEST_DATABASE_URL"); u != "" {
			adminURL = u
			return
		}
		adminURL, serverErr = startSharedCluster()
	})
	return adminURL, serverErr
}

func startSharedCluster() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := ClusterDir()
	// A file lock serialises cluster start-up between the test binaries that
	// `go test ./...` runs in parallel.
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	settings := TestSettings
	if os.Getenv("MAESTRO_TEST_DURABLE") != "" {
		settings = DurableSettings
	}
	c, err := localpg.Open(ctx, localpg.Options{Dir: dir, Settings: settings})
	if err != nil {
		return "", err
	}
	if err := c.Start(ctx); err != nil {
		return "", err
	}
	return c.URL("postgres"), nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

var (
	templateMu    sync.Mutex
	templateReady = map[string]bool{}
)

// ensureTemplate creates the migrated template database once per server and
// migration set. An advisory lock keeps concurrent test binaries from
// building it twice.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	name := "maestro_tpl_" + migrations.Fingerprint()
	templateMu.Lock()
	defer templateMu.Unlock()
	if templateReady[name] {
		return name, nil
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	h := fnv.New64a()
	h.Write([]byte(name))
	lockKey := int64(h.Sum64() >> 1)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey) //nolint:errcheck

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if !exists {
		// Build under a temporary name and rename, so a crash mid-migration
		// never leaves a half-migrated template behind.
		building := name + "_building"
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("drop stale template: %w", err)
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
			return "", fmt.Errorf("create template: %w", err)
		}
		if _, err := migrations.Apply(ctx, withDatabase(admin, building), nil); err != nil {
			return "", err
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("publish template: %w", err)
		}
	}
	templateReady[name] = true
	return name, nil
}

func withDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(fmt.Sprintf("dbtest: bad server url: %v", err))
	}
	u.Path = "/" + db
	return u.String()
}

// URL creates a fresh migrated database for t and returns its connection
// string (through a delay proxy when DelayEnv is set). The database is
// dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return createFrom(t, admin, tpl)
}

// EmptyURL creates a fresh database without any migration applied (an
// older release's binary migrates it itself; a restore fills it) and
// returns its connection string. The database is dropped when t ends.
func EmptyURL(t testing.TB) string {
	t.Helper()
	admin, err := server()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return createFrom(t, admin, "template0")
}

// createFrom creates a database from template tpl on the server admin
// connects to, dropped when t ends.
func createFrom(t testing.TB, admin, tpl string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "maestro_test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{tpl}.Sanitize())); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("dbtest: connect for cleanup: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database: %v", err)
		}
	})
	dsn, err := delayed(withDatabase(admin, name))
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return dsn
}

// Pool creates a fresh migrated database for t and returns a pool on it,
// closed when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("dbtest: parse the pool config: %v", err)
	}
	cfg.AfterConnect = pgparam.AfterConnect(cfg.AfterConnect) // as dbconn.Open
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
