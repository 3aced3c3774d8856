package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/instance"
	"github.com/maestro-aws/maestro/engine/workflow"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// maestroBinary builds the real binary once per test run, or returns
// MAESTRO_TEST_BINARY (a binary built elsewhere, e.g. from an older commit
// to show a test fails there).
func maestroBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("MAESTRO_TEST_BINARY"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "maestro-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "maestro")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build maestro: %v", buildErr)
	}
	return binPath
}

const killGroups = 4

// engineProcess runs `maestro engine` against dsn, with env added to its
// environment.
func engineProcess(t testing.TB, dsn, node string, maxGroups string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(maestroBinary(t), "engine")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_NODE_ID="+node,
		"MAESTRO_GROUP_COUNT=4", "MAESTRO_MAX_GROUPS="+maxGroups, "MAESTRO_LEASE=2s")
	cmd.Env = append(cmd.Env, env...)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

type killFixture struct {
	pool       *pgxpool.Pool
	runs       *execution.Service
	workflowID string
	insts      []*execution.Instance
}

// openPool opens a pool on dsn, closed when the test ends.
func openPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// pushDefinitions stores definitions (Maestro JSON) as the user tester.
func pushDefinitions(t testing.TB, defs *definition.Store, jsons ...string) {
	t.Helper()
	for _, def := range jsons {
		d, err := workflow.DecodeJSON([]byte(def))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := defs.Create(context.Background(), d, "tester"); err != nil {
			t.Fatal(err)
		}
	}
}

// sleepyWorkflow is a chain of sleeps.
const sleepyWorkflow = `{"properties":{"owner":"tester","run_strategy":"PARALLEL"},"workflow":{"id":"sleepy","steps":[
	{"step":{"id":"s1","type":"Sleep","sleep_seconds":0.4,"transition":{"successors":{"s2":"true"}}}},
	{"step":{"id":"s2","type":"Sleep","sleep_seconds":0.4,"transition":{"successors":{"s3":"true"}}}},
	{"step":{"id":"s3","type":"Sleep","sleep_seconds":0.4,"transition":{"successors":{"s4":"true"}}}},
	{"step":{"id":"s4","type":"NoOp"}}]}}`

// chainDefinition is a definition (Maestro JSON) of workflow id whose
// steps s0 … s<n-1> run one after the other; step gives each step's type
// and its other fields (`"type":"NoOp"`), properties the definition's.
func chainDefinition(id, properties string, n int, step func(i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"properties":%s,"workflow":{"id":%q,"steps":[`, properties, id)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(`,"transition":{"successors":{"s%d":"true"}}`, i+1)
		}
		fmt.Fprintf(&b, `{"step":{"id":"s%d",%s%s}}`, i, step(i), next)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// startRuns pushes a chain of sleeps and starts n runs of it.
func startRuns(t *testing.T, dsn string, n int) *killFixture {
	t.Helper()
	return pushAndStart(t, dsn, n, sleepyWorkflow)
}

// pushAndStart pushes a definition and starts n runs of it.
func pushAndStart(t *testing.T, dsn string, n int, def string) *killFixture {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	defs := definition.NewStore(pool)
	d, err := workflow.DecodeJSON([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	if err := (workflow.Validator{}).Validate(d); err != nil {
		t.Fatal(err)
	}
	if _, err := defs.Create(ctx, d, "tester"); err != nil {
		t.Fatal(err)
	}
	f := &killFixture{pool: pool, runs: execution.New(pool, defs, killGroups), workflowID: d.Workflow.ID}
	for range n {
		res, err := f.runs.Start(ctx, execution.StartRequest{WorkflowID: d.Workflow.ID, Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		f.insts = append(f.insts, res.Instance)
	}
	return f
}

// waitProgress waits until some step attempts exist but runs are unfinished.
func (f *killFixture) waitProgress(t *testing.T, atLeast int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM step_instance WHERE status = 'SUCCEEDED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= atLeast {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no progress before the kill")
}

// checkFinished asserts every run succeeded with exactly one attempt per
// step: the runs resumed where they were, nothing ran twice.
func (f *killFixture) checkFinished(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	f.checkAllSucceeded(t, 60*time.Second)
	var bad int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM step_instance WHERE attempt_id <> 1 OR status <> 'SUCCEEDED'`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM step_instance`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if bad != 0 || total != 4*len(f.insts) {
		t.Errorf("%d step rows in all (want %d), %d not a single SUCCEEDED attempt", total, 4*len(f.insts), bad)
	}
}

// checkAllSucceeded waits for every run to end and asserts it succeeded.
func (f *killFixture) checkAllSucceeded(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, inst := range f.insts {
		for {
			got, err := f.runs.Instance(context.Background(), f.workflowID, inst.InstanceID, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.IsTerminal() {
				if got.Status != instance.WorkflowSucceeded {
					t.Errorf("run %d ended %s: %s", inst.InstanceID, got.Status, got.Timeline)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d still %s", inst.InstanceID, got.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Guarantee 3: kill -9 the only engine mid-run, start it again, and every
// run finishes correctly.
func TestKilledEngineRestartsAndFinishesEveryRun(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 10)
	p1 := engineProcess(t, dsn, "node-1", "4")
	f.waitProgress(t, 5)
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	engineProcess(t, dsn, "node-1-restarted", "4")
	f.checkFinished(t)
}

// Guarantee 3 with two engines: kill one; the other takes its groups over
// after their leases expire and finishes its runs. A SIGTERM then stops the
// survivor cleanly and releases its groups.
func TestSurvivorTakesOverKilledEnginesGroups(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 12)
	p1 := engineProcess(t, dsn, "node-1", "2")
	waitOwned(t, f.pool, "node-1", 2) // node-1 holds two groups before node-2 starts
	p2 := engineProcess(t, dsn, "node-2", "4")
	f.waitProgress(t, 6)
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	f.checkFinished(t)

	var owners []string
	rows, err := f.pool.Query(context.Background(), `SELECT DISTINCT COALESCE(owner, '') FROM flow_group`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		owners = append(owners, o)
	}
	rows.Close()
	if len(owners) != 1 || owners[0] != "node-2" {
		t.Errorf("group owners after takeover = %v, want only node-2", owners)
	}
	if err := p2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.Wait(); err != nil {
		t.Errorf("engine did not exit cleanly on SIGTERM: %v", err)
	}
	var held int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM flow_group WHERE owner IS NOT NULL`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d groups still owned after a clean stop", held)
	}
}

func waitOwned(t *testing.T, pool *pgxpool.Pool, node string, n int) {
	t.Helper()
	waitOwnedWithin(t, pool, map[string]int{node: n}, 20*time.Second)
}

// waitOwnedWithin waits until each node owns the number of groups given and
// returns how long that took.
func waitOwnedWithin(t testing.TB, pool *pgxpool.Pool, want map[string]int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := map[string]int{}
		rows, err := pool.Query(context.Background(), `SELECT owner, count(*) FROM flow_group WHERE owner IS NOT NULL GROUP BY owner`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var owner string
			var n int
			if err := rows.Scan(&owner, &n); err != nil {
				t.Fatal(err)
			}
			got[owner] = n
		}
		rows.Close()
		match := true
		for node, n := range want {
			match = match && got[node] == n
		}
		if match {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("group owners %v after %s, want %v", got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 15, defect 6: an engine killed and restarted under the same node id
// resumes its runs at once: it takes back the groups it leased and the
// queue messages it had claimed instead of waiting out a 20 s lease and
// the claims' 30 s time-to-live.
func TestEngineRestartedUnderSameNodeIDResumesAtOnce(t *testing.T) {
	t.Parallel()
	dsn := dbtest.URL(t)
	f := startRuns(t, dsn, 10)
	p1 := engineProcess(t, dsn, "node-same", "4", "MAESTRO_LEASE=20s")
	f.waitProgress(t, 5)
	if err := p1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p1.Wait()
	restarted := time.Now()
	engineProcess(t, dsn, "node-same", "4", "MAESTRO_LEASE=20s")
	f.checkFinished(t)
	if d := time.Since(restarted); d > 12*time.Second {
		t.Fatalf("runs finished %s after the restart; the lease is 20s", d.Round(time.Millisecond))
	}
}
