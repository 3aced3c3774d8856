package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
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

// drillBinDir is where PostgreSQL's programs are; the test skips without
// the client programs the drill runs.
func drillBinDir(t *testing.T) string {
	t.Helper()
	bindir, err := localpg.FindBinDir()
	if err != nil {
		t.Skip(err)
	}
	for _, p := range []string{"pg_dump", "pg_restore", "psql", "pg_basebackup", "pg_resetwal"} {
		if _, err := os.Stat(filepath.Join(bindir, p)); err != nil {
			t.Skipf("%s missing beside initdb in %s", p, bindir)
		}
	}
	return bindir
}

// clusterDir is a data directory path of the test's own beside the shared
// test cluster's.
func clusterDir(t *testing.T, what string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return dbtest.ClusterDir() + "-" + what + "-" + hex.EncodeToString(b[:])
}

// openCluster starts a PostgreSQL cluster in dir (initialised when empty),
// stopped and removed when t ends.
func openCluster(t *testing.T, dir string) *localpg.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
	return c
}

// createDB creates an empty database on c and returns its URL.
func createDB(t *testing.T, c *localpg.Cluster, name string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return c.URL(name)
}

// drill runs .ci/restore-drill with args and returns its exit code, its
// output and the "name value" numbers in it.
func drill(t *testing.T, bindir string, args ...string) (int, string, map[string]float64) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../../.ci/restore-drill"}, args...)...)
	cmd.Env = append(os.Environ(), "PG_BINDIR="+bindir)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				got[f[0]] = v
			}
		}
	}
	return code, string(out), got
}

// asPostgres makes cmd (when not nil) run as the postgres user when the
// test runs as root (the clusters' owner then), and chowns paths to it.
func asPostgres(t *testing.T, cmd *exec.Cmd, paths ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("running as root without a postgres user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if cmd != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	for _, p := range paths {
		if out, err := exec.Command("chown", "-R", u.Uid+":"+u.Gid, p).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", p, err, out)
		}
	}
}

// drillRuns pushes a chain of three sleeps of sleep seconds each and a
// NoOp (the four steps checkFinished counts) and starts n runs of it: long
// enough to be in flight when a backup taken on a loaded machine ends.
func drillRuns(t *testing.T, dsn string, n int, sleep float64) *killFixture {
	t.Helper()
	return pushAndStart(t, dsn, n, chainDefinition("drill", `{"owner":"tester","run_strategy":{"rule":"PARALLEL","workflow_concurrency":100}}`, 4, func(i int) string {
		if i == 3 {
			return `"type":"NoOp"`
		}
		return fmt.Sprintf(`"type":"Sleep","sleep_seconds":%g`, sleep)
	}))
}

// resumeOnRestored starts two engines on the restored database (new node
// ids, as new ECS tasks are) and checks the runs of f: each succeeds with
// exactly one attempt per step there, no flow group stays with the lost
// deployment's node, and every event written after the restore sorts after
// every restored one (forwarders read them).
func resumeOnRestored(t *testing.T, target string, f *killFixture, restoredMaxTx float64) {
	t.Helper()
	engineProcess(t, target, "restored-1", "2")
	engineProcess(t, target, "restored-2", "4")
	pool := openPool(t, target)
	restored := &killFixture{pool: pool, runs: execution.New(pool, definition.NewStore(pool), killGroups),
		workflowID: f.workflowID, insts: f.insts}
	restored.checkFinished(t)
	waitOwnedWithin(t, pool, map[string]int{"restored-1": 2, "restored-2": 2}, 60*time.Second)
	ctx := context.Background()
	var strays, after int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flow_group WHERE owner IS NOT NULL AND owner NOT LIKE 'restored-%'`).Scan(&strays); err != nil {
		t.Fatal(err)
	}
	if strays != 0 {
		t.Errorf("%d flow groups still held by the lost deployment's node", strays)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM maestro_event WHERE tx::text::numeric > $1`, restoredMaxTx).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after == 0 {
		t.Errorf("no event written after the restore sorts after the restored ones (max tx %.0f)", restoredMaxTx)
	}
}

// TestRestoreDrill is the restore drill as an Aurora point-in-time restore
// does it: a base backup (with its WAL) of a cluster taken while an engine
// runs 60 runs, started as a new cluster. The old deployment goes on after
// the backup and is then lost (killed). Engines started on the copy take
// the flow groups over once the restored leases expire and finish every
// run from the restore point, each step once in the restored database
// (what the lost deployment did after the backup is the window
// docs/operations-runbooks.md describes).
func TestRestoreDrill(t *testing.T) {
	t.Parallel()
	bindir := drillBinDir(t)
	srcCluster := openCluster(t, clusterDir(t, "drill-src"))
	src := createDB(t, srcCluster, "maestro")
	if out, err := migrateWith(maestroBinary(t), "DATABASE_URL="+src); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	f := drillRuns(t, src, 60, 10)
	live := engineProcess(t, src, "live-1", "4")
	f.waitProgress(t, 30)

	backup := clusterDir(t, "drill-restored")
	code, out, _ := drill(t, bindir, "basebackup", srcCluster.URL("postgres"), backup)
	if code != 0 {
		t.Fatalf("base backup: %d\n%s", code, out)
	}
	t.Logf("base backup:\n%s", out)
	time.Sleep(500 * time.Millisecond) // the old deployment goes on, then is lost
	_ = live.Process.Signal(syscall.SIGKILL)
	_ = live.Wait()

	asPostgres(t, nil, backup)
	restoredCluster := openCluster(t, backup)
	target := restoredCluster.URL("maestro")
	code, out, report := drill(t, bindir, "report", target)
	t.Logf("restored copy:\n%s", out)
	if code != 0 || !strings.Contains(out, "event_positions forward") {
		t.Fatalf("report: %d\n%s", code, out)
	}
	if report["runs_in_flight"] == 0 || report["groups_owned"] == 0 {
		t.Fatalf("the backup was not taken mid-load: %v", report)
	}
	resumeOnRestored(t, target, f, report["max_event_xid"])
}

// A logical dump restored into a fresh cluster: its transaction ids start
// below the restored event positions, and the drill refuses the copy (exit
// 3) rather than let engines write events no forwarder would read. After
// pg_resetwal -x moves the stopped cluster's transaction ids past them, as
// docs/operations-runbooks.md says, the copy passes and engines finish
// every run on it.
func TestLogicalRestoreDrill(t *testing.T) {
	t.Parallel()
	bindir := drillBinDir(t)
	src := dbtest.URL(t)
	dir := clusterDir(t, "drill-logical")
	c := openCluster(t, dir)
	target := createDB(t, c, "restored")
	// The source's transaction ids ahead of the fresh cluster's, as any
	// deployment's are.
	srcPool := openPool(t, src)
	for {
		var srcXid, tgtXid int64
		_ = srcPool.QueryRow(context.Background(), `SELECT pg_current_xact_id()::text::bigint`).Scan(&srcXid)
		conn, err := pgx.Connect(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.QueryRow(context.Background(), `SELECT pg_current_xact_id()::text::bigint`).Scan(&tgtXid)
		conn.Close(context.Background())
		if srcXid > tgtXid+100 {
			break
		}
		for range 200 {
			if _, err := srcPool.Exec(context.Background(), `SELECT pg_current_xact_id()`); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := drillRuns(t, src, 40, 4)
	live := engineProcess(t, src, "live-1", "4")
	f.waitProgress(t, 10)

	code, out, report := drill(t, bindir, "logical", src, target, filepath.Join(t.TempDir(), "maestro.dump"))
	t.Logf("logical restore:\n%s", out)
	if report["runs_in_flight"] == 0 {
		t.Fatalf("the dump was not taken mid-load: %v", report)
	}
	if code != 3 || !strings.Contains(out, "behind the restored event positions") {
		t.Fatalf("logical restore into a fresh cluster: exit %d, want 3 and the event positions refused\n%s", code, out)
	}
	_ = live.Process.Signal(syscall.SIGKILL)
	_ = live.Wait()

	// The fix: past the restored positions, at a pg_xact segment boundary.
	maxTx := int64(report["max_event_xid"])
	next := (maxTx>>20 + 1) << 20
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	reset := exec.Command(filepath.Join(bindir, "pg_resetwal"), "-x", fmt.Sprint(next), "-D", c.Dir)
	asPostgres(t, reset)
	if out, err := reset.CombinedOutput(); err != nil {
		t.Fatalf("pg_resetwal: %v %s", err, out)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	target = c.URL("restored")
	if code, out, _ := drill(t, bindir, "report", target); code != 0 || !strings.Contains(out, "event_positions forward") {
		t.Fatalf("report after pg_resetwal: %d\n%s", code, out)
	}
	resumeOnRestored(t, target, f, report["max_event_xid"])
}
