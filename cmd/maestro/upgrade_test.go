package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
)

// upgradeRuns is how many runs are in flight while the release changes.
const upgradeRuns = 1000

// upgradeWorkflow: each run sleeps long enough to be in flight across the
// whole upgrade (its sleep is a timer, no worker held), then ends in a
// chain of NoOps on whichever release runs it by then.
const upgradeWorkflow = `{"properties":{"owner":"upgrade","run_strategy":{"rule":"PARALLEL","workflow_concurrency":1000}},
"workflow":{"id":"upgrade","steps":[
	{"step":{"id":"s0","type":"NoOp","transition":{"successors":{"s1":"true"}}}},
	{"step":{"id":"s1","type":"Sleep","sleep_seconds":%d,"transition":{"successors":{"s2":"true"}}}},
	{"step":{"id":"s2","type":"NoOp","transition":{"successors":{"s3":"true"}}}},
	{"step":{"id":"s3","type":"Sleep","sleep_seconds":1,"transition":{"successors":{"s4":"true"}}}},
	{"step":{"id":"s4","type":"NoOp"}}]}}`

const upgradeSteps = 5

// releaseEngine runs `maestro engine` of binary bin against dsn.
type releaseEngine struct {
	node string
	cmd  *exec.Cmd
	done chan error
	logs *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startReleaseEngine(t *testing.T, bin, dsn, node string) *releaseEngine {
	t.Helper()
	e := &releaseEngine{node: node, done: make(chan error, 1), logs: &syncBuffer{}}
	e.cmd = exec.Command(bin, "engine")
	e.cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "MAESTRO_NODE_ID="+node,
		"MAESTRO_GROUP_COUNT=8", "MAESTRO_LEASE=3s")
	e.cmd.Stderr = e.logs
	if testing.Verbose() {
		e.cmd.Stderr = io.MultiWriter(e.logs, os.Stderr)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- e.cmd.Wait() }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.done
		e.done <- nil
	})
	return e
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (e *releaseEngine) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-e.done:
		e.done <- err
		if err != nil {
			t.Fatalf("engine %s did not exit cleanly on SIGTERM: %v\n%s", e.node, err, e.logs.String())
		}
	case <-time.After(within):
		t.Fatalf("engine %s still running %s after SIGTERM", e.node, within)
	}
}

// upgradeClient calls a release's REST API.
type upgradeClient struct{ addr atomic.Value }

func (c *upgradeClient) call(method, path string, body any) (int, map[string]any, error) {
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+c.addr.Load().(string)+path, in)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("user", "upgrade")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return resp.StatusCode, out, nil
}

// startMany starts runs first … first+n-1 (request ids upgrade-<i>), 8 at a
// time, and fails the test on any answer but 200.
func (c *upgradeClient) startMany(t *testing.T, first, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				code, out, err := c.call("POST", "/api/v3/workflows/upgrade/versions/latest/actions/start",
					map[string]any{"request_id": "upgrade-" + strconv.Itoa(i)})
				if err != nil || code != 200 {
					errs <- fmt.Errorf("start %d: %d %v %v", i, code, out, err)
				}
			}
		}()
	}
	for i := first; i < first+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// migrateWith runs `maestro migrate` of bin with env added.
func migrateWith(bin string, env ...string) ([]byte, error) {
	cmd := exec.Command(bin, "migrate")
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// upgradeFrom is the release the upgrade starts from:
// MAESTRO_UPGRADE_FROM, else the release before the newest migration
// (previousRelease), so that the upgrade applies a migration under load.
func upgradeFrom(t *testing.T) string {
	t.Helper()
	if ref := os.Getenv("MAESTRO_UPGRADE_FROM"); ref != "" {
		return ref
	}
	return previousRelease(t)
}

// TestUpgradeUnderLoad upgrades a deployment from the previous release to
// this tree while 1,000 runs are in flight, as a deploy does: the previous
// release's two engines and API serve; this tree's `maestro migrate`
// applies the new migrations; engines are replaced one at a time (a new one
// starts, then an old one gets SIGTERM and hands its groups over); the API
// switches last. Every run must succeed with exactly one attempt per step:
// none lost, none doubled, none stuck. `make upgrade` runs it
// (MAESTRO_UPGRADE=1); it takes a minute or two after the builds.
func TestUpgradeUnderLoad(t *testing.T) {
	if os.Getenv("MAESTRO_UPGRADE") == "" {
		t.Skip("set MAESTRO_UPGRADE=1 (make upgrade) to run the upgrade under load")
	}
	ref := upgradeFrom(t)
	began := time.Now()
	oldBin := buildRelease(t, ref)
	newBin := maestroBinary(t)
	t.Logf("built %s and this tree in %s", ref, time.Since(began).Round(time.Millisecond))

	ctx := context.Background()
	dsn := dbtest.EmptyURL(t)
	env := "DATABASE_URL=" + dsn
	// The previous release's deployment: its schema, two engines, its API.
	if out, err := migrateWith(oldBin, env); err != nil {
		t.Fatalf("%s migrate: %v\n%s", ref, err, out)
	}
	old1 := startReleaseEngine(t, oldBin, dsn, "old-1")
	old2 := startReleaseEngine(t, oldBin, dsn, "old-2")
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	waitOwnedWithin(t, pool, map[string]int{"old-1": 4, "old-2": 4}, 60*time.Second)
	oldAPI := startServerBinary(t, oldBin, []string{"api", "--trust-user-header"}, env, "MAESTRO_GROUP_COUNT=8")
	api := &upgradeClient{}
	api.addr.Store(oldAPI.addr)

	sleep := 40
	if v, err := strconv.Atoi(os.Getenv("MAESTRO_UPGRADE_SLEEP")); err == nil && v > 0 {
		sleep = v
	}
	if code, out, err := api.call("POST", "/api/v3/workflows", json.RawMessage(fmt.Sprintf(upgradeWorkflow, sleep))); err != nil || code != 200 {
		t.Fatalf("push: %d %v %v", code, out, err)
	}
	began = time.Now()
	api.startMany(t, 0, upgradeRuns)
	t.Logf("%d runs started through %s's API in %s", upgradeRuns, ref, time.Since(began).Round(time.Millisecond))
	inFlight := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE status NOT IN ('SUCCEEDED','FAILED','STOPPED','TIMED_OUT')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := inFlight(); n < upgradeRuns*9/10 {
		t.Fatalf("only %d of %d runs in flight when the upgrade begins (raise MAESTRO_UPGRADE_SLEEP on a slow machine)", n, upgradeRuns)
	}
	upgradeAt := time.Now()

	// 1. Migrate with the new release while the old one runs.
	if out, err := migrateWith(newBin, env); err != nil {
		t.Fatalf("migrate with this tree under load: %v\n%s", err, out)
	}
	// The old API on the migrated schema still starts runs.
	api.startMany(t, upgradeRuns, 50)

	// 2. Replace the engines one at a time: a new one first, then SIGTERM
	// to an old one, whose groups the new one takes.
	startReleaseEngine(t, newBin, dsn, "new-1")
	old1.stop(t, 60*time.Second)
	waitOwnedWithin(t, pool, map[string]int{"old-1": 0, "new-1": 4, "old-2": 4}, 60*time.Second)
	startReleaseEngine(t, newBin, dsn, "new-2")
	old2.stop(t, 60*time.Second)
	waitOwnedWithin(t, pool, map[string]int{"old-1": 0, "old-2": 0, "new-1": 4, "new-2": 4}, 60*time.Second)
	t.Logf("engines replaced with %d runs in flight, %s after the upgrade began", inFlight(), time.Since(upgradeAt).Round(time.Millisecond))

	// 3. Switch the API: the new one serves, then the old one stops.
	newAPI := startServerBinary(t, newBin, []string{"api", "--trust-user-header"}, env)
	api.addr.Store(newAPI.addr)
	api.startMany(t, upgradeRuns+50, 50)
	// A start repeated across the switch is the same run (request ids).
	api.startMany(t, 0, 10)
	total := upgradeRuns + 100

	// Every run ends, succeeded, with one attempt per step.
	deadline := time.Now().Add(time.Duration(sleep)*time.Second + 4*time.Minute)
	for {
		var runs, done int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status IN ('SUCCEEDED','FAILED','STOPPED','TIMED_OUT'))
			FROM workflow_instance WHERE workflow_id = 'upgrade'`).Scan(&runs, &done); err != nil {
			t.Fatal(err)
		}
		if runs != total {
			t.Fatalf("%d runs of upgrade, want %d (one per request id)", runs, total)
		}
		if done == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs still unfinished (stuck) %s after the upgrade began", total-done, total, time.Since(upgradeAt).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	var succeeded, steps, single int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_instance WHERE workflow_id = 'upgrade' AND status = 'SUCCEEDED'`).Scan(&succeeded); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE attempt_id = 1 AND status = 'SUCCEEDED') FROM step_instance WHERE workflow_id = 'upgrade'`).Scan(&steps, &single); err != nil {
		t.Fatal(err)
	}
	if succeeded != total || steps != total*upgradeSteps || single != steps {
		t.Errorf("after the upgrade: %d of %d runs succeeded; %d step rows (want %d), %d of them a single SUCCEEDED attempt",
			succeeded, total, steps, total*upgradeSteps, single)
	}
	var pending int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM maestro_queue`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	var owners []string
	rows, err := pool.Query(ctx, `SELECT DISTINCT owner FROM flow_group WHERE owner IS NOT NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		owners = append(owners, o)
	}
	rows.Close()
	if len(owners) != 2 || owners[0] != "new-1" || owners[1] != "new-2" {
		t.Errorf("group owners after the upgrade = %v, want [new-1 new-2]", owners)
	}
	t.Logf("upgrade from %s: %d runs, all succeeded, %d step attempts, none repeated; %d outbox messages left; %s from the upgrade's start to the last run's end",
		ref, total, steps, pending, time.Since(upgradeAt).Round(time.Millisecond))
}
