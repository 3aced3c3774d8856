package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/localpg"
)

// freshCluster starts a PostgreSQL cluster of its own (the "new cluster" a
// point-in-time restore creates) with an empty database, and returns that
// database's URL. The cluster is stopped and removed when t ends.
func freshCluster(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	dir := dbtest.ClusterDir() + "-restore-" + hex.EncodeToString(b[:])
	c, err := localpg.Open(ctx, localpg.Options{Dir: dir, Settings: dbtest.TestSettings})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop(context.Background())
		_ = os.RemoveAll(c.Dir)
		_ = os.RemoveAll(dir)
	})
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE restored"); err != nil {
		t.Fatal(err)
	}
	return c.URL("restored")
}

// drillReport parses the restore drill's "name value" lines.
func drillReport(t *testing.T, out string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			got[f[0]] = v
		}
	}
	return got
}

// TestRestoreDrill is the restore drill (.ci/restore-drill): a logical
// backup of a database taken while an engine runs 60 runs, restored into a
// fresh cluster. The old deployment goes on after the backup and is then
// lost (killed). Engines started on the restored copy take the flow groups
// over once the restored leases expire, and finish every run from the
// restore point: each run succeeds and each step has exactly one attempt
// in the restored database (nothing runs twice there; what the lost
// deployment did after the backup is the window docs/operations-runbooks.md
// describes).
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	bindir, err := localpg.FindBinDir()
	if err != nil {
		t.Skip(err)
	}
	for _, p := range []string{"pg_dump", "pg_restore", "psql"} {
		if _, err := os.Stat(filepath.Join(bindir, p)); err != nil {
			t.Skipf("%s missing beside initdb in %s", p, bindir)
		}
	}
	src := dbtest.URL(t)
	f := startRuns(t, src, 60)
	live := engineProcess(t, src, "live-1", "4")
	f.waitProgress(t, 30)

	target := freshCluster(t)
	dump := filepath.Join(t.TempDir(), "maestro.dump")
	cmd := exec.Command("bash", "../../.ci/restore-drill", src, target, dump)
	cmd.Env = append(os.Environ(), "PG_BINDIR="+bindir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restore drill: %v\n%s", err, out)
	}
	report := drillReport(t, string(out))
	t.Logf("restore drill:\n%s", out)
	if report["runs_in_flight"] == 0 || report["groups_owned"] == 0 {
		t.Fatalf("the backup was not taken mid-load: %v", report)
	}
	// The old deployment is lost after it went on for a while.
	time.Sleep(500 * time.Millisecond)
	_ = live.Process.Signal(syscall.SIGKILL)
	_ = live.Wait()

	// Engines on the restored copy, under new node ids, as new ECS tasks
	// on a restored cluster are; the restored leases are 2 s.
	engineProcess(t, target, "restored-1", "2")
	engineProcess(t, target, "restored-2", "4")
	pool := openPool(t, target)
	restored := &killFixture{pool: pool, runs: execution.New(pool, definition.NewStore(pool), killGroups),
		workflowID: f.workflowID, insts: f.insts}
	restored.checkFinished(t)
	var strays int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM flow_group WHERE owner IS NOT NULL AND owner NOT LIKE 'restored-%'`).Scan(&strays); err != nil {
		t.Fatal(err)
	}
	if strays != 0 {
		t.Errorf("%d flow groups still held by the lost deployment's nodes", strays)
	}
}
